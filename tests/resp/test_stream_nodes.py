"""Redis 7.0's macro-node layout of a stream (nsqd/resp/stream_nodes.py), drawn at random
beside redis-server 7.0.15: XADD (field names shared with a node's first entry or not, values
that read as integers of every width, long values that fill a node by its bytes, IDs whose
parts jump), XDEL, XTRIM and XADD's trims by MAXLEN and MINID, exact and with `~` and LIMIT,
COPY; every reply and XINFO STREAM (length, radix-tree-keys, radix-tree-nodes) byte for byte
after each step. The layout is kept by a kill -9 and by the log's rewrite: `~` trims after
them still take what redis-server's take (fixed cases: conformance/resp/scripts/
34_stream_nodes.txt)."""

from __future__ import annotations

import random
import re
from pathlib import Path

from conformance.resp.servers import Pair
from conformance.resp.wire import Conn, encode

from .helpers import rewrite_offline

NAMES = [[b"a"], [b"a", b"b"], [b"f"], [b"x", b"y", b"z"], [b"1", b"22"]]
ENTRY = re.compile(rb"\$\d+\r\n(\d+)-(\d+)\r\n\*")


class Both:
    """redis-server and ours: each command sent to both, the replies compared."""

    def __init__(self, redis_port: int, our_port: int) -> None:
        self.conns = [Conn(redis_port), Conn(our_port)]
        self.steps: list[list[bytes]] = []

    def ask(self, *args: object) -> bytes:
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.steps.append(argv)
        replies = []
        for conn in self.conns:
            conn.send(encode(argv))
            replies.append(conn.reply())
        assert replies[0] == replies[1], (self.steps[-8:], replies)
        return replies[0]

    def reconnect(self, our_port: int) -> None:
        self.conns[1].close()
        self.conns[1] = Conn(our_port)

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


def _value(rnd: random.Random, big: bool) -> bytes:
    kind = rnd.random()
    if kind < 0.3:  # an integer element, 1 to 9 bytes
        return b"%d" % rnd.randrange(-(10 ** rnd.randrange(1, 19)), 10 ** rnd.randrange(1, 19))
    sizes = [10, 300, 1000, 3000, 5000] if big else [1, 5, 30, 63, 64, 100, 500]
    return b"v" * rnd.choice(sizes)


def _trim(rnd: random.Random, ids: list[tuple[int, int]], length: int) -> list[object]:
    how = rnd.choice([[b"~"], [b"="], []])
    if rnd.random() < 0.5:
        args: list[object] = [b"MAXLEN", *how, rnd.randrange(0, length + 5)]
    else:
        ms, seq = rnd.choice(ids) if ids else (0, 0)
        args = [b"MINID", *how, b"%d-%d" % (ms, seq + rnd.randrange(0, 2))]
    if how == [b"~"] and rnd.random() < 0.5:
        args += [b"LIMIT", rnd.choice([0, 1, 50, 100, 150, 1000])]
    return args


def _draw(both: Both, rnd: random.Random, steps: int, clock: list[int]) -> None:
    big = rnd.random() < 0.3
    ids = [(int(ms), int(seq)) for ms, seq in ENTRY.findall(both.ask("XRANGE", "s", "-", "+"))]
    for _ in range(steps):
        r = rnd.random()
        if r < 0.6:
            fields = [x for name in rnd.choice(NAMES) for x in (name, _value(rnd, big))]
            jump = rnd.random()
            if jump < 0.5:
                clock[1] += rnd.randrange(1, 3)
            elif jump < 0.9:
                clock[0] += 1 if jump < 0.8 else rnd.randrange(1, 10 ** rnd.randrange(1, 14))
                clock[1] = rnd.randrange(0, 200)
            trim = _trim(rnd, ids, len(ids)) if rnd.random() < 0.15 else []
            both.ask("XADD", "s", *trim, b"%d-%d" % tuple(clock), *fields)
        elif r < 0.75 and ids:
            gone = rnd.sample(ids, min(len(ids), rnd.randrange(1, 20)))
            both.ask("XDEL", "s", *[b"%d-%d" % sid for sid in gone])
        elif r < 0.85:
            both.ask("XTRIM", "s", *_trim(rnd, ids, len(ids)))
        elif r < 0.9:
            both.ask("COPY", "s", "s2", "REPLACE")
            both.ask("XINFO", "STREAM", "s2")
        both.ask("XINFO", "STREAM", "s")
        ids = [(int(ms), int(seq)) for ms, seq in ENTRY.findall(both.ask("XRANGE", "s", "-", "+"))]


def _holes(both: Both) -> None:
    """Every other entry of s deleted: nodes of live entries and tombstones, which entries
    alone would pack otherwise."""
    ids = ENTRY.findall(both.ask("XRANGE", "s", "-", "+"))
    both.ask("XDEL", "s", *[b"%s-%s" % sid for sid in ids[::2]])


def _probe(both: Both) -> None:
    """The layout of s and of s2 as `~` trims of copies of them see it."""
    for key in (b"s", b"s2"):
        both.ask("XINFO", "STREAM", key)
        both.ask("COPY", key, "probe", "REPLACE")
        length = int(both.ask("XLEN", "probe")[1:])
        for keep in (length - 1, length // 2, 0):
            both.ask("XTRIM", "probe", "MAXLEN", "~", keep)


def test_layout_as_redis_and_kept_across_kill9_and_a_rewrite(
    ours, pair: Pair, tmp_path: Path
) -> None:
    redis_server = pair.by_kind["plain"][0]
    data = tmp_path / "d"
    server = ours.start("--sync-every=1", data=data)
    both = Both(redis_server.port, server.port)
    both.ask("FLUSHALL")
    rnd, clock = random.Random(7), [1, 0]
    try:
        _draw(both, rnd, 300, clock)
        nodes = int(both.ask("XINFO", "STREAM", "s").split(b"\r\n")[4][1:])
        _holes(both)
        both.ask("COPY", "s", "s2", "REPLACE")
        server.kill()
        server = ours.start(data=data)
        both.reconnect(server.port)
        _probe(both)
        _draw(both, rnd, 100, clock)
        _holes(both)
        both.conns[1].close()  # (a clean stop waits for its clients)
        assert server.stop() == 0
        rewrite_offline(data)
        server = ours.start(data=data)
        both.reconnect(server.port)
        _probe(both)
        _draw(both, rnd, 100, clock)
    finally:
        both.close()
    kinds = {argv[0] for argv in both.steps}
    assert {b"XADD", b"XDEL", b"XTRIM", b"COPY"} <= kinds, kinds
    assert nodes >= 2, nodes
