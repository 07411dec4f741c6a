"""The HTTP/1.1 parser seam: the sans-IO connection object and events the server uses, and
nothing else of any parser. The connection is h1fast's: its own parser for plainly valid
requests, h11 for everything else; both offer the same verbs: `receive_data`, `next_event`,
`send`, `start_next_cycle`, the two state fields, and these event types (a request head is
h11's Request or h1fast's Head, with the same attributes).

Only server.py and gonet.py import this module; no other module names a parser."""

from __future__ import annotations

from typing import Any, Protocol

import h11

from .h1fast import FastConnection, Head

NEED_DATA = h11.NEED_DATA
SEND_BODY = h11.SEND_BODY
DONE = h11.DONE
Request = h11.Request
REQUESTS = (h11.Request, Head)  # the types of a request head
RequestHead = h11.Request | Head
Data = h11.Data
EndOfMessage = h11.EndOfMessage
Response = h11.Response
InformationalResponse = h11.InformationalResponse
ProtocolError = h11.RemoteProtocolError  # the client sent something the parser refuses


class ServerConnection(Protocol):
    """One server-side HTTP/1.1 connection's parser state."""

    our_state: Any
    their_state: Any
    they_are_waiting_for_100_continue: bool

    def receive_data(self, data: bytes) -> None: ...
    def next_event(self) -> Any: ...
    def send(self, event: Any) -> bytes | None: ...
    def start_next_cycle(self) -> None: ...


def server_connection(max_head_bytes: int) -> ServerConnection:
    return FastConnection(max_head_bytes)


_MAX_CHUNK = 1 << 64  # Go's chunked reader takes at most 16 hex digits of chunk size


def chunk_too_large(conn: ServerConnection) -> bool:
    """The chunk being read declared a size Go's net/http refuses (h11 takes 20 digits)."""
    inner = conn.h11 if isinstance(conn, FastConnection) else conn  # chunked: h11's reader
    reader = getattr(inner, "_reader", None)
    return getattr(reader, "_bytes_in_chunk", 0) >= _MAX_CHUNK
