"""DEBUG on ours, which Redis's own test suite needs (commands/admin.py): off by default with
Redis's refusal, and with --resp-enable-debug-command RELOAD (the dataset through the log and
back), SET-ACTIVE-EXPIRE (keys then expire only when read) and CLIENT UNBLOCK's replies."""

from __future__ import annotations

import socket

import pytest
import redis

from .helpers import client, wait_for


def _fill(r: redis.Redis) -> None:
    r.rpush("l", *[f"e{i}" for i in range(300)], "x" * 5000)
    r.hset("h", mapping={"a": "1", "b": "x" * 100})
    r.set("s", "v", px=600_000)
    r.zadd("z", {"m": 1.5})
    r.sadd("set", "a", "b")
    r.xadd("st", {"f": "v"}, id="1-1")
    r.select(3)
    r.set("other-db", "here")
    r.select(0)


def _dump(r: redis.Redis) -> dict:
    return {
        "l": r.lrange("l", 0, -1), "h": r.hgetall("h"), "s": r.get("s"),
        "z": r.zrange("z", 0, -1, withscores=True), "set": r.smembers("set"),
        "st": r.xrange("st"), "keys": sorted(r.keys()), "ttl": r.pttl("s") > 590_000,
    }  # fmt: skip


def test_debug_refused_by_default(ours) -> None:
    server = ours.start()
    r = client(server.port, protocol=2)
    with pytest.raises(redis.ResponseError, match="DEBUG command not allowed"):
        r.execute_command("DEBUG", "RELOAD")
    r.close()


def test_debug_reload_keeps_every_type_and_database(ours) -> None:
    server = ours.start("--resp-enable-debug-command")
    r = client(server.port, protocol=2, db=0)
    _fill(r)
    before = _dump(r)
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert _dump(r) == before
    r.select(3)
    assert r.get("other-db") == b"here"
    r.select(0)
    r.rpush("l", "after")  # the log goes on after the rewrite: a restart sees it all
    r.set("s", "v2", keepttl=True)
    assert r.execute_command("DEBUG", "LOADAOF") == b"OK"  # the log as it is, replayed
    assert r.lrange("l", -2, -1) == [b"x" * 5000, b"after"] and r.get("s") == b"v2"
    assert r.pttl("s") > 590_000
    r.close()
    assert server.stop() == 0
    server = ours.start("--resp-enable-debug-command", data=server.data)
    r = client(server.port, protocol=2)
    assert r.lrange("l", -2, -1) == [b"x" * 5000, b"after"]
    assert r.hgetall("h") == before["h"]
    r.close()


def test_set_active_expire_off_keeps_keys_until_read(ours) -> None:
    server = ours.start("--resp-enable-debug-command")
    r = client(server.port, protocol=2)
    assert r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"OK"
    r.set("k", "v", px=30)
    r.set("probe", "v", px=30)
    wait_for(lambda: r.pttl("probe") == -2, 5, "probe's expiry")  # read: expired now
    assert r.dbsize() == 1  # k is past its time but still held: nothing expires it
    assert r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1") == b"OK"
    wait_for(lambda: r.dbsize() == 0, 5, "active expiry of k")
    r.close()


def test_client_unblock_answers_the_blocked_client(ours) -> None:
    server = ours.start()
    r = client(server.port, protocol=2)
    blocked = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    blocked.sendall(b"CLIENT ID\r\n")
    client_id = int(blocked.recv(100)[1:].strip())
    unblocked = b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    for reason, reply in ((b"TIMEOUT", b"*-1\r\n"), (b"ERROR", unblocked)):
        blocked.sendall(b"BLPOP nothing 0\r\n")
        wait_for(lambda: r.info("clients")["blocked_clients"] == 1, 5, "the BLPOP to block")
        assert r.execute_command("CLIENT", "UNBLOCK", client_id, reason) == 1
        assert blocked.recv(100) == reply
    assert r.execute_command("CLIENT", "UNBLOCK", client_id) == 0  # not blocked now
    blocked.sendall(b"BLPOP l 0\r\n")
    wait_for(lambda: r.info("clients")["blocked_clients"] == 1, 5, "the BLPOP to block")
    r.rpush("l", "v")
    assert blocked.recv(100) == b"*2\r\n$1\r\nl\r\n$1\r\nv\r\n"
    blocked.close()
    r.close()
