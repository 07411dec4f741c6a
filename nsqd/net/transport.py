"""How a client's bytes move: straight on the socket's fd for plain TCP, or through any trio
Stream (TLS, compression) otherwise.

The plain path exists for speed: one round trip costs a handful of system calls, and the
generic Stream path adds a failed read attempt, a cancel scope and a scheduler hop to each. Here
a read waits for readability first (after a reply the next command is rarely there yet), and a
send that fits in the socket buffer completes without yielding."""

from __future__ import annotations

import math
import os
from typing import Protocol

import trio

# os.read(fd, n) allocates n bytes first: past glibc's mmap threshold (128 KiB) that is an
# mmap, an mremap down to what came and an munmap per read, the most expensive part of a small
# request's round trip (strace: 3 of its 7 syscalls). A read asks for up to this much; only
# after one that filled it (a sender streaming) does it ask for the caller's max_bytes.
SMALL_READ = 65536

_wait_readable = trio.lowlevel.wait_readable
_wait_writable = trio.lowlevel.wait_writable


async def read_ready(fd: int, size: int) -> bytes:
    """Up to `size` bytes from the socket `fd`, which the caller has seen readable (waiting
    again if that was spurious); b"" at end of stream or on a reset (the same for us)."""
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            await _wait_readable(fd)
        except OSError:
            return b""


def write_now(fd: int, data: bytes) -> int:
    """One non-blocking write of `data` to the socket `fd`: how much of it went (all of it,
    nearly always, so the caller's fast path awaits nothing)."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
    except OSError as exc:
        raise trio.BrokenResourceError(str(exc)) from exc


async def write_rest(fd: int, data: bytes, sent: int) -> None:
    """The rest of `data` from `sent` on, waiting for the socket to take it."""
    view = memoryview(data)
    while sent < len(data):
        await _wait_writable(fd)
        try:
            sent += os.write(fd, view[sent:])
        except BlockingIOError:
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc


class StreamError(trio.BrokenResourceError):
    """The peer's bytes broke a stream layer (a bad TLS record): unlike a reset, the reader
    says so in the log, as nsqd does ("failed to read command - tls: ...")."""


class Transport(Protocol):
    async def receive(self, max_bytes: int) -> bytes:
        """Next bytes; b"" at end of stream or on a reset connection."""
        ...

    async def send(self, data: bytes, limit: float) -> None:
        """All of `data` within `limit` seconds, or trio.TooSlowError / BrokenResourceError."""
        ...

    async def aclose(self) -> None: ...


class SocketTransport:
    """A plain TCP socket, read and written on its fd. The reactors (nsqd/net/reactor.py) use
    the synchronous verbs (`read_now`, `write_now`, `close_now`) on a socket they saw ready;
    a connection's own task uses the Transport ones."""

    __slots__ = ("fd", "more", "stream")

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.fd = stream.socket.fileno()
        self.more = False  # the last read filled the buffer: more is probably waiting

    async def receive(self, max_bytes: int) -> bytes:
        fd = self.fd
        if self.more:
            await trio.lowlevel.checkpoint()  # a busy sender must not starve the others
            size = max_bytes
        else:
            await _wait_readable(fd)
            size = min(max_bytes, SMALL_READ)
        data = await read_ready(fd, size)
        self.more = len(data) == size
        return data

    def read_now(self, max_bytes: int) -> bytes | None:
        """One non-blocking read of a socket seen readable: SMALL_READ bytes at most, or
        `max_bytes` after a read that filled its buffer; None when nothing was there after
        all, b"" at end of stream or on a reset."""
        size = max_bytes if self.more else min(max_bytes, SMALL_READ)
        try:
            data = os.read(self.fd, size)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        self.more = len(data) == size
        return data

    def write_now(self, data: bytes) -> int:
        """write_now on this socket: how much of `data` went."""
        return write_now(self.fd, data)

    async def send(self, data: bytes, limit: float) -> None:
        sent = write_now(self.fd, data)
        if sent < len(data):
            with trio.fail_after(limit if limit < math.inf else 1e9):
                await write_rest(self.fd, data, sent)

    def close_now(self) -> None:
        """Close the socket without waiting (a reactor's connection that ends)."""
        try:
            self.stream.socket.close()
        except OSError:
            pass

    async def aclose(self) -> None:
        await self.stream.aclose()


class StreamTransport:
    __slots__ = ("stream",)

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream

    async def receive(self, max_bytes: int) -> bytes:
        try:
            return await self.stream.receive_some(max_bytes)
        except StreamError:
            raise
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return b""

    async def send(self, data: bytes, limit: float) -> None:
        with trio.fail_after(limit if limit < math.inf else 1e9):
            await self.stream.send_all(data)

    async def aclose(self) -> None:
        await self.stream.aclose()


def transport_for(stream: trio.abc.Stream) -> Transport:
    if isinstance(stream, trio.SocketStream):
        return SocketTransport(stream)
    return StreamTransport(stream)
