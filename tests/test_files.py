"""perfci.files: atomic writes that never leave half a file, and one-line read errors."""
from __future__ import annotations

import pytest

from perfci.errors import PerfciError
from perfci.files import atomic_write_text, check_writable, read_input_text


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
