"""Listening sockets for every front-end (V2 TCP, HTTP, HTTPS): nsqd's address syntax and its
error text when a port is taken."""

from __future__ import annotations

import errno
import os

import trio


def split_address(address: str) -> tuple[str | None, int]:
    """'host:port', '[::1]:port' or ':port' -> (host or None for all interfaces, port)."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"missing port in address {address!r}")
    host = host.strip("[]") or None
    return host, int(port)


async def open_listeners(address: str) -> list[trio.SocketListener]:
    host, port = split_address(address)
    # an ASCII host as bytes: getaddrinfo would otherwise load the idna codec (with
    # stringprep and unicodedata: ~1 ms and ~0.4 MiB of a start) to encode it
    name: str | bytes | None = host.encode() if host and host.isascii() else host
    try:
        return await trio.open_tcp_listeners(port, host=name)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            reason = os.strerror(exc.errno).lower()
            raise OSError(
                exc.errno, f"listen ({address}) failed - listen tcp {address}: bind: {reason}"
            ) from None
        raise
