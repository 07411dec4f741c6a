"""A fast HTTP/1.1 server connection for well-formed requests, with h11 behind it for the rest.

h11 spends ~40% of a keep-alive `POST /pub` in its state machine and header validation. Most
requests a publisher sends are plain: `GET`/`POST`, HTTP/1.1, one Host, at most one numeric
Content-Length, printable ASCII in the headers, no Transfer-Encoding, Expect, Connection or
Upgrade. For those this class parses the head itself (plainhead.py: one split of the head, one
regex per header line) and frames the body by its length; it writes responses as h11 does.
Anything else — a head it does not recognise as plainly valid, a request line that ended and is
not an obvious one, an end of stream between requests — is handed, with every byte received, to
a fresh h11 connection that serves that request (at a request boundary a fresh h11 connection is
in the same state as a kept-alive one); its head first made to read as net/http reads it
(h11head.py). After it the next request is read here again, so every head meets net/http's rules
(its size limit, the reading between requests) before h11 sees it. So whatever h11 answers or
refuses (h11head aside), it still does: this class only takes requests h11 would accept, and
gives them the same events (see tests/http, run against the Go nsqd as well).

Between requests it reads as net/http does rather than as h11: after a POST it skips up to 4 CR
or LF bytes, it judges a request after the first only once 4 bytes of it came (net/http's
Peek(4)), and it says whether net/http answers a head cut short by the end of the stream
(`cut_head_answered`).

It offers the verbs of parser.ServerConnection and returns h11's event types, except for the
request head: a `Head` with the attributes the server reads from h11's Request; and it is its
own fast path (parser.FastPath: `fast` is itself) while requests are plain."""

from __future__ import annotations

from typing import Any

import h11

from . import h11head
from .plainhead import Head, plausible_start, remembered

_END = h11.EndOfMessage()
# id(Response event) -> (the event, its head bytes, body length, chunked, keep-alive)
_heads: dict[int, tuple[h11.Response, bytes, int, bool, bool]] = {}
_MAX_CHUNK = 1 << 64  # Go's chunked reader takes at most 16 hex digits of chunk size
# net/http skips this many CR or LF bytes before the request after a POST (old clients end a
# POST body with a CRLF); and it reads a request after the first only once this many bytes came
_AFTER_POST = 4
# net/http limits the bytes it reads for a head (MaxHeaderBytes + 4096), but a later request's
# first bytes may already sit in its 4 KiB read buffer, beyond that limit
_READ_AHEAD = 4096


