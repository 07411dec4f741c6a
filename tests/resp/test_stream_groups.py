"""Stream consumer groups: what holds a time (XPENDING's idle, XINFO CONSUMERS' idle) compared
with redis-server 7.0.15 with the times masked (the rest byte for byte:
conformance/resp/scripts/27_stream_groups.txt); and the group state (last delivered ID,
entries-read, consumers, the pending entries with their consumer, delivery time and count)
kept across a kill -9 and across the log's rewrite."""

from __future__ import annotations

import threading
from pathlib import Path

import redis

from conformance.resp.servers import Pair

from .helpers import client, rewrite_offline, wait_for

IDLE = 100_000  # XCLAIM ... IDLE: an entry's idle time that a test can expect


def _steps(r: redis.Redis) -> list[object]:
    """Group commands whose replies hold times; each reply with its times masked (and the
    times themselves checked to be about what they must be)."""
    r.flushall()
    x = r.execute_command
    for i in range(1, 5):
        x("XADD", "s", f"1-{i}", "f", str(i))
    x("XGROUP", "CREATE", "s", "g", "0")
    x("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">")
    x("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">")
    x("XCLAIM", "s", "g", "carol", "0", "1-4", "IDLE", str(IDLE))
    x("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0")  # alice's again: count 2
    out: list[object] = []
    for argv in (
        ["XPENDING", "s", "g", "-", "+", "10"],
        ["XPENDING", "s", "g", "-", "+", "10", "alice"],
        ["XPENDING", "s", "g", "IDLE", str(IDLE // 2), "-", "+", "10"],
        ["XPENDING", "s", "g", "(1-1", "1-3", "1"],
    ):
        rows = x(*argv, parse_detail=True)
        for row in rows:
            idle = row["time_since_delivered"]
            assert 0 <= idle < 5000 or IDLE <= idle < IDLE + 5000, row
            row["time_since_delivered"] = idle >= IDLE
        out.append(rows)
    consumers = x("XINFO", "CONSUMERS", "s", "g")
    for c in consumers:
        assert 0 <= c[b"idle"] < 5000, c  # (a claim with IDLE: the entry's, not its consumer's)
        c[b"idle"] = "masked"
    out.append(consumers)
    info = x("XINFO", "STREAM", "s")
    for internal in ("radix-tree-keys", "radix-tree-nodes"):
        assert isinstance(info.pop(internal.encode()), int)
    out.append(info)
    x("XDEL", "s", "1-1")
    x("XGROUP", "CREATE", "e", "g", "$", "MKSTREAM")
    out.append(x("XINFO", "STREAM", "e"))
    out.append(x("XINFO", "STREAM", "s"))  # (first-entry past a deleted one)
    out.append(x("XAUTOCLAIM", "s", "g", "dave", str(IDLE // 2), "0"))
    return out


def test_times_and_info_as_redis(pair: Pair) -> None:
    redis_server, ours = pair.by_kind["plain"]
    want = _steps(client(redis_server.port))
    assert want[0][3] == {
        "message_id": b"1-4",
        "consumer": b"carol",
        "time_since_delivered": True,
        "times_delivered": 2,
    }, want[0]  # (XCLAIM without JUSTID: the count + 1)
    assert _steps(client(ours.port)) == want


def _state(r: redis.Redis) -> dict[str, object]:
    """Every group's state, the pending entries with their idle time rounded to 10 s."""
    x = r.execute_command
    out: dict[str, object] = {}
    for key in ("jobs", "empty"):
        info = x("XINFO", "STREAM", key)
        for internal in ("radix-tree-keys", "radix-tree-nodes"):
            info.pop(internal.encode())
        out[key] = info
        for group in x("XINFO", "GROUPS", key):
            name = group[b"name"].decode()
            out[f"{key}/{name}"] = group
            out[f"{key}/{name}/pending"] = [
                [p["message_id"], p["consumer"], p["time_since_delivered"] // 10_000,
                 p["times_delivered"]]
                for p in x("XPENDING", key, name, "-", "+", "100", parse_detail=True)
            ]  # fmt: skip
            out[f"{key}/{name}/consumers"] = [
                (c[b"name"], c[b"pending"]) for c in x("XINFO", "CONSUMERS", key, name)
            ]
    return out


def _fill(r: redis.Redis, port: int) -> None:
    x = r.execute_command
    x("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
    x("XGROUP", "CREATE", "jobs", "audit", "0")
    x("XGROUP", "CREATE", "jobs", "gone", "0")
    x("XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM", "ENTRIESREAD", "0")
    x("XGROUP", "CREATECONSUMER", "jobs", "workers", "idle-one")
    # a consumer blocked until the XADD: its delivery is recorded with the XADD's pass
    got: list[object] = []
    waiter = threading.Thread(
        target=lambda: got.append(
            client(port).execute_command(
                "XREADGROUP", "GROUP", "workers", "w0", "BLOCK", "5000", "STREAMS", "jobs", ">"
            )
        )
    )
    waiter.start()
    wait_for(lambda: r.info("clients")["blocked_clients"] == 1, 5, "the blocked consumer")
    for i in range(1, 9):
        x("XADD", "jobs", f"{i}-1", "job", str(i))
    waiter.join(5)
    assert got and got[0][0][1][0][0] == b"1-1", got
    x("XREADGROUP", "GROUP", "workers", "w1", "COUNT", "3", "STREAMS", "jobs", ">")
    x("XREADGROUP", "GROUP", "workers", "w2", "NOACK", "COUNT", "1", "STREAMS", "jobs", ">")
    x("XREADGROUP", "GROUP", "workers", "w1", "STREAMS", "jobs", "0")  # w1's, again
    x("XACK", "jobs", "workers", "2-1")
    x("XCLAIM", "jobs", "workers", "w2", "0", "3-1", "IDLE", "60000")
    assert r.xclaim("jobs", "workers", "w3", 0, ["4-1"], retrycount=7, justid=True) == [b"4-1"]
    x("XREADGROUP", "GROUP", "audit", "a", "STREAMS", "jobs", ">")
    x("XGROUP", "SETID", "jobs", "audit", "5-1", "ENTRIESREAD", "5")
    x("XGROUP", "DELCONSUMER", "jobs", "audit", "a")
    x("XGROUP", "DESTROY", "jobs", "gone")
    x("XDEL", "jobs", "8-1")


def test_group_state_survives_kill9_and_a_rewrite(ours, pair: Pair, tmp_path: Path) -> None:
    redis_server = pair.by_kind["plain"][0]
    r = client(redis_server.port)
    r.flushall()
    _fill(r, redis_server.port)
    want = _state(r)  # (what redis-server holds after the same commands)
    r.close()
    data = tmp_path / "d"
    server = ours.start("--sync-every=1", data=data)
    r = client(server.port)
    _fill(r, server.port)
    assert _state(r) == want
    assert want["jobs/workers/pending"] == [
        [b"1-1", b"w0", 0, 1], [b"3-1", b"w2", 6, 3], [b"4-1", b"w3", 0, 7],
    ], want  # fmt: skip
    assert [g[b"name"] for g in r.execute_command("XINFO", "GROUPS", "jobs")] == [
        b"audit", b"workers",
    ]  # fmt: skip
    r.close()
    server.kill()
    server = ours.start(data=data)
    r = client(server.port)
    assert _state(r) == want
    r.execute_command("XADD", "jobs", "9-1", "job", "9")  # the group goes on from 5-1
    assert r.execute_command("XREADGROUP", "GROUP", "workers", "w1", "STREAMS", "jobs", ">") == [
        [b"jobs", [(b"6-1", {b"job": b"6"}), (b"7-1", {b"job": b"7"}), (b"9-1", {b"job": b"9"})]]
    ]
    want = _state(r)
    r.close()
    assert server.stop() == 0
    rewrite_offline(data)  # the compaction: the groups are snapshot records now
    server = ours.start(data=data)
    r = client(server.port)
    assert _state(r) == want
    r.close()
