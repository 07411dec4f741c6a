"""The workers' kept HTTP connections to their peers (nsqd/group/fanout.py KeptConnections),
against a real HTTP listener on 127.0.0.1 that answers and then closes each connection after
`per_connection` requests, as a peer does at its idle timeout or when it is started again: a
connection closed while it was idle is seen before it is used, so a request that may not be made
twice (again=False) still gets its answer; one that breaks once sent raises, or is sent again
on a new connection with again=True."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
import trio

from nsqd.group.kept import KeptConnections

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nOK"


async def _peer(
    nursery: trio.Nursery, per_connection: int, answer: Callable[[int], bool]
) -> tuple[tuple[str, int], list[bytes]]:
    """A listener answering each request (one read each) unless `answer(n)` is False for the
    n-th request overall (then the connection is closed unanswered); returns its address and
    the requests it read."""
    seen: list[bytes] = []

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            for _ in range(per_connection):
                data = await stream.receive_some(65536)
                if not data:
                    return
                seen.append(data)
                if not answer(len(seen)):
                    return
                await stream.send_all(ANSWER)

    (listener,) = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
    return listener.socket.getsockname()[:2], seen


async def test_a_connection_the_peer_closed_while_idle_is_not_used() -> None:
    async with trio.open_nursery() as nursery:
        address, seen = await _peer(nursery, 1, lambda n: True)
        kept = KeptConnections()
        for _ in range(3):
            status, headers, body = await kept.request(address, "GET", b"/ping")
            assert (status, body) == (200, b"OK")
            assert (b"Content-Type", b"text/plain") in headers
            await trio.sleep(0.05)  # the peer's close reaches us while the connection is idle
        assert len(seen) == 3
        nursery.cancel_scope.cancel()


async def test_a_kept_connection_that_breaks_once_sent_raises_unless_again() -> None:
    async with trio.open_nursery() as nursery:
        # the second request overall is read and left unanswered, its connection closed
        address, seen = await _peer(nursery, 10, lambda n: n != 2)
        kept = KeptConnections()
        assert (await kept.request(address, "GET", b"/a"))[0] == 200
        with pytest.raises(ValueError):
            await kept.request(address, "GET", b"/b")
        assert len(seen) == 2
        # a new connection, kept again: the next request is sent twice when it breaks
        address, seen = await _peer(nursery, 10, lambda n: n != 2)
        assert (await kept.request(address, "GET", b"/a"))[0] == 200
        assert (await kept.request(address, "GET", b"/b", again=True))[0] == 200
        assert [r.split(b" ")[1] for r in seen] == [b"/a", b"/b", b"/b"]
        nursery.cancel_scope.cancel()


async def test_a_group_ask_sends_a_get_again_and_a_post_not() -> None:
    """FanOut.ask_all: a GET (and an admin request that may be made twice) is sent again when
    its kept connection breaks once sent, so the peer's part of the answer is not lost; a POST
    that may not be made twice (a receive, an empty) leaves that peer out."""
    from nsqd.group.fanout import FanOut

    async with trio.open_nursery() as nursery:
        address, seen = await _peer(nursery, 10, lambda n: n not in (2, 5))
        fanout = FanOut(None, None, lambda: [address], KeptConnections())  # type: ignore[arg-type]
        assert await fanout.ask_all("GET", b"/stats") == [(200, b"OK")]
        assert await fanout.ask_all("GET", b"/stats") == [(200, b"OK")]  # sent twice
        assert await fanout.ask_all("POST", b"/channel/receive") == [(200, b"OK")]
        assert await fanout.ask_all("POST", b"/channel/receive") == []  # broken once sent
        assert await fanout.ask_all("POST", b"/topic/pause", again=True) == [(200, b"OK")]
        paths = [r.split(b" ")[1] for r in seen]
        assert paths == [b"/stats"] * 3 + [b"/channel/receive"] * 2 + [b"/topic/pause"]
        nursery.cancel_scope.cancel()
