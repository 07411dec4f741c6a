"""Stream layers a client can negotiate in IDENTIFY, each a trio Stream over the one below:
TCP -> TLS (trio.SSLStream) -> snappy or deflate. Each compresses once per send (one flush of
the client's buffer), never per frame."""

from __future__ import annotations

import zlib

import snappy
import trio


class PrefixedStream(trio.abc.Stream):
    """Replays bytes already read from `inner` (they arrived right behind IDENTIFY) before
    reading on, so a TLS handshake pipelined after IDENTIFY is not lost."""

    def __init__(self, inner: trio.abc.Stream, prefix: bytes) -> None:
        self.inner = inner
        self._prefix = prefix

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            data, self._prefix = self._prefix, b""
            return data
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CodecStream(trio.abc.Stream):
    def __init__(self, inner: trio.abc.Stream, prefix: bytes) -> None:
        self.inner = inner
        self._pending = self._decode(prefix) if prefix else b""

    def _encode(self, data: bytes) -> bytes:
        raise NotImplementedError

    def _decode(self, data: bytes) -> bytes:
        raise NotImplementedError

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if data:
            await self.inner.send_all(self._encode(bytes(data)))

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while not self._pending:
            data = await self.inner.receive_some(max_bytes)
            if not data:
                return b""
            self._pending = self._decode(data)
        if max_bytes is None or len(self._pending) <= max_bytes:
            out, self._pending = self._pending, b""
        else:
            out, self._pending = self._pending[:max_bytes], self._pending[max_bytes:]
        return out

    async def aclose(self) -> None:
        await self.inner.aclose()


class SnappyStream(_CodecStream):
    """The snappy framing format (stream identifier, CRC-32C checked chunks) that go-nsq,
    pynsq and nsqjs speak."""

    def __init__(self, inner: trio.abc.Stream, prefix: bytes = b"") -> None:
        self._compressor = snappy.StreamCompressor()
        self._decompressor = snappy.StreamDecompressor()
        super().__init__(inner, prefix)

    def _encode(self, data: bytes) -> bytes:
        return self._compressor.add_chunk(data)

    def _decode(self, data: bytes) -> bytes:
        return self._decompressor.decompress(data)


class DeflateStream(_CodecStream):
    """Raw DEFLATE (RFC 1951, no zlib header), a sync flush after every send."""

    def __init__(self, inner: trio.abc.Stream, level: int, prefix: bytes = b"") -> None:
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
        super().__init__(inner, prefix)

    def _encode(self, data: bytes) -> bytes:
        c = self._compressor
        return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)

    def _decode(self, data: bytes) -> bytes:
        return self._decompressor.decompress(data)
