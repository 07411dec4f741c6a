"""The V2 parser's fast readers: the commands a busy connection sends most, taken in one step
when the buffer holds them whole and plainly valid (a PUB to a topic the connection published
to before, an MPUB of one message, a run of plain FIN lines, an MPUB batch of bodies of one
size). Each answers None for anything else, and connection.py's stages then read it byte by
byte with every check and nsqd's error texts: what a fast reader takes, the stages would have
read the same (tests/protocol/test_property.py, test_parser.py)."""

from __future__ import annotations

import re
import struct
from typing import Final

from . import commands as c
from .bodies import PackedBodies, uniform_heads
from .limits import Limits

INT32: Final = struct.Struct(">i")
_MPUB_ONE: Final = struct.Struct(">iii")  # an MPUB's body size, its count, a message's size
# Well-formed FIN lines: exactly 16 id bytes with no space, CR or LF, optional CR before LF.
_FIN_RUN: Final = re.compile(rb"(?:FIN [^ \r\n]{16}\r?\n)+")
_FIN_ID: Final = re.compile(rb"FIN ([^ \r\n]{16})\r?\n")
_FIN_LINE: Final = 21  # b"FIN " + 16-byte id + b"\n"
_FIN_IDS: Final = struct.Struct("4x16s1x")  # a FIN line's id
# "PUB " and a name of at most 64 bytes before the LF
_PUB_LINE_MAX: Final = 4 + 64 + 1


def pub(
    buf: bytes | bytearray, pos: int, topics: dict[bytes, str], max_msg: int
) -> tuple[c.Pub, int] | None:
    """A PUB line naming one of `topics` (names the connection's PUB, MPUB or DPUB was
    allowed with), with its whole body in the buffer and of an allowed size, and where it
    ends."""
    nl = buf.find(b"\n", pos + 4, pos + _PUB_LINE_MAX)
    if nl < 0:
        return None
    # a name checked before: the line is "PUB <name>\n" exactly (no CR, no more params)
    topic = topics.get(bytes(buf[pos + 4 : nl]))
    start = nl + 5
    if topic is None or len(buf) < start:
        return None
    (size,) = INT32.unpack_from(buf, nl + 1)
    end = start + size
    if not 0 < size <= max_msg or len(buf) < end:
        return None
    return c.Pub(topic, bytes(buf[start:end])), end


def mpub_one(
    buf: bytes | bytearray, pos: int, topics: dict[bytes, str], limits: Limits
) -> tuple[c.MPub, int] | None:
    """`pub` for an MPUB of one message, and where it ends. (The body's declared size is
    only checked against the limit: nsqd reads the messages by their count and sizes.)"""
    nl = buf.find(b"\n", pos + 5, pos + _PUB_LINE_MAX + 1)
    if nl < 0:
        return None
    topic = topics.get(bytes(buf[pos + 5 : nl]))
    start = nl + 13  # the body's size, the count, the message's size
    if topic is None or len(buf) < start:
        return None
    size, count, msg_size = _MPUB_ONE.unpack_from(buf, nl + 1)
    end = start + msg_size
    if (
        count != 1
        or not 0 < size <= limits.max_body_size
        or not 0 < msg_size <= limits.max_msg_size
        or len(buf) < end
    ):
        return None
    return c.MPub(topic, [bytes(buf[start:end])]), end


def fins(buf: bytes | bytearray, pos: int) -> tuple[c.Fin, int] | None:
    """The FIN lines from `pos` on as one Fin, and where they end: a read of plain FIN lines
    (but for a part of a line at its end) checked a column at a time, else a run of FIN
    lines among other commands or with CRs by the regular expression."""
    fin = _fin_lines(buf, pos)
    if fin is not None:
        return fin, pos + _FIN_LINE * len(fin.msg_ids)
    run = _FIN_RUN.match(buf, pos)
    if run is None:
        return None
    return c.Fin(_FIN_ID.findall(buf, pos, run.end())), run.end()


def _fin_lines(buf: bytes | bytearray, pos: int) -> c.Fin | None:
    """The whole lines from `pos` on as one Fin when every one is a plain FIN line. Eight
    C-level column compares rather than a character at a time: a third of what the
    expression costs."""
    k = (len(buf) - pos) // _FIN_LINE
    if k < 2:
        return None
    lines = buf[pos : pos + _FIN_LINE * k]
    if not (
        lines[3::_FIN_LINE] == b" " * k
        and lines[20::_FIN_LINE] == b"\n" * k
        and lines[0::_FIN_LINE] == b"F" * k
        and lines[1::_FIN_LINE] == b"I" * k
        and lines[2::_FIN_LINE] == b"N" * k
        and lines.count(b" ") == k  # so no id holds a space, a CR or a LF
        and lines.count(b"\n") == k
        and b"\r" not in lines
    ):
        return None
    return c.Fin([fields[0] for fields in _FIN_IDS.iter_unpack(lines)])


def uniform_batch(
    view: memoryview, pos: int, end: int, count: int, max_msg: int
) -> tuple[PackedBodies, int] | None:
    """An MPUB's `count` bodies whole in the buffer, every one the size of the first and that
    size valid, and where they end: checked with strided slices instead of a header per
    message, then one copy, its bodies cut out when they are read (PackedBodies)."""
    (size,) = INT32.unpack_from(view, pos)
    stride = size + 4
    total = count * stride
    if size <= 0 or size > max_msg or end - pos < total or count < 2:
        return None
    stop = pos + total
    data = view[pos:stop].tobytes()
    if not uniform_heads(data, 0, total, stride, 4):
        return None
    return PackedBodies(data, size, count), stop


def uniform_so_far(view: memoryview, pos: int, end: int, count: int, max_msg: int) -> bool:
    """An MPUB's bodies whose size headers, as far as the buffer holds them, all give the
    first one's valid size: the batch is longer than what is there (its next header is not in
    yet), so waiting for it to be whole loses nothing, and `uniform_batch` then takes it in
    one copy (the stage would cut what is there a body at a time)."""
    (size,) = INT32.unpack_from(view, pos)
    stride = size + 4
    if size <= 0 or size > max_msg or count < 2 or end - pos >= count * stride:
        return False
    return uniform_heads(view, pos, end, stride, 4)
