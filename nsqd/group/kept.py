"""Keep-alive HTTP/1.1 connections from one worker to its peers' private HTTP listeners: the
transport every ask between workers goes over (fan-outs, the watchdog's pings, message
gathering, the bridge, the catch-up). A request carries PEER_HEADER (the group's secret), so
the peer answers it for itself alone; what asking can raise when a peer is down, dies
mid-answer or answers nonsense is ASK_ERRORS, and a refused connection (nothing listens:
the peer is not running, the request was not sent) is Unreachable."""

from __future__ import annotations

import select

import trio

from .identity import CURRENT

PEER_HEADER = b"x-trio-nsqd-group-peer"


class Unreachable(OSError):
    """A peer's private HTTP refused the connection: nothing listens there (the peer is not
    running), and the request was not sent."""


def _refused(exc: OSError) -> bool:
    """Whether a connect failed on a refusal alone (trio's error for its attempts has them
    as its cause); not one of this process's own failures (out of descriptors)."""
    if isinstance(exc, ConnectionRefusedError):
        return True
    tried = getattr(exc.__cause__, "exceptions", ())
    return bool(tried) and all(isinstance(one, ConnectionRefusedError) for one in tried)


# what asking a peer can raise when the peer is down, dies mid-answer or answers nonsense: a
# caller logs it and goes on (a worker killed while its peers ask it must not take them down)
ASK_ERRORS = (OSError, trio.BrokenResourceError, trio.TooSlowError, ValueError)


def _request(method: str, target: bytes, body: bytes, headers: bytes) -> bytes:
    """A request to a peer, marked as a peer's (PEER_HEADER: the group's secret, which the
    private HTTP listener takes for TLS under --tls-required; a peer honours any value)."""
    mark = CURRENT[0].secret if CURRENT and CURRENT[0].secret else b"1"
    return (
        b"%s %s HTTP/1.1\r\nHost: peer\r\n%s: %s\r\n%sContent-Length: %d\r\n"
        % (
            method.encode(),
            target,
            PEER_HEADER,
            mark,
            headers,
            len(body),
        )
        + b"Connection: keep-alive\r\n\r\n"
        + body
    )


def _answer_head(head: bytes) -> tuple[int, list[tuple[bytes, bytes]]]:
    """An answer's status and header lines (name, value); ValueError when it is none."""
    status_line, *lines = head.split(b"\r\n")
    status = status_line.split(b" ", 2)[1:2]
    if not status or not status[0].isdigit():
        raise ValueError(f"no HTTP answer ({len(head)} bytes)")
    fields = [line.partition(b":") for line in lines]
    return int(status[0]), [(name, value.strip()) for name, _, value in fields]


class KeptConnections:
    """Keep-alive connections to the peers' private HTTP listeners, one worker's for all its
    asks: a new connection costs ~0.3 ms before the answer's first byte on the 2-core VM, a
    kept one ~0.07 (a receive or a lease's fin asked of a peer at each Spark micro-batch, a
    keyed publish forwarded to its topic's owner). An idle one the peer closed meanwhile (its
    idle timeout, a restart) is seen before it is used and left for a new one."""

    IDLE = 8  # connections kept per peer

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[trio.SocketStream]] = {}

    async def request(
        self,
        address: tuple[str, int],
        method: str,
        target: bytes,
        body: bytes = b"",
        headers: bytes = b"",
        *,
        again: bool = False,
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """(status, header lines but Connection, body), or one of ASK_ERRORS. `headers`: more
        header lines, each ending in CRLF. A kept connection that breaks once the request was
        sent raises, unless `again`: for a request that may be made twice (a keyed publish,
        which its owner stores once), sent once more on a new connection."""
        idle = self._idle.setdefault(address, [])
        data = _request(method, target, body, headers)
        while idle:
            stream = idle.pop()
            if _dropped(stream):
                await stream.aclose()
                continue
            try:
                return await self._exchange(address, stream, data)
            except (OSError, trio.BrokenResourceError, ValueError):
                if not again:
                    raise
        try:
            stream = await trio.open_tcp_stream(*address)
        except OSError as exc:
            if _refused(exc):  # nothing listens there: the peer is not running
                raise Unreachable(str(exc)) from exc
            raise
        return await self._exchange(address, stream, data)

    async def keep_only(self, addresses: list[tuple[str, int]]) -> None:
        """Close what is kept for addresses no peer has now (one started again elsewhere)."""
        for address in [a for a in self._idle if a not in addresses]:
            for stream in self._idle.pop(address):
                await stream.aclose()

    async def _exchange(
        self, address: tuple[str, int], stream: trio.SocketStream, data: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        keep = False
        try:
            await stream.send_all(data)
            buffer = b""
            while b"\r\n\r\n" not in buffer:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    raise ValueError("the peer closed the connection")
                buffer += chunk
            head, _, body = buffer.partition(b"\r\n\r\n")
            status, fields = _answer_head(head)
            values = {name.lower(): value for name, value in fields}
            length = values.get(b"content-length")
            if length is None:  # to its end
                while chunk := await stream.receive_some(65536):
                    body += chunk
            else:
                while len(body) < int(length):
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        raise ValueError("the peer's answer ended early")
                    body += chunk
                keep = values.get(b"connection", b"").lower() != b"close"
            kept = [(name, value) for name, value in fields if name.lower() != b"connection"]
            return status, kept, body
        finally:
            idle = self._idle[address]
            if keep and len(idle) < self.IDLE:
                idle.append(stream)
            else:
                await stream.aclose()


def _dropped(stream: trio.SocketStream) -> bool:
    """Whether an idle kept connection has something to read: its end (the peer closed it),
    or bytes no request asked for; either way it is not to be used."""
    readable, _, _ = select.select([stream.socket.fileno()], [], [], 0)
    return bool(readable)
