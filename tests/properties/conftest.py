"""Hypothesis keeps its caches in a scratch directory, not in the checkout."""
import tempfile

from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(tempfile.mkdtemp(prefix="perfci-hypothesis-"))
