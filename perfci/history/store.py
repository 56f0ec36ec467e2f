"""The history store on disk: a directory, one results CSV per run, a versioned manifest.

::

    STORE/
      perfci-history.json              {"format": "perfci-history", "schema": 1,
                                        "device_name": "NVIDIA H200", "arch": "sm_90", ...}
      runs/20261130T190228Z_decode_550444fbd733_1a2b3c4d5e.csv
      runs/...                         each exactly the CSV `perfci run` wrote

Why a directory and not one database file: it can live in a git branch and be
merged (two CI jobs that each add a run add two different files, so they never
conflict; github-action-benchmark keeps its data in a branch the same way),
every run stays readable with any CSV tool, and adding is one atomic
create-if-absent of a new file, so concurrent adds need no lock.

Writes: a run is written with :func:`perfci.files.atomic_write_text` under a
staging name, then hard-linked to its final name, which fails if that name
exists. So two adds of different runs never touch the same file, the same run
added twice (even at the same moment) lands once and the second add is
refused, and a reader sees a run whole or not at all. The manifest is created
the same way, so two first adds to an empty directory agree on one device.
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from perfci.errors import PerfciError
from perfci.files import atomic_write_text, is_present, read_input_text
from perfci.history import canary, triage
from perfci.history.model import (STORE_FORMAT, STORE_SCHEMA, History, Manifest, Run, RunInfo,
                                  run_info)
from perfci.history.triage import TriageRecord
from perfci.results import read_results_cells, read_results_text

MANIFEST = "perfci-history.json"
RUNS = "runs"


# --------------------------------------------------------------------------- manifest


def _manifest_from_text(store: Path, text: str) -> Manifest:
    where = store / MANIFEST
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise PerfciError(f"{where}: corrupt store manifest (not valid JSON: {err.msg}, "
                          f"line {err.lineno})") from None
    if not isinstance(data, dict) or data.get("format") != STORE_FORMAT:
        raise PerfciError(f"{where}: not a perfci history manifest (its 'format' is not '{STORE_FORMAT}')")
    schema = data.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise PerfciError(f"{where}: corrupt store manifest ('schema' must be an integer)")
    if schema > STORE_SCHEMA:
        raise PerfciError(f"{where}: store schema {schema} was written by a newer perfci; "
                          f"this one reads schema {STORE_SCHEMA}: upgrade perfci")
    if schema < 1:
        raise PerfciError(f"{where}: corrupt store manifest (schema {schema})")
    for key in ("device_name", "arch"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise PerfciError(f"{where}: corrupt store manifest ('{key}' must be a non-empty string)")
    created = data.get("created", "")
    return Manifest(device_name=data["device_name"], arch=data["arch"], schema=schema,
                    created=created if isinstance(created, str) else "")


def read_manifest(store: str | os.PathLike) -> Manifest:
    """The manifest of an existing store, or one line saying why STORE is not one."""
    root = Path(store)
    if not root.exists():
        raise PerfciError(f"{store}: no such history store (create one with `perfci history add {store} RUN.csv`)")
    if not root.is_dir():
        raise PerfciError(f"{store}: not a history store (a store is a directory)")
    if not is_present(root / MANIFEST):  # anything by that name is read: a FIFO is refused there
        raise PerfciError(f"{store}: not a perfci history store (no {MANIFEST})")
    return _manifest_from_text(root, read_input_text(str(root / MANIFEST), "manifest"))


def _open_for_add(root: Path, info: RunInfo) -> Manifest:
    """The store's manifest, creating the store when ROOT is new or an empty directory."""
    if root.exists() and not root.is_dir():
        raise PerfciError(f"{root}: not a history store (a store is a directory)")
    if (root / MANIFEST).exists():
        return read_manifest(root)
    if root.exists() and any(not p.name.startswith(".") for p in root.iterdir()):
        if (root / MANIFEST).exists():  # a concurrent first add created the store meanwhile
            return read_manifest(root)
        raise PerfciError(f"{root}: not a perfci history store (no {MANIFEST}) and not empty; "
                          f"refusing to write into it")
    manifest = Manifest(device_name=info.device_name, arch=info.arch,
                        created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    text = json.dumps(manifest.to_dict(), indent=2) + "\n"
    _create_exclusive(root / MANIFEST, text)  # a concurrent first add may win: fine, read it back
    return read_manifest(root)


def _create_exclusive(target: Path, text: str) -> bool:
    """Write TARGET whole if it does not exist yet; False when it already did.

    ``atomic_write_text`` writes a staging file (temp + rename, fsynced); the
    hard link then creates TARGET only if absent, atomically, so a concurrent
    writer of the same name either wins or sees FileExistsError.
    """
    staging = target.parent / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.staging"
    atomic_write_text(staging, text)
    try:
        os.link(staging, target)
        return True
    except FileExistsError:
        return False
    except OSError as err:
        # A filesystem without hard links: fall back to rename after a check (a
        # narrow race between two adds of the same run, documented in docs/history.md).
        if target.exists():
            return False
        try:
            os.replace(staging, target)
            return True
        except OSError:
            raise PerfciError(f"{target}: cannot write ({err.strerror})") from None
    finally:
        try:
            os.unlink(staging)
        except FileNotFoundError:
            pass


# --------------------------------------------------------------------------- add / load


def add_runs(store: str | os.PathLike, csv_paths: list[str]) -> list[RunInfo]:
    """Append results CSVs to STORE (created when new); returns each run's identity.

    Every file is read and checked before anything is written, so a bad second
    file leaves the store as it was.

    Raises:
        PerfciError: a CSV is bad or lacks its environment columns, STORE is not
            a store (foreign, corrupt, newer schema), a run is of another device
            than the store's, or a run is already in it (or given twice).
    """
    staged = []
    for path in csv_paths:
        text, table, cells = read_results_text(path)
        staged.append((path, text, run_info(path, table, cells)))
    return add_read_runs(store, staged)


def add_read_runs(store: str | os.PathLike, staged: Sequence[tuple[str, str, RunInfo]]) -> list[RunInfo]:
    """:func:`add_runs` of runs already read and checked: (the file each was read from, its text, its
    identity from :func:`perfci.history.model.run_info`)."""
    root = Path(store)
    seen: dict[str, str] = {}
    for path, _, info in staged:
        if info.run_id in seen:
            raise PerfciError(f"{path}: the same run as {seen[info.run_id]} (suite {info.suite or '-'}, "
                              f"{info.timestamp}); give each run once")
        seen[info.run_id] = path
        first = staged[0][2]
        if (info.device_name, info.arch) != (first.device_name, first.arch):
            raise PerfciError(f"{path}: ran on {info.device_name} ({info.arch}), {staged[0][0]} on "
                              f"{first.device_name} ({first.arch}); one store holds one device kind")
    # Only now may a new store's manifest be created: every file agrees on its device.
    manifest = _open_for_add(root, staged[0][2])
    runs = root / RUNS
    for path, _, info in staged:
        if (info.device_name, info.arch) != (manifest.device_name, manifest.arch):
            raise PerfciError(f"{path}: ran on {info.device_name} ({info.arch}) but {store} holds runs of "
                              f"{manifest.device_name} ({manifest.arch}); keep one store per device kind")
        if (runs / f"{info.run_id}.csv").exists():
            raise PerfciError(_already(path, info, store))
    try:
        runs.mkdir(exist_ok=True)
    except OSError as err:
        raise PerfciError(f"{runs}: cannot create ({err.strerror})") from None
    for path, text, info in staged:
        if not _create_exclusive(runs / f"{info.run_id}.csv", text):  # another add won the race
            raise PerfciError(_already(path, info, store))
    return [info for _, _, info in staged]


def _already(path: str, info: RunInfo, store: str | os.PathLike) -> str:
    return (f"{path}: this run (suite {info.suite or '-'}, sha {info.short_sha}, {info.timestamp}) is "
            f"already in {store} as {RUNS}/{info.run_id}.csv")


def run_files(store: str | os.PathLike) -> list[Path]:
    runs = Path(store) / RUNS
    if not runs.is_dir():
        return []
    return sorted(p for p in runs.iterdir() if p.suffix == ".csv" and not p.name.startswith("."))


def load(store: str | os.PathLike) -> History:
    """Read a whole store, validating every run; runs oldest first.

    Raises:
        PerfciError: STORE is missing, foreign or corrupt (a run file that does
            not parse, or of another device than the manifest's), naming the file.
    """
    manifest = read_manifest(store)
    runs = []
    for path in run_files(store):
        table, cells = read_results_cells(path)
        info = run_info(str(path), table, cells)
        if (info.device_name, info.arch) != (manifest.device_name, manifest.arch):
            raise PerfciError(f"{path}: corrupt store: this run is of {info.device_name} ({info.arch}), "
                              f"the store of {manifest.device_name} ({manifest.arch})")
        if path.stem != info.run_id:
            raise PerfciError(f"{path}: corrupt store: the file name does not match its run "
                              f"(expected {info.run_id}.csv); was it edited or renamed by hand?")
        runs.append(Run(info, table))
    runs.sort(key=lambda r: (r.info.when, r.info.run_id))
    return History(str(store), manifest, tuple(runs))


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Binary sibling of :func:`perfci.files.atomic_write_text` for the PNGs (temp + rename)."""
    target = Path(path)
    tmp = target.parent / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except OSError as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise PerfciError(f"{path}: cannot write ({err.strerror})") from None


# --------------------------------------------------------------------------- the nightly canary's records

CANARY = "canary"  # STORE/canary/<run id>.json: one night's canary (perfci.history.canary), beside its run


def add_canary(store: str | os.PathLike, record) -> bool:
    """Write a night's canary record (a :class:`perfci.history.canary.CanaryNight`) beside its run.

    Created once, like a run: False when the record is already there (a re-run of the night).
    """
    folder = Path(store) / CANARY
    try:
        folder.mkdir(exist_ok=True)
    except OSError as err:
        raise PerfciError(f"{folder}: cannot create ({err.strerror})") from None
    return _create_exclusive(folder / f"{record.run_id}.json", record.to_json())


def load_canaries(store: str | os.PathLike) -> list:
    """Every canary record of STORE, oldest first (none: an empty list); a corrupt one is one line."""
    folder = Path(store) / CANARY
    if not folder.is_dir():
        return []
    nights = []
    for path in sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")):
        try:
            nights.append(canary.from_dict(json.loads(read_input_text(str(path), "canary record")), str(path)))
        except json.JSONDecodeError as err:
            raise PerfciError(f"{path}: corrupt canary record (not valid JSON: {err.msg})") from None
        except ValueError as err:
            raise PerfciError(str(err)) from None
    return sorted(nights, key=lambda c: (c.timestamp, c.run_id))


# --------------------------------------------------------------------------- the nights' verdicts

VERDICTS = "verdicts"  # STORE/verdicts/<run id>.json: the exit code the night of that run ended with


def add_verdict(store: str | os.PathLike, run_id: str, exit_code: int, headline: str) -> bool:
    """Record the exit code (and headline) of the night that added run ``run_id``; once, like a run."""
    folder = Path(store) / VERDICTS
    try:
        folder.mkdir(exist_ok=True)
    except OSError as err:
        raise PerfciError(f"{folder}: cannot create ({err.strerror})") from None
    text = json.dumps({"run_id": run_id, "exit_code": int(exit_code), "headline": headline}, indent=2) + "\n"
    return _create_exclusive(folder / f"{run_id}.json", text)


def load_verdicts(store: str | os.PathLike) -> dict[str, int]:
    """run id -> the exit code its night ended with, for every night that recorded one; a corrupt
    record is one line."""
    folder = Path(store) / VERDICTS
    if not folder.is_dir():
        return {}
    out: dict[str, int] = {}
    for path in sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")):
        try:
            data = json.loads(read_input_text(str(path), "night verdict"))
            out[str(data["run_id"])] = int(data["exit_code"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise PerfciError(f"{path}: corrupt night verdict (want run_id and exit_code)") from None
    return out


# --------------------------------------------------------------------------- triage records

TRIAGE = "triage"  # STORE/triage/<time>_<sha>_<state>_<random>.json: one record each (perfci.history.triage)


def add_triage(store: str | os.PathLike, record: TriageRecord) -> TriageRecord:
    """Write one triage record into an existing STORE, as a file of its own; returns it with its id.

    Its name is new each time (time, commit, state, a random part), so two
    writers at once, or two CI jobs committing to one git branch, never touch
    one file; it is created whole or not at all, like a run.
    """
    read_manifest(store)
    folder = Path(store) / TRIAGE
    try:
        folder.mkdir(exist_ok=True)
    except OSError as err:
        raise PerfciError(f"{folder}: cannot create ({err.strerror})") from None
    for _ in range(3):
        stem = triage.file_stem(record)
        if _create_exclusive(folder / f"{stem}.json", record.to_json()):
            return replace(record, record_id=stem)
    raise PerfciError(f"{folder}: cannot find a free name for the record")  # pragma: no cover - 3 uuid clashes


def load_triage(store: str | os.PathLike) -> list[TriageRecord]:
    """Every triage record of STORE, oldest first (none: an empty list); a corrupt one is one line."""
    folder = Path(store) / TRIAGE
    if not folder.is_dir():
        return []
    records = []
    for path in sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")):
        try:
            data = json.loads(read_input_text(str(path), "triage record"))
            records.append(triage.from_dict(data, str(path), path.stem))
        except json.JSONDecodeError as err:
            raise PerfciError(f"{path}: corrupt triage record (not valid JSON: {err.msg})") from None
        except ValueError as err:
            raise PerfciError(str(err)) from None
    return sorted(records, key=lambda r: (r.when, r.record_id))
