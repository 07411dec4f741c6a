"""The reliable-queue moves (LMOVE, RPOPLPUSH, BLMOVE, BRPOPLPUSH), SET with an expiry (EX, PX,
EXAT, PXAT, with NX/XX/GET; SETEX, PSETEX), SMOVE and MSET each write ONE record to resp.log,
never a MULTI group (a group cost ~1.45 us a command: LMOVE and SET EX were 12-19% slower);
real daemon, redis-py, the file read with storage/records.py's reader. A restart, clean or
after kill -9, gives the same keys, values and expiry times; a log in the older shape (a pop
and a push, SET and PEXPIREAT, one group or loose) still loads; WATCH sees both keys."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis

from nsqd.storage import records
from nsqd.storage.records import RecordLog
from nsqd.storage.resp_log import FILE, decode, encode

from .helpers import client, wait_for

LATER = int(time.time()) + 3600  # an absolute expiry, in seconds


def _records(data: Path) -> list[tuple[bytes, ...]]:
    return [decode(p) for p in records.read((data / FILE).read_bytes(), FILE).payloads]


def _state(r: redis.Redis) -> dict[bytes, tuple[object, int]]:
    """Every key's value and absolute expiry (PEXPIRETIME: the same across a restart)."""
    read: dict[bytes, Callable[[bytes], object]] = {
        b"list": lambda k: r.lrange(k, 0, -1),
        b"string": r.get,
        b"set": lambda k: sorted(r.smembers(k)),
    }
    return {k: (read[r.type(k)](k), r.pexpiretime(k)) for k in sorted(r.keys())}


# (what, the command, the record it writes)
ONE_RECORD: list[tuple[str, Callable[[redis.Redis], object], bytes]] = [
    ("LMOVE", lambda r: r.lmove("q", "work", "RIGHT", "LEFT"), b"MOVERL"),
    ("RPOPLPUSH", lambda r: r.rpoplpush("q", "work"), b"MOVERL"),
    ("BLMOVE", lambda r: r.blmove("q", "work", 1, "LEFT", "RIGHT"), b"MOVELR"),
    ("BRPOPLPUSH", lambda r: r.brpoplpush("q", "work", 1), b"MOVERL"),
    ("LMOVE onto itself", lambda r: r.lmove("work", "work", "LEFT", "LEFT"), b"MOVELL"),
    ("LMOVE of a last element", lambda r: r.lmove("last", "work", "LEFT", "RIGHT"), b"MOVELR"),
    ("LMOVE rotating a one-element list", lambda r: r.lmove("one", "one"), b"MOVELR"),
    ("SET EX", lambda r: r.set("lock", "a", ex=100), b"SETPX"),
    ("SET PX NX GET", lambda r: r.set("cache", "b", px=200_000, nx=True, get=True), b"SETPX"),
    ("SET EXAT XX", lambda r: r.set("lock", "c", exat=LATER, xx=True), b"SETPX"),
    ("SET PXAT", lambda r: r.set("at", "d", pxat=LATER * 1000 + 7), b"SETPX"),
    ("SETEX", lambda r: r.execute_command("SETEX", "s1", 100, "e"), b"SETPX"),
    ("PSETEX", lambda r: r.psetex("s2", 100_000, "f"), b"SETPX"),
    ("SMOVE", lambda r: r.smove("set", "set2", "m1"), b"SMOVE"),
    ("MSET", lambda r: r.mset({"k1": "1", "k2": "2", "lock": "g"}), b"MSET"),
]


def test_each_writes_one_record_and_a_restart_gives_the_same_keys(ours, tmp_path: Path) -> None:
    data = tmp_path / "d"
    server = ours.start(data=data)
    r = client(server.port)
    r.rpush("q", *"abcdef")
    r.rpush("last", "z")
    r.rpush("one", "x")
    r.expire("one", 100)
    r.sadd("set", "m1", "m2")
    for what, call, op in ONE_RECORD:
        before = len(_records(data))
        call(r)
        assert [rec[0] for rec in _records(data)[before:]] == [op], what
    state = _state(r)
    assert not r.exists("last") and r.lrange("one", 0, -1) == [b"x"]
    assert state[b"one"][1] > 0 and state[b"lock"][1] == -1  # rotated: TTL kept; MSET: gone
    assert state[b"at"][1] == LATER * 1000 + 7
    server.kill()
    server = ours.start(data=data)
    r = client(server.port)
    assert _state(r) == state, "after kill -9"
    server.stop()
    server = ours.start(data=data)
    r = client(server.port)
    assert _state(r) == state, "after a clean stop"
    r.close()


