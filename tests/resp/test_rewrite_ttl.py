"""resp.log's rewrite (the compaction, as BGREWRITEAOF) and keys with a TTL: a string with one
is one `SETPX key value <unix ms>` record (the record the live SET ... EX writes), not SET and
PEXPIREAT; a list, set, hash, sorted set or stream is its records and a PEXPIREAT. Either
way the rewritten log, replayed by a restart, gives the same values with the same expiry
(PEXPIRETIME equal, PTTL within what the restart took), in database 0 and another."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import redis

from nsqd.resp.databases import Databases
from nsqd.storage import records as record_log
from nsqd.storage.resp_log import FILE, RespLog, decode

from .helpers import client, wait_for

HOUR = 3600


def _records(data: Path) -> list[tuple[bytes, ...]]:
    return [decode(p) for p in record_log.read((data / FILE).read_bytes(), FILE).payloads]


def _fresh(data: Path) -> tuple[Databases, RespLog]:
    dbs = Databases()
    log = RespLog(str(data), sync_every=1, sync_timeout=1.0, sync_due=lambda: None)
    log.load(dbs)  # type: ignore[arg-type]
    return dbs, log


def _fill(r: redis.Redis, tag: str) -> None:
    """One key of each type with a TTL (the string's set by SET EX, the others' by EXPIRE),
    and one string without."""
    r.set(f"s{tag}", "v", ex=HOUR)
    r.set(f"plain{tag}", "p")
    r.rpush(f"l{tag}", "a", "b")
    r.sadd(f"set{tag}", "m1", "m2")
    r.hset(f"h{tag}", mapping={"f": "1", "g": "2"})
    r.zadd(f"z{tag}", {"m": 1.5, "n": -2})
    r.xadd(f"x{tag}", {"f": "v"}, id="5-1")
    r.xadd(f"x{tag}", {"f": "w"}, id="6-0")
    r.xdel(f"x{tag}", "6-0")  # its last ID past its entries: an XADD and an XDEL in the file
    for key in ("l", "set", "h", "z", "x"):
        r.pexpire(f"{key}{tag}", HOUR * 1000 + 7)


def _state(r: redis.Redis) -> dict[bytes, tuple[object, int]]:
    read: dict[bytes, Callable[[bytes], object]] = {
        b"string": r.get,
        b"list": lambda k: r.lrange(k, 0, -1),
        b"set": lambda k: sorted(r.smembers(k)),
        b"hash": r.hgetall,
        b"zset": lambda k: r.zrange(k, 0, -1, withscores=True),
        b"stream": lambda k: r.xrange(k),
    }
    return {k: (read[r.type(k)](k), r.pexpiretime(k)) for k in sorted(r.keys())}


def _ttls(r: redis.Redis) -> dict[bytes, int]:
    return {k: r.pttl(k) for k in r.keys("*")}


def test_a_rewrite_then_a_restart_keeps_every_ttl(ours, tmp_path: Path) -> None:
    data = tmp_path / "d"
    server = ours.start(data=data)
    conns = [client(server.port), client(server.port, db=3)]
    for r, tag in zip(conns, ("", "3"), strict=True):
        _fill(r, tag)
    want = [_state(r) for r in conns]
    read_at = time.monotonic()
    ttls = [_ttls(r) for r in conns]
    assert len(want[0]) == 7 and want[1][b"s3"][1] > 0 and want[0][b"plain"][1] == -1
    assert server.stop() == 0
    _dbs, log = _fresh(data)  # the daemon's own rewrite (what BGREWRITEAOF's child writes)
    log.rewrite()
    log.close()
    written = _records(data)
    for tag, before in zip((b"", b"3"), want, strict=True):  # a string with a TTL: one record
        s = b"s" + tag
        assert [rec for rec in written if rec[1:2] == (s,)] == [
            (b"SETPX", s, b"v", b"%d" % before[s][1])
        ]
    assert (b"SET", b"plain", b"p") in written
    server = ours.start(data=data)
    conns = [client(server.port), client(server.port, db=3)]
    assert [_state(r) for r in conns] == want
    after = [_ttls(r) for r in conns]
    took = (time.monotonic() - read_at) * 1000 + 2  # between the two reads, and rounding
    for ttl, left in zip(ttls, after, strict=True):
        assert ttl.keys() == left.keys()
        for key, ms in left.items():
            assert ms == ttl[key] == -1 or ttl[key] - took <= ms <= ttl[key], (key, ttl, ms)
    for r in conns:
        r.close()


def test_a_rewrite_in_a_child_writes_one_record_per_string_with_a_ttl(tmp_path: Path) -> None:
    """The child's file, as the daemon's own compaction writes it, replayed."""
    dbs, log = _fresh(tmp_path)
    later = int(time.time() * 1000) + HOUR * 1000
    for i in range(100):
        dbs.dbs[0].set_string(b"s%d" % i, b"v%d" % i, later + i, keep_ttl=False)
    dbs.dbs[2].set_string(b"s", b"two", later, keep_ttl=False)
    dbs.dbs[2].push(b"l", [b"a"], left=False)
    dbs.dbs[2].set_expire(b"l", later)
    log.rewrite_in_background()
    wait_for(lambda: (log.flush(), not log._log.replacing)[1], 30, "the rewrite's child")
    log.close()
    written = _records(tmp_path)
    assert [rec for rec in written if rec[0] in (b"SET", b"PEXPIREAT")] == [
        (b"PEXPIREAT", b"l", b"%d" % later)
    ]
    assert sum(rec[0] == b"SETPX" for rec in written) == 101
    again, log2 = _fresh(tmp_path)
    for ks, ks2 in zip(dbs.dbs, again.dbs, strict=True):
        assert ks2.expires == ks.expires and ks2.data.keys() == ks.data.keys()
    assert again.dbs[0].data[b"s7"] == b"v7" and again.dbs[2].expires[b"s"] == later
    log2.close()
