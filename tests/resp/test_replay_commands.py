"""The records issue 29's commands write (LINSERT, ZADD, ZREM, SADD, SREM, RENAME, and the
counters' SET-keeping-TTL) replay to the same keyspace, before and after a compaction; a sorted set
expires without an expiry event (the seed's frames are for strings and hashes)."""

from __future__ import annotations

from pathlib import Path

from nsqd.resp.databases import Databases
from nsqd.resp.persist import RespLog
from nsqd.resp.zset import ZSet

from .helpers import client, consume, wait_for


def fresh(path: Path) -> tuple[Databases, RespLog]:
    dbs = Databases()
    log = RespLog(str(path), sync_every=1, sync_timeout=1.0)
    log.load(dbs)  # type: ignore[arg-type]
    return dbs, log


def state(dbs: Databases) -> dict:
    out = {}
    for i, ks in enumerate(dbs.dbs):
        for k, v in ks.data.items():
            if isinstance(v, set):
                v = sorted(v)
            elif isinstance(v, ZSet):
                v = list(v.order)
            elif not isinstance(v, bytes | dict):
                v = list(v)
            out[(i, k)] = (v, ks.expires.get(k))
    return out


def test_new_records_replay_and_compact(tmp_path: Path) -> None:
    dbs, log = fresh(tmp_path)
    ks = dbs.dbs[2]
    ks.push(b"l", [b"a", b"c"], left=False)
    ks.linsert(b"l", 1, b"b")
    ks.zadd(b"z", [(1.5, b"m1"), (float("-inf"), b"low"), (0.1, b"m2")])
    ks.zadd(b"z", [(3.0, b"m1")])
    ks.zrem(b"z", [b"m2", b"none"])
    ks.set_string(b"t", b"v", 99_999_999_999_999, keep_ttl=False)
    ks.rename(b"t", b"t2")
    ks.set_string(b"t2", b"11", None, keep_ttl=True)
    ks.sadd(b"set", [b"a", b"b", b"c"])
    ks.srem(b"set", [b"b", b"zz"])
    ks.zadd(b"gone", [(1.0, b"x")])
    ks.zrem(b"gone", [b"x"])
    log.close()
    want = state(dbs)
    assert want == {
        (2, b"l"): ([b"a", b"b", b"c"], None),
        (2, b"z"): ([(float("-inf"), b"low"), (3.0, b"m1")], None),
        (2, b"t2"): (b"11", 99_999_999_999_999),
        (2, b"set"): ([b"a", b"c"], None),
    }
    again, log2 = fresh(tmp_path)
    assert state(again) == want
    log2.rewrite()
    log2.close()
    third, log3 = fresh(tmp_path)
    assert state(third) == want
    log3.close()


def test_sorted_set_expires_silently(ours) -> None:
    server = ours.start("--resp-expiry-topic=expired")
    r = client(server.port)
    r.zadd("reaper", {"job-1": 1.0})
    r.pexpire("reaper", 100)
    r.set("marker", "v", px=150)
    wait_for(lambda: r.dbsize() == 0, 5, "both keys to expire")
    bodies = consume(server.tcp_port, "expired", "c", 1)
    assert len(bodies) == 1 and b"marker" in bodies[0]
    r.close()
