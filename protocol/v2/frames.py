"""Server frames: [int32 size][int32 type][data], size counting the type and the data."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final


class FrameType(IntEnum):
    RESPONSE = 0
    ERROR = 1
    MESSAGE = 2


FRAME_HEADER: Final = struct.Struct(">ii")
HEARTBEAT: Final = b"_heartbeat_"
OK: Final = b"OK"
CLOSE_WAIT: Final = b"CLOSE_WAIT"


def encode_frame(frame_type: int, data: bytes) -> bytes:
    return FRAME_HEADER.pack(len(data) + 4, frame_type) + data


def encode_response(data: bytes) -> bytes:
    return FRAME_HEADER.pack(len(data) + 4, FrameType.RESPONSE) + data


def encode_error(data: bytes) -> bytes:
    return FRAME_HEADER.pack(len(data) + 4, FrameType.ERROR) + data


OK_FRAME: Final = encode_response(OK)
HEARTBEAT_FRAME: Final = encode_response(HEARTBEAT)
CLOSE_WAIT_FRAME: Final = encode_response(CLOSE_WAIT)


@dataclass(slots=True, frozen=True)
class Frame:
    frame_type: int
    data: bytes


class FrameDecoder:
    """Client-side incremental frame reader (tests, the lookupd link, the Spark connector)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames: list[Frame] = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 8:
            size, frame_type = FRAME_HEADER.unpack_from(buf, pos)
            end = pos + 4 + size
            if size < 4:
                raise ValueError(f"invalid frame size {size}")
            if end > len(buf):
                break
            frames.append(Frame(frame_type, bytes(buf[pos + 8 : end])))
            pos = end
        del buf[:pos]
        return frames
