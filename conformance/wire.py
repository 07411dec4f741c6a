"""Server frames off the wire, rendered as comparable text with volatile parts masked.

A frame is `[int32 size][int32 type][data]`. Rendering masks what legitimately differs between two
daemons: message IDs become `$idN` (numbered in the order the scenario first saw them, also inside
error texts such as `E_FIN_FAILED FIN <id> failed ...`) and timestamps become `ts=ok` (or
`ts=BAD:<n>` when not within 10 minutes of now). Everything else is shown exactly.
"""

from __future__ import annotations

import hashlib
import re
import struct
import time
from dataclasses import dataclass, field
from typing import Final

from .compression import Codec, negotiated

FRAME_RESPONSE: Final = 0
FRAME_ERROR: Final = 1
FRAME_MESSAGE: Final = 2
MESSAGE_HEADER: Final = 26  # int64 timestamp, uint16 attempts, 16-byte id
MAX_FRAME: Final = 64 * 1024 * 1024
MAX_SHOWN_BODY: Final = 80
TS_TOLERANCE_S: Final = 600.0
_HEX16: Final = re.compile(rb"[0-9a-f]{16}")


@dataclass(frozen=True)
class Event:
    """Something one connection observed: a frame, the close, or bytes that are not a frame."""

    conn: str
    kind: str  # response | error | message | frame | garbage | closed | connect-failed
    text: str = ""
    fields: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def render(self) -> str:
        return f"{self.kind} {self.text}" if self.text else self.kind


class IdRegistry:
    """Message IDs seen in one scenario run, numbered in order of first sighting."""

    def __init__(self) -> None:
        self.ids: list[bytes] = []

    def name(self, raw: bytes) -> str:
        if raw not in self.ids:
            self.ids.append(raw)
        return f"$id{self.ids.index(raw) + 1}"

    def lookup(self, n: int) -> bytes | None:
        return self.ids[n - 1] if 0 < n <= len(self.ids) else None

    def mask(self, data: bytes) -> bytes:
        for i, raw in enumerate(self.ids):
            data = data.replace(raw, f"$id{i + 1}".encode())
        return data


def show_bytes(data: bytes, limit: int = MAX_SHOWN_BODY) -> str:
    """Printable ASCII as is; anything else as a Python bytes literal; long data summarised."""
    if len(data) > limit:
        digest = hashlib.sha1(data).hexdigest()[:10]
        return f"<{len(data)} bytes {data[:24]!r}... sha1:{digest}>"
    if data and all(0x20 <= b < 0x7F for b in data) and data.strip() == data:
        return data.decode("ascii")
    return repr(data)


def render_message(conn: str, body: bytes, ids: IdRegistry) -> tuple[Event, bytes | None]:
    """A message frame's event plus its raw ID (None when the frame is too short to hold one)."""
    if len(body) < MESSAGE_HEADER:
        return Event(conn, "message", f"SHORT {body.hex()}"), None
    ts, attempts = struct.unpack(">qH", body[:10])
    raw_id = body[10:MESSAGE_HEADER]
    payload = body[MESSAGE_HEADER:]
    id_text = ids.name(raw_id) if _HEX16.fullmatch(raw_id) else f"BAD:{raw_id!r}"
    ts_text = "ok" if abs(ts / 1e9 - time.time()) < TS_TOLERANCE_S else f"BAD:{ts}"
    shown = show_bytes(payload)
    if " " in shown or not shown:
        shown = repr(payload) if len(payload) <= MAX_SHOWN_BODY else shown
    fields = {"attempts": str(attempts), "id": id_text, "ts": ts_text, "body": shown}
    text = " ".join(f"{k}={v}" for k, v in fields.items())
    return Event(conn, "message", text, fields), raw_id


def render_frame(conn: str, ftype: int, body: bytes, ids: IdRegistry) -> tuple[Event, bytes | None]:
    if ftype == FRAME_MESSAGE:
        return render_message(conn, body, ids)
    masked = ids.mask(body)
    shown = show_bytes(masked, limit=4096)
    raw = {"raw": masked.decode("utf-8", "backslashreplace")}
    if ftype == FRAME_RESPONSE:
        return Event(conn, "response", shown, raw), None
    if ftype == FRAME_ERROR:
        return Event(conn, "error", shown, raw), None
    return Event(conn, "frame", f"type={ftype} {shown}"), None


class FrameReader:
    """Incremental frame splitter for one connection. When an IDENTIFY JSON response negotiates
    snappy or deflate, everything after that frame is decompressed first (`codec`)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.broken = False
        self.codec: Codec | None = None

    def _decode(self, data: bytes) -> bytes:
        if self.codec is None or self.broken:
            return data
        try:
            return self.codec.decode(data)
        except Exception:  # a corrupt stream: show the raw bytes as garbage
            self.broken = True
            return data

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add received bytes; return the complete frames as (type, data)."""
        self.buf += self._decode(data)
        frames: list[tuple[int, bytes]] = []
        while len(self.buf) >= 4 and not self.broken:
            (size,) = struct.unpack(">i", self.buf[:4])
            if size < 4 or size > MAX_FRAME:
                self.broken = True
                break
            if len(self.buf) < 4 + size:
                break
            (ftype,) = struct.unpack(">i", self.buf[4:8])
            body = bytes(self.buf[8 : 4 + size])
            frames.append((ftype, body))
            del self.buf[: 4 + size]
            if self.codec is None and ftype == FRAME_RESPONSE:
                self.codec = negotiated(body)
                if self.codec is not None:  # the rest of the stream is compressed
                    rest = bytes(self.buf)
                    self.buf.clear()
                    self.buf += self._decode(rest)
        return frames

    def take_garbage(self) -> bytes:
        """Bytes that did not (yet) form a frame; called when the stream ends or is unframeable."""
        data = bytes(self.buf)
        self.buf.clear()
        return data
