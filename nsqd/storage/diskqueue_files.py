"""go-diskqueue's files as a queue finds them when it opens: the metadata's text (depth, read and
write positions; `meta_text` writes it), the data files that are left, and the records an
unclean stop left past the metadata's write position. Read once, at start (storage/diskqueue.py
runs the queue from there); damaged or missing metadata is logged and read around, never fatal.
Also the record frame and the few file operations every part of the queue uses on them."""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final

HEADER: Final = struct.Struct(">i")  # a record's frame: its size, then the record
READ_BUFFER: Final = 64 * 1024
_DATA_FILE: Final = re.compile(r"(.+)\.diskqueue\.(\d{6,})\.dat")
# a queue's files: its data files, its metadata, and our per-message TTLs beside them
_QUEUE_FILE: Final = re.compile(r"(.+)\.diskqueue\.(?:\d{6,}\.dat|meta\.dat|ttl)")
_META_RE: Final = re.compile(r"\s*(-?\d+)\s*\n\s*(\d+),(\d+)\s*\n\s*(\d+),(\d+)\s*\n?")

Log = Callable[..., None]  # (level, message, *args): the queue's own, which names it


@dataclass(slots=True)
class Found:
    """Where a queue resumes: its depth, read and write positions, and whether they moved from
    what the metadata says (a new write file after an unclean stop: persist them soon)."""

    depth: int = 0
    read_file_num: int = 0
    read_pos: int = 0
    write_file_num: int = 0
    write_pos: int = 0
    moved: bool = False


def recover(
    meta_path: str,
    data_path: str,
    name: str,
    file_name: Callable[[int], str],
    record_sizes: tuple[int, int],
    log: Log,
) -> Found:
    """The positions the files give: the metadata's, or (none, or unreadable) the oldest data
    file left; then every record past the write position (an unclean stop wrote them after
    the last sync) counted in, and writing moved to a new file, so nothing written is lost or
    overwritten."""
    meta = load_meta(meta_path, log)
    if meta is not None:
        found = Found(*meta)
    else:
        first = min(data_file_nums(data_path, name), default=0)
        found = Found(read_file_num=first, write_file_num=first)
    while (size := file_size(file_name(found.write_file_num))) > found.write_pos:
        path = file_name(found.write_file_num)
        extra = count_records(path, found.write_pos, record_sizes, log)
        msg = "%s metadata writePos %d < file size of %d (%d more records), new write file"
        log(logging.WARNING, msg, path, found.write_pos, size, extra)
        found.depth += extra
        found.write_file_num += 1
        found.write_pos = 0
        found.moved = True
    return found


def meta_text(depth: int, read_at: tuple[int, int], write_at: tuple[int, int]) -> str:
    """The metadata file's text, as go-diskqueue writes it."""
    return f"{depth}\n{read_at[0]},{read_at[1]}\n{write_at[0]},{write_at[1]}\n"


def load_meta(path: str, log: Log) -> tuple[int, int, int, int, int] | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        text = str(exc)
    if (m := _META_RE.fullmatch(text)) is None:
        log(logging.ERROR, "failed to retrieveMetaData - %r", text)
        return None
    depth, read_num, read_pos, write_num, write_pos = map(int, m.groups())
    return depth, read_num, read_pos, write_num, write_pos


def queue_of(entry: str) -> str | None:
    """The queue whose file `entry` (a name in --data-path) is, None for any other file; a
    queue's name may hold dots, so its last `.diskqueue.` ends it."""
    m = _QUEUE_FILE.fullmatch(entry)
    return m.group(1) if m else None


def data_file(data_path: str, name: str, num: int) -> str:
    return os.path.join(data_path, f"{name}.diskqueue.{num:06d}.dat")


def meta_file(data_path: str, name: str) -> str:
    return os.path.join(data_path, f"{name}.diskqueue.meta.dat")


def _data_files(data_path: str) -> Iterator[tuple[str, int]]:
    """Every queue data file in `data_path`: its queue's name and its number."""
    try:
        entries = os.listdir(data_path)
    except FileNotFoundError:
        return
    for entry in entries:
        if m := _DATA_FILE.fullmatch(entry):
            yield m.group(1), int(m.group(2))


def data_file_nums(data_path: str, name: str) -> list[int]:
    return [num for queue, num in _data_files(data_path) if queue == name]


def extents(data_path: str, names: Iterable[str], log: Log) -> dict[str, tuple[int, int]]:
    """How far each queue's files reach as found, (file number, position): its last data
    file's end, or the metadata's read or write position where that is further (a queue read
    to its end, or emptied, keeps no data file). Records written before a kill -9 end within it;
    a position past it was never written (storage/dedupe.py checks its keys' records so)."""
    wanted = set(names)
    if not wanted:
        return {}
    last: dict[str, int] = {}
    for name, num in _data_files(data_path):  # one listing for every queue (thousands at start)
        if name in wanted:
            last[name] = max(last.get(name, num), num)
    out = {}
    for name in wanted:
        far = (0, 0)
        meta = load_meta(meta_file(data_path, name), log)
        if meta is not None:
            _, read_num, read_pos, write_num, write_pos = meta
            far = max((read_num, read_pos), (write_num, write_pos))
        if name in last:
            num = last[name]
            far = max(far, (num, file_size(data_file(data_path, name, num))))
        out[name] = far
    return out


def count_records(path: str, pos: int, record_sizes: tuple[int, int], log: Log) -> int:
    """Valid records from ``pos`` to the end of the file (stops at a bad one)."""
    lo, hi = record_sizes
    count = 0
    try:
        with open(path, "rb", buffering=READ_BUFFER) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(pos)
            while pos + 4 <= size:
                (length,) = HEADER.unpack(f.read(4))
                if not lo <= length <= hi or pos + 4 + length > size:
                    break
                f.seek(length, os.SEEK_CUR)
                pos += 4 + length
                count += 1
    except OSError as exc:
        log(logging.ERROR, "counting records - %s", exc)
    return count


def file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def spans(blob: bytes) -> list[tuple[int, int]]:
    """Where each record of a blob of whole framed records starts and ends (its frame)."""
    out, p, end = [], 0, len(blob)
    while p < end:
        q = p + 4 + HEADER.unpack_from(blob, p)[0]
        out.append((p, q))
        p = q
    return out


def write_all(fd: int, buf: bytes) -> None:
    view = memoryview(buf)
    while view:  # one write() unless the disk is nearly full: then finish the record
        view = view[os.write(fd, view) :]


def remove(path: str, log: logging.Logger) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.error("failed to remove %s - %s", path, exc)
