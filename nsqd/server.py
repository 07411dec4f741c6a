"""TCP listeners and the per-connection entry point."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Protocol

import trio

from .log import log


class Connection(Protocol):
    remote_address: str

    async def run(self) -> None: ...


# (stream, (remote ip, port)) -> the connection object that serves it
ConnectionFactory = Callable[[trio.SocketStream, tuple[str, int]], Connection]


def split_address(address: str) -> tuple[str | None, int]:
    """'host:port', '[::1]:port' or ':port' -> (host or None for all interfaces, port)."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"missing port in address {address!r}")
    host = host.strip("[]") or None
    return host, int(port)


async def open_listeners(address: str) -> list[trio.SocketListener]:
    host, port = split_address(address)
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise OSError(
                exc.errno, f"listen ({address}) failed - {os.strerror(exc.errno)}"
            ) from exc
        raise


async def serve_tcp(
    new_connection: ConnectionFactory,
    listeners: list[trio.SocketListener],
    nursery: trio.Nursery,
    accepting: trio.CancelScope,
) -> None:
    """Accept connections until `accepting` is cancelled; each client runs in `nursery`."""

    async def handle(stream: trio.SocketStream) -> None:
        try:
            peer = stream.socket.getpeername()
            remote = (peer[0], peer[1])
        except OSError:
            remote = ("", 0)
        client = new_connection(stream, remote)
        log.info("TCP: new client(%s)", client.remote_address)
        try:
            await client.run()
        except Exception:  # one client must never take the daemon down
            log.exception("[%s] unexpected error", client)

    with accepting:
        await trio.serve_listeners(handle, listeners, handler_nursery=nursery)
