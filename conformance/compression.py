"""Snappy / deflate streams negotiated by IDENTIFY: the runner decodes what the daemon sends and
encodes what it sends, so transcripts compare frames, not two compressors' byte choices."""

from __future__ import annotations

import json
import zlib
from typing import Any, Protocol


class Codec(Protocol):
    name: str

    def encode(self, data: bytes) -> bytes: ...

    def decode(self, data: bytes) -> bytes: ...


class Deflate:
    """Raw DEFLATE (no zlib header), a sync flush after every write, as nsqd does."""

    name = "deflate"

    def __init__(self, level: int) -> None:
        self._c = zlib.compressobj(level, zlib.DEFLATED, -15)
        self._d = zlib.decompressobj(-15)

    def encode(self, data: bytes) -> bytes:
        return self._c.compress(data) + self._c.flush(zlib.Z_SYNC_FLUSH)

    def decode(self, data: bytes) -> bytes:
        return self._d.decompress(data)


class Snappy:
    """The snappy framing (stream) format, via python-snappy."""

    name = "snappy"

    def __init__(self) -> None:
        import snappy  # a dependency of the project; imported only when negotiated

        self._c: Any = snappy.StreamCompressor()
        self._d: Any = snappy.StreamDecompressor()

    def encode(self, data: bytes) -> bytes:
        return bytes(self._c.add_chunk(data))

    def decode(self, data: bytes) -> bytes:
        return bytes(self._d.decompress(data))


def negotiated(response: bytes) -> Codec | None:
    """The codec an IDENTIFY JSON response switches the connection to (None: stays plain)."""
    if not response.startswith(b"{"):
        return None
    try:
        obj = json.loads(response)
    except ValueError:
        return None
    if not isinstance(obj, dict) or "max_rdy_count" not in obj:
        return None
    try:
        if obj.get("snappy") is True:
            return Snappy()
        if obj.get("deflate") is True:
            level = obj.get("deflate_level")
            return Deflate(level if isinstance(level, int) and 1 <= level <= 9 else 6)
    except ImportError:  # no python-snappy: the compressed bytes show up as garbage
        return None
    return None
