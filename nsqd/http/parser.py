"""The HTTP/1.1 parser seam: the sans-IO connection object and events the server uses, and
nothing else of any parser. The connection is h1fast's: its own parser for plainly valid
requests, h11 for everything else; both offer the same verbs: `receive_data`, `next_event`,
`send`, `start_next_cycle`, the two state fields, and these event types (a request head is
h11's Request or h1fast's Head, with the same attributes).

A connection also declares its fast path (`fast`), the capability the HTTP reactor serves
requests with, without events: h1fast's while its requests are plain, `NO_FAST_PATH` (never
on) for a parser without one. And it says when a chunk's declared size is one Go refuses
(`chunk_too_large`), which only the parser can see.

Only server.py, reactor.py and gonet.py import this module; no other module names a parser."""

from __future__ import annotations

from typing import Any, Protocol

import h11

from .h1fast import FastConnection, Head

NEED_DATA = h11.NEED_DATA
SEND_BODY = h11.SEND_BODY
DONE = h11.DONE
MUST_CLOSE = h11.MUST_CLOSE
Request = h11.Request
REQUESTS = (h11.Request, Head)  # the types of a request head
RequestHead = h11.Request | Head
Data = h11.Data
EndOfMessage = h11.EndOfMessage
Response = h11.Response
InformationalResponse = h11.InformationalResponse
ProtocolError = h11.RemoteProtocolError  # the client sent something the parser refuses


class FastPath(Protocol):
    """Requests taken whole from the buffer, with no events: the HTTP reactor's way."""

    @property
    def on(self) -> bool:
        """Requests may be taken here (off while the parser's slow path reads one)."""
        ...

    @property
    def buffered(self) -> int:
        """Bytes received and not yet parsed."""
        ...

    def buffered_request(self) -> tuple[RequestHead, int, int] | None:
        """(head, head end, body length) of the next request if this path takes it and it
        is wholly buffered; None otherwise. Consumes nothing."""
        ...

    def take_request(self, end: int, length: int) -> bytes:
        """Consume what `buffered_request` found; its body. The connection's states are then
        those after the request's EndOfMessage event."""
        ...


class NoFastPath:
    """The fast path of a parser that has none: never on, takes nothing."""

    on = False
    buffered = 0

    def buffered_request(self) -> None:
        return None

    def take_request(self, end: int, length: int) -> bytes:
        raise RuntimeError("no fast path")


NO_FAST_PATH = NoFastPath()


class ServerConnection(Protocol):
    """One server-side HTTP/1.1 connection's parser state."""

    our_state: Any
    their_state: Any
    they_are_waiting_for_100_continue: bool

    @property
    def fast(self) -> FastPath: ...

    def receive_data(self, data: bytes) -> None: ...
    def next_event(self) -> Any: ...
    def send(self, event: Any) -> bytes | None: ...
    def start_next_cycle(self) -> None: ...
    def chunk_too_large(self) -> bool:
        """The chunk being read declared a size Go's net/http refuses."""
        ...

    def cut_head_answered(self) -> bool:
        """At the end of the stream inside a request head: whether net/http answers it."""
        ...

    def keep_http10(self) -> None:
        """After an HTTP/1.0 request answered wholly: net/http keeps the connection (the
        client asked for keep-alive), which the parser would close; the next request starts."""
        ...


def server_connection(max_head_bytes: int) -> ServerConnection:
    return FastConnection(max_head_bytes)
