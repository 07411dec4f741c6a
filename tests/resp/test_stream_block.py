"""XREAD BLOCK's answers that need a client's id (CLIENT UNBLOCK) or a clock, on redis-server
7.0.15 and ours alike (the rest is conformance/resp/scripts/26_xread_block.txt)."""

from __future__ import annotations

import time

from conformance.resp.servers import Pair
from conformance.resp.wire import Conn, encode


def _blocked(port: int, *argv: bytes) -> tuple[Conn, bytes]:
    """A connection blocked in `argv` (sent, unanswered), and its client id."""
    conn = Conn(port)
    conn.send(encode([b"CLIENT", b"ID"]))
    cid = conn.reply()[1:-2]
    conn.send(encode(list(argv)))
    return conn, cid


def _unblock_answers(port: int) -> list[bytes]:
    me = Conn(port)
    me.send(encode([b"FLUSHALL"]))
    me.reply()
    out = []
    for how in ([], [b"TIMEOUT"], [b"ERROR"]):
        conn, cid = _blocked(port, b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$")
        time.sleep(0.05)
        me.send(encode([b"CLIENT", b"UNBLOCK", cid, *how]))
        out += [me.reply(), conn.reply(3.0)]
        # unblocked, it left the stream's queue: a later XADD answers nobody twice
        me.send(encode([b"XADD", b"s", b"*", b"f", b"v"]))
        me.reply()
        out.append(conn.reply(0.1))
        conn.close()
    me.send(encode([b"CLIENT", b"UNBLOCK", b"999999"]))
    out.append(me.reply())
    me.close()
    return out


def test_client_unblock_answers_as_redis(pair: Pair) -> None:
    redis, ours = pair.by_kind["plain"]
    want = _unblock_answers(redis.port)
    assert want[:2] == [b":1\r\n", b"*-1\r\n"], want
    assert _unblock_answers(ours.port) == want


def test_block_timeout_is_milliseconds(pair: Pair) -> None:
    """BLOCK 300 waits about 0.3 s (not 300 s, not at once), then the null array."""
    _, ours = pair.by_kind["plain"]
    conn = Conn(ours.port)
    started = time.monotonic()
    conn.send(encode([b"XREAD", b"BLOCK", b"300", b"STREAMS", b"nokey", b"$"]))
    assert conn.reply(3.0) == b"*-1\r\n"
    assert 0.25 <= time.monotonic() - started < 2.0
    conn.close()
