"""The measurements of ``perfci bisect``, kept across runs: samples per (commit, bench, build, metric)."""
from __future__ import annotations

import json
import threading
from pathlib import Path

from perfci.bisect.core import Samples
from perfci.files import atomic_write_text


class Cache:
    """Samples per (commit, bench, build, metric), kept across runs in one JSON file.

    Written after every commit (temp file + rename), so a crash loses at most
    the commit in flight.
    """

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, dict] = {}
        if path.is_file():
            try:
                self._entries = json.loads(path.read_text())
            except (ValueError, OSError):
                self._entries = {}  # a torn or foreign file only costs re-measuring

    def get(self, key: str) -> Samples:
        with self._lock:
            entry = self._entries.get(key)
        if not entry:
            return Samples()
        return Samples(tuple(float(v) for v in entry.get("values", ())), int(entry.get("failures", 0)))

    def build_failed(self, key: str) -> str | None:
        with self._lock:
            return (self._entries.get(key) or {}).get("build_error")

    def put(self, key: str, sha: str, samples: Samples, build_error: str | None = None) -> None:
        with self._lock:
            self._entries[key] = {"sha": sha, "values": list(samples.values), "failures": samples.failures,
                                  "build_error": build_error}
            # Written under the lock: two --jobs threads must not land out of order.
            atomic_write_text(self.path, json.dumps(self._entries, indent=1))
