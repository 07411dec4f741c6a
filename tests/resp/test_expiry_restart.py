"""Seed 003's expiry events, decoded by a raw V2 consumer, and the store across restarts:
a clean stop and kill -9 keep lists and unexpired keys; a key that expired while the daemon
was down is expired (and its event published) after the start."""

from __future__ import annotations

import struct
import time

from .helpers import client, consume, wait_for

TOPIC = "expired"


def string_frame(key: bytes, value: bytes, db: int = 0) -> bytes:
    # the seed's layout written out by hand: db, type 0, key, value (little-endian)
    return (
        struct.pack("<HH", db, 0)
        + struct.pack("<I", len(key)) + key
        + struct.pack("<I", len(value)) + value
    )  # fmt: skip


def hash_frame(key: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes:
    out = struct.pack("<HH", 0, 1) + struct.pack("<I", len(key)) + key
    out += struct.pack("<I", 2 * len(pairs))
    for field, value in pairs:
        out += struct.pack("<I", len(field)) + field + struct.pack("<I", len(value)) + value
    return out


def test_expiry_events_string_and_hash(ours) -> None:
    server = ours.start(f"--resp-expiry-topic={TOPIC}")
    r = client(server.port)
    assert r.set("session:1", b"payload-\x00\xff", px=300)
    assert r.hset("user:7", mapping={"name": "ann", "n": "1"}) == 2
    assert r.pexpire("user:7", 300)
    assert r.rpush("list:x", "a") == 1
    assert r.pexpire("list:x", 300)  # lists expire silently
    assert r.set("kept", "v")
    # active expiry: nothing reads the keys, DBSIZE does not look them up
    wait_for(lambda: r.dbsize() == 1, 5, "the three keys to expire unread")
    bodies = consume(server.tcp_port, TOPIC, "c", 2)
    assert sorted(bodies) == sorted(
        [
            string_frame(b"session:1", b"payload-\x00\xff"),
            hash_frame(b"user:7", [(b"name", b"ann"), (b"n", b"1")]),
        ]
    )
    assert r.get("session:1") is None and r.exists("user:7", "list:x") == 0
    # a key found expired when read (lazy) is announced once too
    r.set("lazy", "v", px=50)
    time.sleep(0.1)
    assert r.get("lazy") is None
    assert consume(server.tcp_port, TOPIC, "c", 1) == [string_frame(b"lazy", b"v")]
    r.close()
    # a key of another database: its event carries that database's index (it said 0)
    r3 = client(server.port, db=3)
    assert r3.set("in-db-3", "v", px=50)
    wait_for(lambda: r3.dbsize() == 0, 5, "the key of db 3 to expire")
    assert consume(server.tcp_port, TOPIC, "c", 1) == [string_frame(b"in-db-3", b"v", 3)]
    r3.close()


def _fill(r) -> None:
    r.rpush("queue:a", *[f"job-{i}" for i in range(100)])
    r.lpop("queue:a", 10)
    r.lmove("queue:a", "processing", "RIGHT", "LEFT")
    r.lrem("processing", 1, "job-99")
    r.rpush("processing", "job-98")
    r.set("long", "lives", ex=3600)
    r.set("plain", "v")
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.hdel("h", "a")
    r.rpush("gone", "x")
    r.delete("gone")
    r.ltrim("queue:a", 0, 79)


def _check(r) -> None:
    assert r.lrange("queue:a", 0, -1) == [f"job-{i}".encode() for i in range(10, 90)]
    assert r.lrange("processing", 0, -1) == [b"job-98"]
    assert r.get("long") == b"lives" and 3500 < r.ttl("long") <= 3600
    assert r.get("plain") == b"v" and r.ttl("plain") == -1
    assert r.hgetall("h") == {b"b": b"2"}
    assert r.exists("gone") == 0


def test_kill9_keeps_lists_and_unexpired_keys(ours, tmp_path) -> None:
    data = tmp_path / "d"
    server = ours.start(f"--resp-expiry-topic={TOPIC}", "--sync-every=1", data=data)
    r = client(server.port)
    _fill(r)
    r.set("short", "dies", px=500)
    r.close()
    server.kill()
    time.sleep(0.6)  # "short" expires while the daemon is down
    server = ours.start(f"--resp-expiry-topic={TOPIC}", data=data)
    r = client(server.port)
    _check(r)
    assert consume(server.tcp_port, TOPIC, "c", 1) == [string_frame(b"short", b"dies")]
    assert r.exists("short") == 0
    r.close()


def test_clean_restart_keeps_everything(ours, tmp_path) -> None:
    data = tmp_path / "d"
    server = ours.start(data=data)
    r = client(server.port)
    _fill(r)
    r.close()
    assert server.stop() == 0
    server = ours.start(data=data)
    r = client(server.port)
    _check(r)
    r.close()
