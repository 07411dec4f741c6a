"""Listening sockets for every front-end (V2 TCP, HTTP, HTTPS): nsqd's address syntax and its
error text when a port is taken. In a group of workers (--workers) every worker binds the same
ports with SO_REUSEPORT and the kernel spreads the connections over the sockets that listen; a
worker's listen only once it is ready to accept (listen_now), so that none of the group's
connections waits in the backlog of a worker still starting. A port that one worker alone
serves (the Redis front-end's, in worker 0) is opened `shared=False`: a plain listener,
listening at once, that a second process cannot bind."""

from __future__ import annotations

import errno
import os
import socket

import trio

_SHARED = [False]  # SO_REUSEPORT on the listeners this process opens (a group's worker)
_BOUND: list[trio.socket.SocketType] = []  # a worker's shared sockets, bound, not listening yet


def share_ports() -> None:
    _SHARED[0] = True


def listen_now() -> None:
    """A group's worker is ready to accept: its shared sockets listen from now on."""
    for sock in _BOUND:
        sock.listen(socket.SOMAXCONN)
    _BOUND.clear()


def split_address(address: str) -> tuple[str | None, int]:
    """'host:port', '[::1]:port' or ':port' -> (host or None for all interfaces, port)."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"missing port in address {address!r}")
    host = host.strip("[]") or None
    return host, int(port)


async def open_listeners(address: str, *, shared: bool = True) -> list[trio.SocketListener]:
    """Listeners on `address`; in a group's worker, bound with the other workers' and listening
    at listen_now() unless `shared` is False (one process listens there, from now on)."""
    host, port = split_address(address)
    # an ASCII host as bytes: getaddrinfo would otherwise load the idna codec (with
    # stringprep and unicodedata: ~1 ms and ~0.4 MiB of a start) to encode it
    name: str | bytes | None = host.encode() if host and host.isascii() else host
    try:
        if shared and _SHARED[0]:
            return await _shared_listeners(port, name)
        return await trio.open_tcp_listeners(port, host=name)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            reason = os.strerror(exc.errno).lower()
            raise OSError(
                exc.errno, f"listen ({address}) failed - listen tcp {address}: bind: {reason}"
            ) from None
        raise


async def _shared_listeners(port: int, host: str | bytes | None) -> list[trio.SocketListener]:
    """trio.open_tcp_listeners with SO_REUSEPORT set before bind, and no listen yet."""
    infos = await trio.socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    listeners = []
    for family, kind, proto, _, address in infos:
        sock = trio.socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            await sock.bind(address)
        except OSError:
            sock.close()
            raise
        _BOUND.append(sock)
        # trio.SocketListener insists on a socket that listens (SO_ACCEPTCONN); this one
        # listens at listen_now(), which the worker calls before it starts accepting
        listener = trio.SocketListener.__new__(trio.SocketListener)
        listener.socket = sock
        listeners.append(listener)
    return listeners