class FastConnection:
    """parser.ServerConnection: this class while requests are plain, h11 for one that is not."""

    __slots__ = (
        "_buf",
        "_chunked",
        "_crlf",
        "_eof",
        "_h11",
        "_keep_alive",
        "_length",
        "_max_head",
        "_our",
        "_out_left",
        "_post",
        "_remaining",
        "_served",
        "_skipped",
        "_target",
        "_their",
    )

    def __init__(self, max_head_bytes: int) -> None:
        self._max_head = max_head_bytes
        self._buf = bytearray()
        self._eof = False
        self._h11: Any = None
        self._length = 0  # the request body's length
        self._remaining = 0  # request body bytes still to come
        self._keep_alive = True
        self._chunked = False  # the response body is written in chunks
        self._out_left = 0  # response body bytes still owed (Content-Length framing)
        self._our: Any = h11.IDLE
        self._their: Any = h11.IDLE
        self._post = False  # the last request was a POST
        self._served = False  # a request was served before the one now read
        self._crlf = 0  # CR/LF bytes net/http would still skip before this request
        self._skipped = 0  # those it skipped
        self._target = None  # the raw target of a request h11 reads with another (h11head)

    @property
    def h11(self) -> Any:
        """The h11 connection once the fast path handed over, else None."""
        return self._h11

    @property
    def fast(self) -> FastConnection:
        return self

    @property
    def on(self) -> bool:
        """Still on the fast path (h11 has not taken over)."""
        return self._h11 is None

    def chunk_too_large(self) -> bool:
        """The chunk being read declared a size Go's net/http refuses (h11 takes 20 digits);
        only h11 reads chunked bodies, and it keeps the declared size to itself."""
        reader = getattr(self._h11, "_reader", None)
        return getattr(reader, "_bytes_in_chunk", 0) >= _MAX_CHUNK

    @property
    def our_state(self) -> Any:
        return self._our if self._h11 is None else self._h11.our_state

    @property
    def their_state(self) -> Any:
        return self._their if self._h11 is None else self._h11.their_state

    @property
    def they_are_waiting_for_100_continue(self) -> bool:
        # Expect: sends a request to h11
        return self._h11 is not None and self._h11.they_are_waiting_for_100_continue

    def receive_data(self, data: bytes) -> None:
        if self._h11 is not None:
            self._h11.receive_data(data)
        elif data:
            self._buf += data
        else:
            self._eof = True

    def next_event(self) -> Any:
        if self._h11 is not None:
            event = self._h11.next_event()
            if type(event) is h11.Request:
                self._post = event.method == b"POST"
                if self._target is not None:  # h11 read another: the request has its own
                    head = Head(event.method, self._target, list(event.headers))
                    head.http_version = event.http_version
                    return head
            return event
        their = self._their
        if their is h11.SEND_BODY:
            return self._body_event()
        if their is h11.DONE:
            return h11.PAUSED  # as h11: the next request waits for start_next_cycle
        buf = self._buf
        if self._crlf and buf and buf[0] in b"\r\n":
            del buf[: self._skip_crlf(buf[:_AFTER_POST])]
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if not buf and not self._eof:
                return h11.NEED_DATA
            if self._served and not self._eof and len(buf) + self._skipped < _AFTER_POST:
                return h11.NEED_DATA  # net/http's Peek(4) before a later request
            if len(buf) >= self._max_head and not self._served:
                raise _head_too_large()  # it would need a byte past its limit
            line_end = buf.find(b"\n")
            if line_end >= 0 and not h11head.line_ok(buf, line_end):
                # net/http refuses a request line once it ended; h11 waits for the head's end
                raise h11.RemoteProtocolError("malformed HTTP request")
            if (
                self._eof
                or len(buf) > self._max_head
                # net/http judges no request line before its end (h11 does, by its first byte)
                or (not plausible_start(buf) and b"\n" in buf)
                or b"\n\n" in buf
                or b"\n\r\n" in buf  # h11 ends a head at LF (CR) LF too
            ):
                self._hand_over()
                return self.next_event()
            return h11.NEED_DATA
        if end + 4 > self._max_head + (_READ_AHEAD if self._served else 0):
            raise _head_too_large()
        parsed = remembered(bytes(buf[:end]))
        if parsed is None:
            self._hand_over()
            return self.next_event()
        del buf[: end + 4]
        head, length = parsed
        self._length = self._remaining = length
        self._their = h11.SEND_BODY
        self._our = h11.SEND_RESPONSE
        self._post = head.method == b"POST"
        return head

    def buffered_request(self) -> tuple[Head, int, int] | None:
        """(head, head end, body length) of the next request if it is plainly valid and wholly
        buffered, head and body, between requests on the fast path; else None. Consumes
        nothing: `take_request` does, or `next_event` reads the same bytes as ever."""
        if self._h11 is not None or self._their is not h11.IDLE:
            return None
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0 or end > self._max_head:
            return None
        parsed = remembered(bytes(buf[:end]))
        if parsed is None or len(buf) < end + 4 + parsed[1]:
            return None
        return parsed[0], end, parsed[1]

    def take_request(self, end: int, length: int) -> bytes:
        """Consume what `buffered_request` found and return its body: the states are then
        those after its EndOfMessage event (theirs DONE, ours SEND_RESPONSE)."""
        start = end + 4
        buf = self._buf
        self._post = buf.startswith(b"POST ")
        body = bytes(buf[start : start + length])
        del buf[: start + length]
        self._length = length
        self._remaining = 0
        self._their = h11.DONE
        self._our = h11.SEND_RESPONSE
        return body

    @property
    def buffered(self) -> int:
        """Bytes received and not yet parsed (on the fast path)."""
        return len(self._buf)

    def _body_event(self) -> Any:
        remaining = self._remaining
        if remaining == 0:
            self._their = h11.DONE if self._keep_alive else h11.MUST_CLOSE
            return _END
        buf = self._buf
        if not buf:
            if self._eof:
                raise h11.RemoteProtocolError(
                    "peer closed connection without sending complete message body "
                    f"(received {self._length - remaining} bytes, expected {self._length})"
                )
            return h11.NEED_DATA
        if len(buf) <= remaining:
            data = bytes(buf)
            buf.clear()
        else:
            data = bytes(buf[:remaining])
            del buf[:remaining]
        self._remaining = remaining - len(data)
        return h11.Data(data=data)

    def send(self, event: Any) -> bytes | None:
        if self._h11 is not None:
            return self._h11.send(event)
        kind = type(event)
        our = self._our
        if kind is h11.Response and our is h11.SEND_RESPONSE:
            return self._send_response(event)
        if kind is h11.Data and our is h11.SEND_BODY:
            data = bytes(event.data)
            if self._chunked:
                return b"%x\r\n%s\r\n" % (len(data), data) if data else b""
            if len(data) > self._out_left:
                raise h11.LocalProtocolError("Too much data for declared Content-Length")
            self._out_left -= len(data)
            return data
        if kind is h11.EndOfMessage and our is h11.SEND_BODY:
            if not self._chunked and self._out_left:
                raise h11.LocalProtocolError("Too little data for declared Content-Length")
            self._our = h11.DONE if self._keep_alive else h11.MUST_CLOSE
            if not self._keep_alive and self._their is h11.DONE:
                self._their = h11.MUST_CLOSE
            return b"0\r\n\r\n" if self._chunked else b""
        raise h11.LocalProtocolError(f"can't send {kind.__name__} in state {our}")

    def _send_response(self, response: h11.Response) -> bytes:
        """The bytes h11 writes for a response to a kept-alive HTTP/1.1 GET/POST/PUT/DELETE
        (the server sends the same few Response events again and again: kept by identity)."""
        cached = _heads.get(id(response))
        if cached is None or cached[0] is not response:
            cached = (response, *self._render(response))
            if len(_heads) >= 64:
                _heads.clear()
            _heads[id(response)] = cached
        _, head, length, chunked, keep_alive = cached
        self._chunked = chunked
        if not keep_alive:
            self._keep_alive = False
            if self._their is h11.DONE:
                self._their = h11.MUST_CLOSE
        self._out_left = length
        self._our = h11.SEND_BODY
        return head

    @staticmethod
    def _render(response: h11.Response) -> tuple[bytes, int, bool, bool]:
        """(head bytes, body length, chunked, keep-alive) of a response."""
        status = response.status_code
        items = response.headers.raw_items()
        names = [raw_name.lower() for raw_name, _ in items]
        length = None
        chunked = False
        keep_alive = True
        if status not in (204, 304):  # those have no body whatever their headers say
            if b"transfer-encoding" in names or b"content-length" not in names:
                # h11's framing for a body of unknown length: chunked, and only that header
                keep = (b"content-length", b"transfer-encoding")
                items = [item for item, name in zip(items, names, strict=True) if name not in keep]
                names = [name for name in names if name not in keep]
                items.append((b"Transfer-Encoding", b"chunked"))
                names.append(b"transfer-encoding")
                chunked = True
            else:
                length = int(items[names.index(b"content-length")][1])
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, response.reason)]
        for (raw_name, value), name in zip(items, names, strict=True):  # h11: Host first
            if name == b"host":
                lines.append(b"%s: %s\r\n" % (raw_name, value))
        for (raw_name, value), name in zip(items, names, strict=True):
            if name == b"connection" and b"close" in _comma_values(value):
                keep_alive = False
            if name != b"host":
                lines.append(b"%s: %s\r\n" % (raw_name, value))
        lines.append(b"\r\n")
        return b"".join(lines), length or 0, chunked, keep_alive

    def start_next_cycle(self) -> None:
        if self._h11 is not None:
            self._h11.start_next_cycle()
            self._from_h11()
        elif self._our is not h11.DONE or self._their is not h11.DONE:
            raise h11.LocalProtocolError("not in a reusable state")
        else:
            self._our = self._their = h11.IDLE
            # (the CR/LF after a POST are skipped when next_event meets them)
            self._served = True
            self._skipped = 0
            self._crlf = _AFTER_POST if self._post else 0

    def keep_http10(self) -> None:
        """h11 closes after an HTTP/1.0 request; net/http keeps a connection whose client asked
        for keep-alive: the next request starts here."""
        self._from_h11()

    def _from_h11(self) -> None:
        """After the request h11 served: the next one is read here again, from the bytes h11
        holds, so that every head is judged by net/http's rules first (its size limit too)."""
        data, closed = self._h11.trailing_data
        self._h11 = None
        self._target = None
        self._buf = bytearray(data)
        self._eof = closed
        self._our = self._their = h11.IDLE
        self._served = True
        self._skipped = 0
        self._crlf = _AFTER_POST if self._post else 0

    def _skip_crlf(self, data: bytes | bytearray) -> int:
        """How many leading bytes of `data`, the first of the next request, net/http skips
        (CR or LF, up to 4 in all after a POST); no more once another byte came."""
        limit = min(self._crlf, len(data))
        skip = 0
        while skip < limit and data[skip] in b"\r\n":
            skip += 1
        self._skipped += skip
        self._crlf = self._crlf - skip if skip == len(data) else 0
        return skip

    def cut_head_answered(self) -> bool:
        """At the end of the stream inside a request head: whether net/http answers it (a 400).
        It reads the first request from its first byte, a later one once 4 bytes of it came
        (a Peek(4)), the CR/LF it skipped after a POST counted."""
        pending = len(self._buf) if self._h11 is None else len(self._h11.trailing_data[0])
        return pending > 0 and (not self._served or pending + self._skipped >= _AFTER_POST)

    def _hand_over(self) -> None:
        """h11 serves the request that starts here (every byte not yet parsed), its head read
        as net/http reads it (h11head), until start_next_cycle comes back."""
        try:
            data, self._target = h11head.for_h11(bytes(self._buf))
        except h11head.BadContentLength as exc:
            raise h11.RemoteProtocolError(str(exc)) from None
        self._h11 = _fresh_h11(self._max_head, data, self._eof)
        self._buf = bytearray()


def _head_too_large() -> h11.RemoteProtocolError:
    return h11.RemoteProtocolError("request head too large", error_status_hint=431)


def _fresh_h11(max_head: int, data: bytes, eof: bool) -> Any:
    """An h11 connection between requests, given the bytes received after them."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head)
    if data:
        conn.receive_data(data)
    if eof:
        conn.receive_data(b"")
    return conn


def _comma_values(value: bytes) -> list[bytes]:
    return [part.strip() for part in value.lower().split(b",")]
