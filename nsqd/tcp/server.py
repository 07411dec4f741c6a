"""The V2 TCP listener: accepts connections and runs each in the clients nursery, through a
connection factory (the daemon's), so this module knows no daemon."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

from ..log import log


class Connection(Protocol):
    remote_address: str

    async def run(self) -> None: ...


# (stream, (remote ip, port)) -> the connection object that serves it
ConnectionFactory = Callable[[trio.SocketStream, tuple[str, int]], Connection]


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
