# A kernel module written as a test module: pytest.skip at module level raises a BaseException.
import pytest

pytest.skip("no GPU here", allow_module_level=True)
