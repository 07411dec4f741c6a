"""A server-side TLS layer straight on a client socket's fd (ssl.SSLObject over memory BIOs).

trio.SSLStream hands back one TLS record (at most 16 KiB) per receive and reads the socket in
64 KiB steps, each behind locks, conflict detectors and a scheduler pass: an MPUB of 40 KB then
reached the V2 parser in pieces and took its message-by-message path. Here a receive decrypts
every record already read, up to what was asked, so a batch arrives whole, and the socket is
read and written as SocketTransport does (a send that fits completes without yielding).

Same SSLContext, same handshake and certificate checks; an end of stream without close_notify
counts as an end of stream (trio's https_compatible). Bytes that came right behind IDENTIFY
(`prefix`) are the first input. Records the TLS layer itself writes outside a send (TLS 1.3
session tickets after the handshake, a KeyUpdate answer) go out with the next send, so two
tasks never interleave writes on the socket."""

from __future__ import annotations

import os
import ssl
from typing import Any

import trio

from .tls_records import HandshakeRecords, go_words
from .transport import SMALL_READ, StreamError, read_ready, write_now, write_rest

_READ_SIZE = 256 * 1024
_wait_readable = trio.lowlevel.wait_readable
_wait_writable = trio.lowlevel.wait_writable


class TLSStream(trio.abc.Stream):
    def __init__(
        self, transport: trio.SocketStream, context: ssl.SSLContext, prefix: bytes = b""
    ) -> None:
        self.transport_stream = transport
        self._fd = transport.socket.fileno()
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=True)
        # the client's records until the handshake is done: nsqd's words when it fails
        self._records: HandshakeRecords | None = HandshakeRecords()
        if prefix:
            self._in.write(prefix)
            self._records.feed(prefix)
        self._eof = False
        self._more = False  # the last read filled its size: read more at once

    def __getattr__(self, name: str) -> Any:
        # cipher(), version(), getpeercert(), selected_alpn_protocol()... as trio.SSLStream
        return getattr(self._obj, name)

    # -- the socket ---------------------------------------------------------------------------

    async def _fill(self) -> None:
        """Read what the socket has (waiting for it) into the incoming BIO."""
        fd = self._fd
        size = _READ_SIZE if self._more else SMALL_READ  # see transport.SMALL_READ
        await _wait_readable(fd)
        data = await read_ready(fd, size)
        self._more = len(data) == size
        if data:
            self._in.write(data)
            if self._records is not None:
                self._records.feed(data)
        else:
            self._eof = True
            self._in.write_eof()

    async def _send_raw(self, data: bytes) -> None:
        sent = write_now(self._fd, data)
        if sent < len(data):
            await write_rest(self._fd, data, sent)

    # -- TLS ----------------------------------------------------------------------------------

    async def do_handshake(self) -> None:
        """The server handshake; BrokenResourceError carries Go's words for a failure when
        Go would have said something else than OpenSSL (else none: the cause says why)."""
        records = self._records
        assert records is not None
        while True:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                if self._out.pending:
                    await self._send_raw(self._out.read())
                if records.error:  # e.g. an SSLv2 hello, which OpenSSL would wait on
                    raise trio.BrokenResourceError(records.error) from None
                if self._eof:
                    raise trio.BrokenResourceError(records.eof_error) from None
                await self._fill()
                continue
            except (ssl.SSLError, ssl.CertificateError) as exc:
                if self._out.pending:  # the alert that tells the client why
                    try:
                        await self._send_raw(self._out.read())
                    except trio.BrokenResourceError:
                        pass
                raise trio.BrokenResourceError(*self._failure(exc)) from exc
            break
        self._records = None
        if self._out.pending:
            await self._send_raw(self._out.read())

    def _failure(self, exc: Exception) -> tuple[str, ...]:
        """Go's words for a failed handshake, when known."""
        records = self._records
        assert records is not None
        if records.error:
            return (records.error,)
        words = go_words(getattr(exc, "reason", None), getattr(exc, "verify_code", None))
        if words:
            return (words,)
        if isinstance(exc, ssl.SSLEOFError) or self._eof:
            return (records.eof_error,)
        return ()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        limit = max_bytes or _READ_SIZE
        read = self._obj.read
        while True:
            parts: list[bytes] = []
            size = 0
            try:
                while size < limit:  # every record already read, up to `limit` bytes
                    part = read(limit - size)
                    if not part:
                        break
                    parts.append(part)
                    size += len(part)
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                pass  # close_notify, or an end of stream without it: the end
            except ssl.SSLError as exc:  # a record that does not decrypt, an alert
                raise StreamError(f"tls: {exc.reason or exc}") from exc
            else:
                if not parts:
                    return b""  # read() returned nothing: the end
            if parts:
                return parts[0] if len(parts) == 1 else b"".join(parts)
            if self._eof:
                return b""
            await self._fill()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        obj = self._obj
        view = memoryview(data)
        done = 0
        try:
            while done < len(view):
                done += obj.write(view[done:])
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError from exc
        await self._send_raw(self._out.read())

    async def wait_send_all_might_not_block(self) -> None:
        await _wait_writable(self._fd)

    async def aclose(self) -> None:
        try:
            self._obj.unwrap()  # queues close_notify; we do not wait for the peer's
        except (ssl.SSLError, ValueError, OSError):
            pass
        if self._out.pending:
            try:
                os.write(self._fd, self._out.read())
            except OSError:
                pass
        await self.transport_stream.aclose()