def test_a_push_that_serves_a_blocked_move_writes_it_as_one_move(ours, tmp_path: Path) -> None:
    """The push and the move it served stay one group (replayed whole), of two records, not
    three (a pop and a push)."""
    data = tmp_path / "d"
    server = ours.start(data=data)
    r = client(server.port)
    got: list[object] = []
    waiter = client(server.port)
    thread = threading.Thread(target=lambda: got.append(waiter.brpoplpush("bq", "bdst", 5)))
    thread.start()
    wait_for(lambda: int(r.info("clients")["blocked_clients"]) == 1, 5, "the client to block")
    r.lpush("bq", "job")
    thread.join(6)
    assert got == [b"job"]
    last = _records(data)[-1]
    assert last[0] == b"MULTI"
    assert [decode(p) for p in last[1:]] == [(b"LPUSH", b"bq", b"job"), (b"MOVERL", b"bq", b"bdst")]
    server.kill()
    server = ours.start(data=data)
    r = client(server.port)
    assert r.lrange("bdst", 0, -1) == [b"job"] and not r.exists("bq")
    r.close()
    waiter.close()


OLDER = [  # what the daemon wrote before: LMOVE as a pop and a push, SET EX with PEXPIREAT
    (b"RPUSH", b"q", b"a", b"b", b"c"),
    (b"RPOP", b"q", b"1"),
    (b"LPUSH", b"work", b"c"),
    (b"SET", b"lock", b"1"),
    (b"PEXPIREAT", b"lock", b"%d" % (LATER * 1000)),
    (b"SADD", b"set", b"m1", b"m2"),
    (b"SREM", b"set", b"m1"),
    (b"SADD", b"set2", b"m1"),
    (b"SET", b"k1", b"1"),
    (b"SET", b"k2", b"2"),
]


def test_a_log_in_the_older_shape_still_loads(ours, tmp_path: Path) -> None:
    """Loose records as before the groups, then the same as the groups the last version
    wrote (one MULTI per command), in database 1."""
    data = tmp_path / "d"
    data.mkdir()
    log = RecordLog(str(data / FILE), FILE, 1, 1.0)
    log.load()
    grouped = [OLDER[0], (b"MULTI", *map(encode, OLDER[1:3])), OLDER[3]]
    grouped += [(b"MULTI", encode(OLDER[3]), encode(OLDER[4])), OLDER[5]]
    grouped += [(b"MULTI", *map(encode, OLDER[6:8])), (b"MULTI", *map(encode, OLDER[8:]))]
    for rec in [*OLDER, (b"SELECT", b"1"), *grouped]:
        log.append(encode(rec))
    log.close()
    server = ours.start(data=data)
    for db in (0, 1):
        r = client(server.port, db=db)
        assert r.lrange("q", 0, -1) == [b"a", b"b"] and r.lrange("work", 0, -1) == [b"c"]
        assert r.get("lock") == b"1" and r.pexpiretime("lock") == LATER * 1000
        assert r.smembers("set") == {b"m2"} and r.smembers("set2") == {b"m1"}
        assert r.mget("k1", "k2") == [b"1", b"2"]
        r.close()


def test_watch_sees_both_keys_of_a_move_and_a_set_with_an_expiry(ours) -> None:
    server = ours.start()
    r, other = client(server.port), client(server.port)
    changes: list[tuple[str, Callable[[], object]]] = [
        ("q", lambda: other.lmove("q", "work")),
        ("work", lambda: other.rpoplpush("q", "work")),
        ("lock", lambda: other.set("lock", "1", ex=100)),
        ("set2", lambda: other.smove("set", "set2", "m")),
        ("k2", lambda: other.mset({"k1": "1", "k2": "2"})),
    ]
    for key, change in changes:
        other.rpush("q", "a", "b")
        other.sadd("set", "m")
        p = r.pipeline(transaction=True)
        p.watch(key)
        p.multi()
        p.set("ran", key)
        change()
        try:
            p.execute()
            raise AssertionError(f"EXEC ran after a change to the watched {key!r}")
        except redis.WatchError:
            pass
    assert not r.exists("ran")
    r.close()
    other.close()
