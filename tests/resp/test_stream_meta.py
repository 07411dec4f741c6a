"""XINFO STREAM FULL (every group's pending entries with their delivery times, every
consumer's seen-time) compared with redis-server 7.0.15 with the times masked, under RESP2
and RESP3; XSETID's counters (last ID, entries added, largest deleted ID: one XMETA record)
and everything FULL shows kept across a kill -9 and the log's rewrite, its times to the
millisecond (the replies themselves, byte for byte: conformance/resp/scripts/29_xsetid.txt,
33_xinfo_stream_full.txt)."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from conformance.resp.servers import Pair

from .helpers import client, rewrite_offline

CLAIMED_AT = 1_700_000_000_123  # XCLAIM ... TIME: a delivery time a test can expect


def _fill(port: int) -> None:
    with client(port) as r:
        _commands(r)


def _commands(r: redis.Redis) -> None:
    x = r.execute_command
    x("FLUSHALL")
    for i in range(1, 6):
        x("XADD", "s", f"1-{i}", "f", str(i))
    x("XGROUP", "CREATE", "s", "g", "0")
    x("XGROUP", "CREATE", "s", "other", "$")
    x("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    x("XREADGROUP", "GROUP", "g", "b", "COUNT", "2", "STREAMS", "s", ">")
    x("XCLAIM", "s", "g", "a", "0", "1-2", "1-4", "TIME", str(CLAIMED_AT), "RETRYCOUNT", "5")
    x("XGROUP", "CREATECONSUMER", "s", "other", "idle")
    x("XDEL", "s", "1-5")
    x("XSETID", "s", "1-4", "ENTRIESADDED", "40", "MAXDELETEDID", "1-3")
    x("XGROUP", "CREATE", "e", "g", "$", "MKSTREAM")
    x("XSETID", "e", "7-7", "ENTRIESADDED", "3", "MAXDELETEDID", "7-0")
    x("XADD", "t", "5-5", "f", "v")
    x("XSETID", "t", "9-0")


def _full(port: int, protocol: int = 2) -> list[dict]:
    out = []
    with client(port, protocol=protocol) as r:
        for key in ("s", "e", "t"):
            info = r.xinfo_stream(key, full=True)
            for internal in ("radix-tree-keys", "radix-tree-nodes"):
                assert isinstance(info.pop(internal), int)
            out.append(info)
    return out


def _masked(full: list[dict]) -> list[dict]:
    """The times of `full` (just read) replaced by what they must be: now, or CLAIMED_AT."""
    now = time.time() * 1000

    def mask(when: int) -> str:
        assert when == CLAIMED_AT or now - 5000 < when <= now + 1, (when, now)
        return "claimed" if when == CLAIMED_AT else "now"

    for info in full:
        for group in info["groups"]:
            for row in group["pending"]:
                row[2] = mask(row[2])
            for consumer in group["consumers"]:
                consumer["seen-time"] = mask(consumer["seen-time"])
                for row in consumer["pending"]:
                    row[1] = mask(row[1])
    return full


def test_full_as_redis_and_kept_across_kill9_and_a_rewrite(
    ours, pair: Pair, tmp_path: Path
) -> None:
    port = pair.by_kind["plain"][0].port
    _fill(port)
    want = _masked(_full(port))
    assert want == _masked(_full(port, 3))
    s, e, t = want
    assert s["last-generated-id"] == b"1-4" and s["entries-added"] == 40, s
    assert [p[:2] + p[3:] for p in s["groups"][0]["pending"]] == [
        [b"1-1", b"c", 1], [b"1-2", b"a", 5], [b"1-3", b"b", 1], [b"1-4", b"a", 5],
    ], s  # fmt: skip
    assert e["entries-added"] == 3 and t["last-generated-id"] == b"9-0", (e, t)
    data = tmp_path / "d"
    server = ours.start("--sync-every=1", data=data)
    _fill(server.port)
    exact = _full(server.port)
    assert _masked(_full(server.port)) == want
    assert _masked(_full(server.port, 3)) == want
    server.kill()
    server = ours.start(data=data)
    assert _full(server.port) == exact  # the times too, to the millisecond
    assert server.stop() == 0
    rewrite_offline(data)
    server = ours.start(data=data)
    assert _full(server.port) == exact
