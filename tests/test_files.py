"""perfci.files: atomic writes that never leave half a file, and one-line read errors."""
from __future__ import annotations

import os
import time

import pytest

from perfci.errors import PerfciError
from perfci.files import DEFAULT_MAX_INPUT_MB, MAX_INPUT_ENV, atomic_write_text, check_writable, read_input_text


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "keep.csv"
    path.write_text("old contents\n")

    with pytest.raises(TypeError):
        atomic_write_text(path, 12345)  # not text: the write fails midway
    assert path.read_text() == "old contents\n"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.csv"]  # no temp file left behind


def test_atomic_write_replaces_the_whole_file_and_keeps_it_shared_readable(tmp_path):
    path = tmp_path / "sub" / "out.csv"
    atomic_write_text(path, "a\n")
    atomic_write_text(path, "b\n")
    assert path.read_text() == "b\n"
    assert path.stat().st_mode & 0o044  # group/other may read: results are CI artifacts


def test_atomic_write_to_a_directory_is_one_clear_error(tmp_path):
    with pytest.raises(PerfciError, match="is a directory"):
        atomic_write_text(tmp_path, "x")


def test_check_writable_refuses_a_directory_and_leaves_no_probe(tmp_path):
    with pytest.raises(PerfciError, match="--out .*is a directory"):
        check_writable(tmp_path)
    check_writable(tmp_path / "new.csv")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content, why", [(None, "no such file"), ("", "the file is empty"),
                                          (b"\xff\xfe\x00bad", "not a text file")])
def test_read_input_text_says_why_in_one_line(tmp_path, content, why):
    path = tmp_path / "in.csv"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(PerfciError, match=why):
        read_input_text(str(path), "CSV")


# --------------------------------------------------------------------------- what is not a regular file


def not_regular(tmp_path, what: str) -> str:
    """A path to something that is not a regular file (made in ``tmp_path``)."""
    path = tmp_path / f"{what}.csv"
    if what == "fifo":
        os.mkfifo(path)
    elif what == "link-to-dev-zero":
        path.symlink_to("/dev/zero")
    elif what == "link-to-fifo":
        os.mkfifo(tmp_path / "real-fifo")
        path.symlink_to(tmp_path / "real-fifo")
    elif what == "directory":
        path.mkdir()
    else:
        return what  # a device by its own name
    return str(path)


@pytest.mark.parametrize("what, why", [
    ("fifo", "is a pipe (FIFO), not a CSV file (perfci reads only regular files)"),
    ("link-to-fifo", "is a pipe (FIFO) (a symbolic link to"),
    ("link-to-dev-zero", "is a character device (a symbolic link to /dev/zero), not a CSV file"),
    ("/dev/zero", "/dev/zero: is a character device, not a CSV file"),
    ("/dev/urandom", "/dev/urandom: is a character device"),
    ("/dev/null", "/dev/null: is a character device"),
    ("directory", "is a directory, not a CSV file"),
])
def test_only_a_regular_file_is_read_and_nothing_blocks(tmp_path, what, why):
    path = not_regular(tmp_path, what)
    started = time.monotonic()
    with pytest.raises(PerfciError) as err:
        read_input_text(path, "CSV")
    assert why in err.value.message and "\n" not in err.value.message
    assert time.monotonic() - started < 5  # a FIFO with no writer is refused, not waited on


def test_a_pipe_is_refused(tmp_path):
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"kernel,shape\n")
        with pytest.raises(PerfciError, match=r"fd/[0-9]+: is a pipe \(FIFO\), not a CSV file"):
            read_input_text(f"/dev/fd/{read_end}", "CSV")
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_dangling_link_says_where_it_points(tmp_path):
    (tmp_path / "gone.csv").symlink_to(tmp_path / "nowhere.csv")
    with pytest.raises(PerfciError, match="gone.csv: a symbolic link to .*nowhere.csv, which does not exist"):
        read_input_text(str(tmp_path / "gone.csv"), "CSV")


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.delenv(MAX_INPUT_ENV, raising=False)
    huge = tmp_path / "huge.csv"
    with open(huge, "wb") as fh:  # sparse: 300 MiB that take no disk
        fh.truncate(300 << 20)
    with pytest.raises(PerfciError) as err:
        read_input_text(str(huge), "CSV")
    assert err.value.message.endswith(f"huge.csv: 300 MiB is larger than the {DEFAULT_MAX_INPUT_MB} MiB perfci "
                                      f"reads as a CSV file; set {MAX_INPUT_ENV} to raise the limit")


def test_the_limit_is_set_by_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "in.csv"
    path.write_bytes(b"x" * (2 << 20))
    monkeypatch.setenv(MAX_INPUT_ENV, "1")
    with pytest.raises(PerfciError, match="2 MiB is larger than the 1 MiB"):
        read_input_text(str(path), "CSV")
    monkeypatch.setenv(MAX_INPUT_ENV, "2.5")
    assert len(read_input_text(str(path), "CSV")) == 2 << 20
    for bad in ("0", "-1", "lots", "nan", "inf"):
        monkeypatch.setenv(MAX_INPUT_ENV, bad)
        with pytest.raises(PerfciError, match=f"\\${MAX_INPUT_ENV}={bad}: give the largest input"):
            read_input_text(str(path), "CSV")


def test_an_empty_file_may_be_allowed(tmp_path):
    path = tmp_path / "perfci.toml"
    path.write_text("")
    assert read_input_text(str(path), "configuration", allow_empty=True) == ""
