"""Hypothesis keeps its caches in a scratch directory, not in the checkout, removed when the tests end."""
import atexit
import shutil
import tempfile

from hypothesis.configuration import set_hypothesis_home_dir

_HOME = tempfile.mkdtemp(prefix="perfci-hypothesis-")
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
set_hypothesis_home_dir(_HOME)
