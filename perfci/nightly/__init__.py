"""``perfci nightly``: one night of CI as one command (run or merge, judge, confirm, bisect, report, record).

:mod:`perfci.nightly.core` decides (plain data in, frozen verdicts out);
:mod:`perfci.nightly.stages` and :mod:`perfci.nightly.children` do the IO;
:mod:`perfci.nightly.night` runs the stages in order; :mod:`perfci.nightly.render`
writes summary.md, issue.md and verdict.json. See docs/nightly.md.
"""

NIGHT_BUDGET_S = 900.0  # the whole night, measuring to reports (--budget): a team keeps a 15-minute night on
