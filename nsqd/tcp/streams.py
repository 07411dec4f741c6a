"""Stream layers a client can negotiate in IDENTIFY, each a trio Stream over the one below:
TCP -> TLS (trio.SSLStream) -> snappy or deflate. Each compresses once per send (one flush of
the client's buffer), never per frame."""

from __future__ import annotations

import zlib

import trio

from protocol.v2 import ProtocolClosed

# Go's snappy reader (github.com/golang/snappy): a chunk body may hold at most one block of
# 65,536 bytes, compressed (then up to MaxEncodedLen(65536)) or not, plus its 4-byte checksum.
_MAX_BLOCK = 65536
_MAX_COMPRESSED_CHUNK = 32 + _MAX_BLOCK + _MAX_BLOCK // 6 + 4
_MAX_UNCOMPRESSED_CHUNK = _MAX_BLOCK + 4
_STREAM_ID = 0xFF
# what one receive may inflate to (the rest waits in the decompressor until it is read)
DEFLATE_OUTPUT_LIMIT = 1 << 20


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
        self._pending = b""
        # bytes that came right behind IDENTIFY: decoded at the first read, after the upgrade's
        # OK went out (a stream Go's reader refuses fails there, as in nsqd)
        self._prefix = prefix

    def _encode(self, data: bytes) -> bytes:
        raise NotImplementedError

    def _decode(self, data: bytes) -> bytes:
        raise NotImplementedError

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if data:
            await self.inner.send_all(self._encode(bytes(data)))

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    def _backlog(self) -> bytes:
        """Input taken but not decoded yet (deflate's bounded output)."""
        return b""

    def _end_of_stream(self) -> None:
        """The client closed: ProtocolClosed if that cut the format short."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            data, self._prefix = self._prefix, b""
            self._pending = self._decode(data)
        while not self._pending:
            more = self._backlog()
            if more:
                self._pending = more
                break
            data = await self.inner.receive_some(max_bytes)
            if not data:
                self._end_of_stream()
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
        import snappy  # a compiled extension (~1.7 MiB resident): loaded by the first snappy client

        self._compressor = snappy.StreamCompressor()
        self._decompressor = snappy.StreamDecompressor()
        self._header = b""  # a chunk header cut by a read
        self._left = 0  # bytes of the current chunk still to come
        self._started = False  # the stream identifier came first
        super().__init__(inner, prefix)

    def _encode(self, data: bytes) -> bytes:
        return self._compressor.add_chunk(data)

    def _decode(self, data: bytes) -> bytes:
        self._check_framing(data)
        try:
            return self._decompressor.decompress(data)
        except Exception:  # snappy.UncompressError: a bad checksum or corrupt compressed data
            raise ProtocolClosed("failed to read command - snappy: corrupt input") from None

    def _end_of_stream(self) -> None:
        if self._left or self._header:  # Go's reader: io.ErrUnexpectedEOF, logged
            raise ProtocolClosed("failed to read command - unexpected EOF")

    def _check_framing(self, data: bytes) -> None:
        """Refuse at once what Go's reader refuses, before anything is buffered for it: a
        stream not starting with the identifier, a chunk longer than one block allows, a
        reserved unskippable chunk type."""
        pos, end = 0, len(data)
        while pos < end:
            if self._left:
                step = min(self._left, end - pos)
                self._left -= step
                pos += step
                continue
            take = 4 - len(self._header)
            self._header += data[pos : pos + take]
            pos += take
            if len(self._header) < 4:
                return
            kind, length = self._header[0], int.from_bytes(self._header[1:4], "little")
            self._header = b""
            if not self._started and kind != _STREAM_ID:
                raise ProtocolClosed("failed to read command - snappy: corrupt input")
            if kind == _STREAM_ID:
                ok = length == 6
            elif kind == 0x00:
                ok = 4 <= length <= _MAX_COMPRESSED_CHUNK
            elif kind == 0x01:
                ok = 4 <= length <= _MAX_UNCOMPRESSED_CHUNK
            else:  # 0x02-0x7f reserved unskippable; 0x80-0xfe skippable, read into one block
                ok = kind >= 0x80 and length <= _MAX_COMPRESSED_CHUNK
            if not ok:
                raise ProtocolClosed("failed to read command - snappy: unsupported input")
            self._started = True
            self._left = length


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
        try:
            return self._decompressor.decompress(data, DEFLATE_OUTPUT_LIMIT)
        except zlib.error as exc:
            raise ProtocolClosed(f"failed to read command - flate: {exc}") from None

    def _backlog(self) -> bytes:
        tail = self._decompressor.unconsumed_tail
        return self._decode(tail) if tail else b""
