"""Files perfci writes and reads: atomically, and with one clear line when they cannot be.

Every file perfci writes (results CSVs, profiles, bisect journals and caches,
worker results) goes through :func:`atomic_write_text`, so a reader sees the old
file or the new one, never half of one, and a killed process loses nothing.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from perfci.errors import PerfciError


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` so that readers see the old file or the new one, never half.

    The temporary file lives in the target's directory so ``os.replace`` is a
    rename on one filesystem, which POSIX makes atomic.
    """
    target = Path(path)
    if target.is_dir():
        raise PerfciError(f"{path}: is a directory; give a file name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as err:
        raise PerfciError(f"{path}: cannot write ({err.strerror})") from None
    try:
        # mkstemp makes the file 0600; results are meant to be shared (CI artifacts).
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(err, OSError):
            raise PerfciError(f"{path}: cannot write ({err.strerror})") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_writable(path: str | os.PathLike) -> None:
    """Fail before any measuring if the results file could not be written."""
    target = Path(path)
    if target.is_dir():
        raise PerfciError(f"--out {path}: is a directory; give a file name, e.g. {target / 'results.csv'}")
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=parent)
    except OSError as err:
        raise PerfciError(f"--out {path}: cannot write in {parent} ({err.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def read_input_text(path: str, kind: str) -> str:
    """A results file's text, or one line saying why it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise PerfciError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PerfciError(f"{path}: is a directory, not a {kind} file") from None
    except UnicodeDecodeError:
        raise PerfciError(f"{path}: not a text file (cannot decode as UTF-8)") from None
    except OSError as err:
        raise PerfciError(f"{path}: cannot read ({err.strerror})") from None
    if not text.strip():
        raise PerfciError(f"{path}: the file is empty")
    return text
