"""Files perfci writes and reads: atomically, and with one clear line when they cannot be.

Every file perfci writes (results CSVs, profiles, bisect journals and caches,
worker results) goes through :func:`atomic_write_text`, so a reader sees the old
file or the new one, never half of one, and a killed process loses nothing.

Every input perfci reads (results CSVs and JSON, --cases and ``$PERFCI_CASES``,
a history store's runs and manifest, suites, perfci.toml and pyproject.toml)
goes through :func:`read_input_text`: only a regular file is read (a FIFO would
block forever, /dev/zero would fill the memory), and none larger than
``PERFCI_MAX_INPUT_MB`` (default 256 MiB).
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from perfci.errors import PerfciError

MAX_INPUT_ENV = "PERFCI_MAX_INPUT_MB"
DEFAULT_MAX_INPUT_MB = 256  # a 1M-row results CSV with clocks is about 230 MiB; raise it with PERFCI_MAX_INPUT_MB
_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a pipe (FIFO)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


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


def max_input_bytes() -> int:
    """The largest input perfci reads: ``$PERFCI_MAX_INPUT_MB`` MiB, default 256."""
    word = os.environ.get(MAX_INPUT_ENV, "").strip()
    if not word:
        return DEFAULT_MAX_INPUT_MB << 20
    try:
        mib = float(word)
    except ValueError:
        mib = float("nan")
    if not 0 < mib < 1 << 30:  # also refuses nan and inf
        raise PerfciError(f"${MAX_INPUT_ENV}={word}: give the largest input to read in MiB, a positive number "
                          f"(default {DEFAULT_MAX_INPUT_MB})")
    return int(mib * (1 << 20))


def is_present(path: str | os.PathLike) -> bool:
    """Whether anything is at ``path``: a file, a directory, a device, a FIFO or a link (even a dangling one).

    Where a missing input means "use a default", anything present is read (and refused
    if it cannot be), so a FIFO or a link to /dev/zero is an error, not a default.
    """
    return os.path.lexists(path)


def read_input_bytes(path: str, kind: str) -> bytes:
    """An input file's bytes, read only when it is a regular file within the size limit.

    Raises:
        PerfciError: one line naming ``path``: missing, not a regular file (a directory,
            FIFO, device or socket, also behind a symlink), larger than the limit, unreadable.
    """
    limit = max_input_bytes()
    try:
        # O_NONBLOCK: opening a FIFO that has no writer returns at once instead of blocking;
        # fstat below then refuses it. Regular files ignore the flag.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise PerfciError(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist") from None
        raise PerfciError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PerfciError(f"{path}: is a directory, not a {kind} file") from None
    except OSError as err:
        raise PerfciError(f"{path}: cannot read ({err.strerror})") from None
    try:
        _check_regular(path, kind, os.fstat(fd), limit)
        # One byte more than the limit: a file that grew while being read is caught too.
        data = _read_up_to(fd, limit + 1)
    except OSError as err:
        raise PerfciError(f"{path}: cannot read ({err.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise PerfciError(_too_large(path, kind, "more", limit))
    return data


def _check_regular(path: str, kind: str, info: os.stat_result, limit: int) -> None:
    for test, what in _NOT_REGULAR:
        if test(info.st_mode):
            if what == "a directory":
                raise PerfciError(f"{path}: is a directory, not a {kind} file")
            target = os.path.realpath(path)
            # /dev/fd/N links to "pipe:[...]", which names nothing worth showing.
            link = f" (a symbolic link to {target})" if os.path.islink(path) and os.path.exists(target) else ""
            raise PerfciError(f"{path}: is {what}{link}, not a {kind} file (perfci reads only regular files)")
    if info.st_size > limit:
        raise PerfciError(_too_large(path, kind, f"{info.st_size / (1 << 20):.0f} MiB", limit))


def _read_up_to(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _too_large(path: str, kind: str, size: str, limit: int) -> str:
    return (f"{path}: {size} is larger than the {limit / (1 << 20):g} MiB perfci reads as a {kind} file; "
            f"set {MAX_INPUT_ENV} to raise the limit")


def read_input_text(path: str, kind: str, *, allow_empty: bool = False) -> str:
    """An input file's text (UTF-8, a BOM dropped), or one line saying why it cannot be read.

    Checked as :func:`read_input_bytes` checks it; an empty file is an error unless ``allow_empty``.
    """
    data = read_input_bytes(path, kind)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PerfciError(f"{path}: not a text file (cannot decode as UTF-8)") from None
    if not allow_empty and not text.strip():
        raise PerfciError(f"{path}: the file is empty")
    return text
