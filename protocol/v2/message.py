"""The message layout nsqd sends and stores, [int64 ts ns][uint16 attempts][16-byte id][body],
and its frame, [int32 size][int32 type 2][message]: the one message-frame encoder (TCP delivery,
HTTP's binary receive and pop, the tests' servers) and the field offsets decoders read (the
Spark connector's columnar decoder)."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from .frames import FrameType

MSG_ID_LENGTH: Final = 16
MESSAGE_HEADER: Final = struct.Struct(">qH")
MESSAGE_HEADER_SIZE: Final = MESSAGE_HEADER.size + MSG_ID_LENGTH  # 26
# A message frame up to its body in one pack: size, frame type 2, timestamp, attempts, id.
MESSAGE_FRAME_HEAD: Final = struct.Struct(">iiqH16s")
MESSAGE_FRAME_HEAD_SIZE: Final = MESSAGE_FRAME_HEAD.size  # 34
_SIZE_BASE: Final = MESSAGE_FRAME_HEAD_SIZE - 4  # the size field counts what follows it
_MESSAGE: Final = FrameType.MESSAGE
# Where a message frame's fields start.
FRAME_TYPE_AT: Final = 4
TIMESTAMP_AT: Final = 8
ATTEMPTS_AT: Final = 16
ID_AT: Final = 18


class Framed(Protocol):
    """What a message frame is made of (the engine's Message has these)."""

    id: bytes
    timestamp: int
    attempts: int
    body: bytes


def encode_message(timestamp: int, attempts: int, msg_id: bytes, body: bytes) -> bytes:
    return MESSAGE_HEADER.pack(timestamp, attempts) + msg_id + body


def encode_message_frame(timestamp: int, attempts: int, msg_id: bytes, body: bytes) -> bytes:
    return (
        MESSAGE_FRAME_HEAD.pack(len(body) + _SIZE_BASE, _MESSAGE, timestamp, attempts, msg_id)
        + body
    )


def append_message_frames(parts: list[bytes], msgs: Iterable[Framed]) -> int:
    """Each message's frame onto `parts` in two pieces, its head (one pack) and its body (not
    copied here: once, by whoever joins or writes `parts`); the frames' total size."""
    pack = MESSAGE_FRAME_HEAD.pack
    append = parts.append
    head = MESSAGE_FRAME_HEAD_SIZE
    size = 0
    for m in msgs:
        body = m.body
        n = len(body)
        append(pack(n + _SIZE_BASE, _MESSAGE, m.timestamp, m.attempts, m.id))
        append(body)
        size += n + head
    return size


@dataclass(slots=True, frozen=True)
class DecodedMessage:
    timestamp: int
    attempts: int
    id: bytes
    body: bytes


def decode_message(data: bytes) -> DecodedMessage:
    if len(data) < MESSAGE_HEADER_SIZE:
        raise ValueError(f"message too short: {len(data)} bytes")
    timestamp, attempts = MESSAGE_HEADER.unpack_from(data, 0)
    return DecodedMessage(timestamp, attempts, bytes(data[10:26]), bytes(data[26:]))
