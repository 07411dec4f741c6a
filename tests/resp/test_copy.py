"""COPY's destination is written to resp.log as the records that rebuild a key after a restart
(one group per COPY), so a kill -9 and the log's rewrite keep it: every type, a stream with
its consumer groups, consumers and pending entries, the expiry, another database, REPLACE of
another type; compared with what redis-server 7.0.15 holds after the same commands (the
replies themselves, byte for byte: conformance/resp/scripts/28_copy.txt)."""

from __future__ import annotations

from pathlib import Path

import redis

from conformance.resp.servers import Pair

from .helpers import client, rewrite_offline

LATER = 99_999_999_999_999  # an absolute expiry (unix ms) that a test can expect


def _fill(r: redis.Redis) -> None:
    x = r.execute_command
    x("FLUSHALL")
    x("RPUSH", "l", "1", "2", "3")
    x("PEXPIREAT", "l", LATER)
    x("HSET", "h", "f", "v", "g", "w")
    x("SADD", "st", "a", "b", "c")
    x("ZADD", "z", "1", "a", "-inf", "b", "2.5", "c")
    x("SET", "str", "v", "PXAT", LATER - 1)
    for i in range(1, 5):
        x("XADD", "s", f"1-{i}", "f", str(i))
    x("XGROUP", "CREATE", "s", "g", "0")
    x("XGROUP", "CREATE", "s", "late", "$", "ENTRIESREAD", "4")
    x("XGROUP", "CREATECONSUMER", "s", "late", "idle-one")
    x("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">")
    x("XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "s", ">")
    x("XCLAIM", "s", "g", "carol", "0", "1-2", "IDLE", "60000")
    x("XDEL", "s", "1-4")
    x("XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM")
    for key in ("l", "h", "st", "z", "str", "s", "empty"):
        assert x("COPY", key, key + "2") == 1
        assert x("COPY", key, key, "DB", "3") == 1
    assert x("COPY", "s", "l", "REPLACE") == 1  # a list replaced by a stream
    assert x("COPY", "str", "st", "DB", "3", "REPLACE") == 1  # a set by a string, there
    x("XACK", "s2", "g", "1-1")  # the copy's own groups
    x("XREADGROUP", "GROUP", "g", "dave", "STREAMS", "s2", ">")


def _state(port: int) -> dict[str, object]:
    """Every key of databases 0 and 3: its type, value and expiry; a stream's info, groups,
    pending entries (their idle time rounded to 10 s) and consumers."""
    out: dict[str, object] = {}
    for db in (0, 3):
        r = client(port, db=db)
        x = r.execute_command
        for key in sorted(x("KEYS", "*")):
            kind = x("TYPE", key)
            name = f"{db}/{key.decode()}"
            out[name] = (kind, x("PEXPIRETIME", key))
            if kind == b"list":
                out[name + "/value"] = x("LRANGE", key, 0, -1)
            elif kind == b"hash":
                out[name + "/value"] = x("HGETALL", key)
            elif kind == b"set":
                out[name + "/value"] = sorted(x("SMEMBERS", key))
            elif kind == b"zset":
                out[name + "/value"] = x("ZRANGE", key, 0, -1, "WITHSCORES")
            elif kind == b"string":
                out[name + "/value"] = x("GET", key)
            else:
                out[name + "/value"] = _stream(x, key)
        r.close()
    return out


def _stream(x: object, key: bytes) -> list[object]:
    info = x("XINFO", "STREAM", key)  # type: ignore[operator]
    for internal in (b"radix-tree-keys", b"radix-tree-nodes"):
        info.pop(internal)
    out = [x("XRANGE", key, "-", "+"), info]  # type: ignore[operator]
    for group in x("XINFO", "GROUPS", key):  # type: ignore[operator]
        pending = x(  # type: ignore[operator]
            "XPENDING", key, group[b"name"], "-", "+", "100", parse_detail=True
        )
        consumers = x("XINFO", "CONSUMERS", key, group[b"name"])  # type: ignore[operator]
        rows = [
            [p["message_id"], p["consumer"], p["time_since_delivered"] // 10_000,
             p["times_delivered"]]
            for p in pending
        ]  # fmt: skip
        out += [group, rows, [(c[b"name"], c[b"pending"]) for c in consumers]]
    return out


def test_copies_survive_kill9_and_a_rewrite(ours, pair: Pair, tmp_path: Path) -> None:
    redis_server = pair.by_kind["plain"][0]
    r = client(redis_server.port)
    _fill(r)
    r.close()
    want = _state(redis_server.port)
    assert want["0/l"] == (b"stream", -1) and want["3/st"] == (b"string", LATER - 1), want
    assert want["3/l"] == (b"list", LATER) and len(want) == 2 * (14 + 7), want
    data = tmp_path / "d"
    server = ours.start("--sync-every=1", data=data)
    r = client(server.port)
    _fill(r)
    r.close()
    assert _state(server.port) == want
    server.kill()
    server = ours.start(data=data)
    assert _state(server.port) == want
    assert server.stop() == 0
    rewrite_offline(data)  # the compaction: snapshot records now
    server = ours.start(data=data)
    assert _state(server.port) == want
