"""An nsqlookupd that cannot be reached keeps nothing queued for it: each topic and channel
made and deleted meanwhile was a notification kept until a connection drained it (one
nsqlookupd down for a month, a month of churn in memory); the replay on connecting covers
them, as nsqd drops a command its lookupPeer cannot send."""

from __future__ import annotations

import socket

import trio

from nsqd.cluster.lookupd import LookupPeer
from protocol.lookup import encode_register, encode_unregister


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_notifications_for_a_lookupd_that_is_down_are_dropped() -> None:
    peer = LookupPeer(
        f"127.0.0.1:{closed_port()}", lambda: b"IDENTIFY\n", list, 1 << 20, lambda: None
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer.run)
        await trio.sleep(0.2)  # its first connect is refused; it waits to try again
        for i in range(2000):
            peer.notify(encode_register(f"t{i}"))
            peer.notify(encode_unregister(f"t{i}"))
        queued = peer._receive.statistics().current_buffer_used
        peer.scope.cancel()
    assert queued == 0, f"{queued} notifications kept for a lookupd that is down"
