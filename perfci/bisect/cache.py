"""The measurements of ``perfci bisect``, kept across runs: each decision's rounds, and failed builds.

A decision's rounds are its evidence, in the order they ran (a round pairs runs
of two or three commits taken within a second, so the rounds keep their
meaning when read again later). A rerun or ``--resume`` replays them through the
same sequential rule, reaching the same verdicts without a run, and goes on
measuring only where a decision was still open. The seconds spent count
against the decision's budget on replay too, so the same budget gives the same
answer; a larger one measures on.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from perfci.files import atomic_write_text

VERSION = 2  # 1 kept unpaired samples per commit; those cannot be paired afterwards and are not read


def _round_from_json(raw) -> tuple[tuple[str, float | None], ...]:
    return tuple((str(role), None if value is None else float(value)) for role, value in raw)


class Cache:
    """Rounds per decision and build failures per commit, in one JSON file, written after each change.

    Written atomically (temp file + rename), so a crash loses at most the rounds
    since the last write.
    """

    def __init__(self, path: Path | None):
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, dict] = {}
        if path is not None and path.is_file():
            try:
                doc = json.loads(path.read_text())
                if isinstance(doc, dict) and doc.get("version") == VERSION:
                    self._entries = dict(doc.get("entries", {}))
            except (ValueError, OSError):
                self._entries = {}  # a torn or foreign file only costs re-measuring

    def rounds(self, key: str) -> tuple[list, float]:
        """(rounds, seconds spent measuring them) of one decision; ([], 0) when none are kept."""
        with self._lock:
            entry = self._entries.get(key) or {}
        try:
            return [_round_from_json(r) for r in entry.get("rounds", ())], float(entry.get("seconds", 0.0))
        except (TypeError, ValueError):
            return [], 0.0

    def put_rounds(self, key: str, what: str, rounds, seconds: float) -> None:
        self._put(key, {"what": what, "rounds": [list(map(list, r)) for r in rounds], "seconds": seconds})

    def build_failed(self, key: str) -> str | None:
        with self._lock:
            return (self._entries.get(key) or {}).get("build_error")

    def put_build_failure(self, key: str, sha: str, reason: str) -> None:
        self._put(key, {"what": sha, "build_error": reason})

    def _put(self, key: str, entry: dict) -> None:
        with self._lock:
            self._entries[key] = entry
            if self.path is not None:
                # Written under the lock: two --jobs threads must not land out of order.
                atomic_write_text(self.path, json.dumps({"version": VERSION, "entries": self._entries}))
