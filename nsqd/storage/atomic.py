"""Replacing a file whole so that a crash leaves the old one or the new one, never a mix: the
bytes go to a temporary file beside it, which is fsynced, renamed over the file, and then the
directory is fsynced so the rename itself survives a power loss. Every write-temp-then-rename
of ours goes through `replace_file` (nsqd.dat, the attributes, the record logs' compactions)."""

from __future__ import annotations

import os
from collections.abc import Iterable

_CHUNK = 1 << 20  # a big snapshot is written in pieces of about this size


def replace_file(
    path: str, data: bytes | Iterable[bytes], mode: int = 0o644, tmp: str | None = None
) -> int:
    """Make `path` hold `data` (bytes, or chunks of it); how many bytes were written. `tmp` is
    the temporary file's name (default `path + ".tmp"`, so a crash's leftover is reused)."""
    tmp = tmp or path + ".tmp"
    size = write_file(tmp, data, mode)
    rename_into(tmp, path)
    return size


def write_file(tmp: str, data: bytes | Iterable[bytes], mode: int = 0o644) -> int:
    """The first half of a replacement: `tmp` made to hold `data`, fsynced (removed again if
    that fails); how many bytes were written."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        size = write_all(fd, data) if isinstance(data, bytes) else _write_chunks(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        unlink_quietly(tmp)
        raise
    os.close(fd)
    return size


def rename_into(tmp: str, path: str) -> None:
    """The second half: the fsynced `tmp` renamed over `path`, the rename made durable."""
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def write_all(fd: int, data: bytes | memoryview) -> int:
    """One write() in the common case; the rest of a short write again (then ENOSPC raises)."""
    n = os.write(fd, data)
    if n < len(data):
        view = memoryview(data)[n:]
        while view:
            view = view[os.write(fd, view) :]
    return len(data)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_chunks(fd: int, chunks: Iterable[bytes]) -> int:
    size, batch, pending = 0, [], 0
    for chunk in chunks:
        batch.append(chunk)
        pending += len(chunk)
        if pending >= _CHUNK:
            size += write_all(fd, b"".join(batch))
            batch, pending = [], 0
    if batch:
        size += write_all(fd, b"".join(batch))
    return size


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
