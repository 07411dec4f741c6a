"""nsqd's message frames back to back (the binary answer of our nsqd's `/channel/receive`)
decoded into the columns of a partition's rows.

`decode_columns` does it column-wise, with no Python object per message: the frames' offsets
come from one pass over their 4-byte sizes (no pass at all when every frame has the size of
the first, checked with strided slices of the answer), the answer becomes one Arrow binary
array of whole frames (its offsets over the answer's own buffer, no copy), and Arrow kernels
cut the ids, bodies, timestamps and attempts out of it. `decode_rows` is the per-message
decoder: the fallback for what the columnar path does not take (a frame that is not a message,
a truncated answer, an id that is not ASCII, a negative timestamp, an answer of 2 GiB or more)
and the reference the tests compare the columns with.

A frame: size (4, big-endian, counts what follows), frame type (4; 2 = message), timestamp
(8, ns), attempts (2), id (16), body (the rest): protocol/v2/message.py's layout, whose offsets
this module reads."""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass
from typing import Any

from protocol.v2.frames import FRAME_HEADER, FrameType
from protocol.v2.message import (
    ATTEMPTS_AT,
    FRAME_TYPE_AT,
    ID_AT,
    MESSAGE_FRAME_HEAD_SIZE,
    MESSAGE_HEADER,
    TIMESTAMP_AT,
)

_SIZE = struct.Struct(">i")
HEAD = MESSAGE_FRAME_HEAD_SIZE  # the bytes of a message frame before its body
MIN_SIZE = HEAD - 4  # a message frame's size field with an empty body
_MESSAGE = FrameType.MESSAGE
_MESSAGE_TYPE = _SIZE.pack(_MESSAGE)
_MAX_OFFSET = (1 << 31) - 1  # Arrow binary arrays have 32-bit offsets


@dataclass
class Rows:
    """Columns as Python lists (`decode_rows`) or as Arrow arrays (`decode_columns`: ids
    string, bodies binary, timestamps_us int64, attempts int32)."""

    ids: Any
    bodies: Any
    timestamps_us: Any
    attempts: Any

    def __len__(self) -> int:
        return len(self.ids)


def decode_rows(raw: bytes) -> Rows:
    """The per-message decoder: every message frame of `raw`, other frames skipped."""
    ids: list[str] = []
    bodies: list[bytes] = []
    timestamps: list[int] = []
    attempts: list[int] = []
    view = memoryview(raw)
    unpack_frame, unpack_message = FRAME_HEADER.unpack_from, MESSAGE_HEADER.unpack_from
    pos, end = 0, len(raw)
    while pos < end:
        size, frame_type = unpack_frame(raw, pos)
        if frame_type == _MESSAGE:
            ts, att = unpack_message(raw, pos + TIMESTAMP_AT)
            ids.append(raw[pos + ID_AT : pos + HEAD].decode("ascii", "replace"))
            bodies.append(bytes(view[pos + HEAD : pos + 4 + size]))
            timestamps.append(ts // 1000)
            attempts.append(att)
        pos += 4 + size
    return Rows(ids, bodies, timestamps, attempts)


def decode(raw: bytes) -> Rows:
    """Column-wise when it can, else message by message: the same columns either way."""
    return decode_columns(raw) or decode_rows(raw)


def frame_offsets(raw: bytes) -> array[int] | None:
    """Where each frame starts, and the answer's end (32-bit); None when a frame is shorter
    than a message frame's head or runs past the end, or the answer is too long for Arrow."""
    end = len(raw)
    if end == 0:
        return array("i", [0])
    if end > _MAX_OFFSET or end < HEAD:
        return None
    step = _SIZE.unpack_from(raw, 0)[0] + 4
    if step >= HEAD and end % step == 0:
        count = end // step
        # Every frame the size of the first: the 4 size bytes at every step say so, and
        # then the frames are exactly there (each one's size leads to the next).
        if all(raw[k::step] == raw[k : k + 1] * count for k in range(4)):
            return array("i", range(0, end + 1, step))
    return _walk(raw)


def _walk(raw: bytes) -> array[int] | None:
    """Frame by frame: one size read per frame, nothing else."""
    offsets = array("i")
    append, unpack = offsets.append, _SIZE.unpack_from
    pos, end = 0, len(raw)
    while pos < end:
        if end - pos < HEAD:
            return None
        append(pos)
        size = unpack(raw, pos)[0]
        if size < MIN_SIZE:
            return None
        pos += 4 + size
    if pos != end:
        return None
    append(end)
    return offsets


def decode_columns(raw: bytes) -> Rows | None:
    """Every frame of `raw` as Arrow columns; None where `decode_rows` must do it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = frame_offsets(raw)
    if offsets is None or sys.byteorder != "little":
        return None
    n = len(offsets) - 1
    if n == 0:
        return Rows(
            pa.array([], pa.string()),
            pa.array([], pa.binary()),
            pa.array([], pa.int64()),
            pa.array([], pa.int32()),
        )
    frames = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw)])
    if not _all_equal(pc.binary_slice(frames, FRAME_TYPE_AT, TIMESTAMP_AT), _MESSAGE_TYPE):
        return None
    try:
        ids = pc.binary_slice(frames, ID_AT, HEAD).cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8
        return None
    if not pc.all(pc.string_is_ascii(ids)).as_py():
        return None  # decode_rows gives U+FFFD for each byte above 127
    timestamps = _big_endian(frames, TIMESTAMP_AT, pa.int64())
    if pc.min(timestamps).as_py() < 0:
        return None  # Arrow's integer division truncates; Python's floors
    return Rows(
        ids=ids,
        # (binary_slice without a stop sizes its output wrongly; this cuts the heads off)
        bodies=pc.binary_replace_slice(frames, 0, HEAD, b""),
        timestamps_us=pc.divide(timestamps, 1000),
        attempts=_big_endian(frames, ATTEMPTS_AT, pa.uint16()).cast(pa.int32()),
    )


def _all_equal(values: Any, expected: bytes) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    return bool(pc.all(pc.equal(values, pa.scalar(expected, pa.binary()))).as_py())


def _big_endian(frames: Any, start: int, type_: Any) -> Any:
    """The big-endian integer of `type_`'s width at `start` of every frame: its bytes cut out
    and reversed (little-endian: this machine's and Arrow's), their buffer read as integers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    width = type_.bit_width // 8
    reversed_ = pc.binary_reverse(pc.binary_slice(frames, start, start + width))
    data = reversed_.buffers()[2]
    return pa.Array.from_buffers(type_, len(frames), [None, data])
