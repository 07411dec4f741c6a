"""atomic.replace_file on real files: the new bytes in place, the mode asked for, no
temporary file left, the old file untouched when writing fails."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqd.storage.atomic import replace_file


def test_replaces_whole_with_the_mode_asked(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"old contents, longer than the new")
    assert replace_file(str(path), b"new", 0o600) == 3
    assert path.read_bytes() == b"new"
    assert path.stat().st_mode & 0o777 == 0o600 & ~_umask()
    assert os.listdir(tmp_path) == ["f"]


def test_chunks_and_a_named_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    chunks = [b"x" * 700_000, b"y" * 700_000, b"z"]
    size = replace_file(str(path), iter(chunks), tmp=str(tmp_path / "f.123.tmp"))
    assert size == 1_400_001 and path.read_bytes() == b"".join(chunks)
    assert os.listdir(tmp_path) == ["f"]


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"old")

    def chunks() -> Iterator[bytes]:
        yield b"partial" * 200_000
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        replace_file(str(path), chunks())
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
