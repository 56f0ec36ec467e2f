"""Which stored night a night confirms and bisects against: the last good one, not simply the newest. Pure."""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from perfci.errors import EXIT_OK


def last_good(nights: Sequence[tuple[str, str]], verdicts: Mapping[str, int],
              triaged: Iterable[str]) -> tuple[int, str]:
    """Which stored night confirm and bisect compare tonight with: the newest that was not red.

    ``nights``: (run id, commit) oldest first; ``verdicts``: run id -> the exit code its night
    recorded; ``triaged``: commits a triage record names. A night counts as good when it ended 0,
    recorded nothing (a store from before verdicts were kept), or was red at a commit the team
    triaged. Returns its index and a line for the summary ('' when it is the newest). With no good
    night at all, the oldest: the one before the red ones began."""
    shas = tuple(triaged)
    def good(run_id: str, sha: str) -> bool:
        code = verdicts.get(run_id)
        return code is None or code == EXIT_OK or any(t and sha.startswith(t) for t in shas)
    index = next((i for i in range(len(nights) - 1, -1, -1) if good(*nights[i])), 0)
    newer = len(nights) - 1 - index
    if newer == 0:
        return index, ""
    run_id, sha = nights[index]
    return index, (f"confirm and bisect compare with the last good night {run_id} ({sha[:12]}): the {newer} "
                   f"newer night(s) were red")

