"""The V2 TCP listener: accepts connections and hands each to the publishers' reactor or runs it
in the clients nursery, through a connection factory (the daemon's), so this module knows no
daemon."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Protocol

import trio

from ..log import log
from ..net.boundary import guarded

# accept() failures that mean "out of a resource for now": wait a little and accept again
# (trio.serve_listeners' list)
_CAPACITY = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}


class Connection(Protocol):
    remote_address: str

    def adopted(self) -> bool: ...

    async def run(self) -> None: ...


# (stream, (remote ip, port)) -> the connection object that serves it
ConnectionFactory = Callable[[trio.SocketStream, tuple[str, int]], Connection]


async def serve_tcp(
    listeners: list[tuple[trio.SocketListener, ConnectionFactory]],
    nursery: trio.Nursery,
    accepting: trio.CancelScope,
) -> None:
    """Accept connections on each listener until `accepting` is cancelled, each made by that
    listener's factory; a connection the reactor does not adopt runs in `nursery`. (Not
    trio.serve_listeners: it closes a stream when its handler task returns, and an adopted
    connection has no task.)"""
    with accepting:
        async with trio.open_nursery() as loops:
            for listener, new_connection in listeners:
                loops.start_soon(_accept, new_connection, listener, nursery)


async def _accept(
    new_connection: ConnectionFactory, listener: trio.SocketListener, nursery: trio.Nursery
) -> None:
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno not in _CAPACITY:
                raise
            log.error("TCP: accept failed - %s", exc)
            await trio.sleep(0.1)
            continue
        try:
            peer = stream.socket.getpeername()
            remote = (peer[0], peer[1])
        except OSError:
            remote = ("", 0)
        client = new_connection(stream, remote)
        log.info("TCP: new client(%s)", client.remote_address)
        if not client.adopted():
            nursery.start_soon(guarded, client, client.run)
