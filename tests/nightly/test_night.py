"""perfci.nightly.night: the compile diff's section of the reports when the diff could not be made."""
from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

from perfci.nightly import night
from tests.markdown_live import live, shown

ROOT = Path(__file__).resolve().parents[2]


def test_a_compile_diff_that_failed_is_said_in_the_reports_with_nothing_in_it_live(tmp_path):
    # The reason is a PerfciError's line (the baseline path, or perfci compile's last stderr line): here a real
    # one, a baseline folder with no resources file, named to break out of the section.
    baseline = tmp_path / "@team #12 `x` | <img src=x> [x](y)\n# heading"
    baseline.mkdir()
    cfg = SimpleNamespace(suite=str(ROOT / "suites" / "smoke.toml"), out=tmp_path)
    checkout = SimpleNamespace(project=SimpleNamespace(suite_word=None, repo_root=str(ROOT)))
    section, record, warning = night._compile_diff(cfg, checkout, None, str(baseline), io.StringIO())
    assert "no smoke-ARCH.json" in record["error"] and warning.startswith("compile diff not diffed against")
    assert section.startswith("#### Compiled resources\n\n") and section.count("\n") == 3  # one line, no heading made
    assert live(section) == [], section
    assert not re.search(r"(?<!\\)<img", section) and "@\u200dteam" in section and "#\u200d12" in section
    assert "[x](y) # heading" in shown(section)  # shown as written, on one line
