"""Databases 0-15 in the log: each change lands in its own database after a replay, a
compaction and a replay again, and a log of database 0 alone has no SELECT record (the same
bytes as before databases existed). Against a daemon: a clean stop and a kill -9 keep every
database, keys expire in theirs."""

from __future__ import annotations

from pathlib import Path

from nsqd.resp.databases import Databases
from nsqd.storage import records as record_log
from nsqd.storage.resp_log import FILE, RespLog, decode

from .helpers import client, wait_for


def fresh(path: Path) -> tuple[Databases, RespLog]:
    dbs = Databases()
    log = RespLog(str(path), sync_every=1, sync_timeout=1.0, sync_due=lambda: None)
    log.load(dbs)  # type: ignore[arg-type]  (the log sees the 16 as one keyspace)
    return dbs, log


def state(dbs: Databases) -> list[dict]:
    return [
        {k: (list(v) if not isinstance(v, bytes | dict) else v) for k, v in ks.data.items()}
        for ks in dbs.dbs
    ]


def records(path: Path) -> list[tuple[bytes, ...]]:
    scan = record_log.read((path / FILE).read_bytes(), FILE)
    return [decode(p) for p in scan.payloads]


def test_replay_and_compaction_keep_each_database(tmp_path: Path) -> None:
    dbs, log = fresh(tmp_path)
    dbs.dbs[0].push(b"q", [b"a"], left=False)
    dbs.dbs[3].push(b"q", [b"b", b"c"], left=False)
    dbs.dbs[3].set_string(b"s", b"three", 99_999_999_999_999, keep_ttl=False)
    dbs.dbs[15].hset(b"h", [b"f", b"v"])
    dbs.dbs[3].pop(b"q", 1, left=True)
    log.close()
    want = state(dbs)
    assert want[0] == {b"q": [b"a"]} and want[3] == {b"q": [b"c"], b"s": b"three"}
    # the log ended in database 3: what comes after the restart is about database 0 again
    again, log2 = fresh(tmp_path)
    assert state(again) == want
    again.dbs[0].push(b"q", [b"z"], left=False)
    log2.close()
    want[0] = {b"q": [b"a", b"z"]}
    third, log3 = fresh(tmp_path)
    assert state(third) == want and third.dbs[3].expires == {b"s": 99_999_999_999_999}
    log3.rewrite()
    third.dbs[7].push(b"late", [b"x"], left=True)
    third.dbs[0].push(b"q", [b"y"], left=False)
    log3.close()
    want[7] = {b"late": [b"x"]}
    want[0] = {b"q": [b"a", b"z", b"y"]}
    fourth, log4 = fresh(tmp_path)
    assert state(fourth) == want
    log4.close()


def test_a_rewrite_in_a_child_keeps_each_database(tmp_path: Path) -> None:
    """The child's snapshot ends in database 0 while the log it replaces may end elsewhere:
    what is written meanwhile lands in its own database in both files."""
    dbs, log = fresh(tmp_path)
    dbs.dbs[0].push(b"q", [b"a"], left=False)
    dbs.dbs[3].push(b"q", [b"b"], left=False)  # the log's last record is about database 3
    log.rewrite_in_background()
    dbs.dbs[3].push(b"q", [b"d"], left=False)  # before the swap, so in the copied tail
    dbs.dbs[0].push(b"q", [b"c"], left=False)
    log.flush()
    want = state(dbs)
    assert want[0] == {b"q": [b"a", b"c"]} and want[3] == {b"q": [b"b", b"d"]}
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / FILE).write_bytes((tmp_path / FILE).read_bytes())
    old, log_old = fresh(copy)  # the file before the swap (a crash now) holds it all
    assert state(old) == want
    log_old.close()
    wait_for(lambda: (log.flush(), not log._log.replacing)[1], 30, "the rewrite's child")
    dbs.dbs[0].push(b"q", [b"e"], left=False)
    log.close()
    want[0] = {b"q": [b"a", b"c", b"e"]}
    assert records(tmp_path)[:2] == [(b"RPUSH", b"q", b"a"), (b"SELECT", b"3")]
    again, log2 = fresh(tmp_path)
    assert state(again) == want
    log2.close()


def test_database_zero_alone_logs_no_select(tmp_path: Path) -> None:
    dbs, log = fresh(tmp_path)
    dbs.dbs[0].push(b"q", [b"a"], left=False)
    dbs.dbs[0].set_string(b"k", b"v", None, keep_ttl=False)
    log.close()
    assert records(tmp_path) == [(b"RPUSH", b"q", b"a"), (b"SET", b"k", b"v")]


def test_daemon_keeps_databases_across_restarts(ours, tmp_path) -> None:
    data = tmp_path / "d"
    server = ours.start("--sync-every=1", data=data)
    r0, r5 = client(server.port), client(server.port, db=5)
    r0.rpush("jobs", "zero")
    r5.rpush("jobs", "five-a", "five-b")
    r5.set("short", "v", px=200)
    r5.set("long", "v", ex=3600)
    wait_for(lambda: r5.dbsize() == 2, 5, "the key to expire in database 5")
    assert r0.dbsize() == 1
    r0.close()
    r5.close()
    server.kill()
    server = ours.start(data=data)
    r0, r5 = client(server.port), client(server.port, db=5)
    assert r0.lrange("jobs", 0, -1) == [b"zero"] and r0.get("long") is None
    assert r5.lrange("jobs", 0, -1) == [b"five-a", b"five-b"]
    assert 3500 < r5.ttl("long") <= 3600 and r5.exists("short") == 0
    r5.lpop("jobs")
    r0.close()
    r5.close()
    assert server.stop() == 0
    server = ours.start(data=data)
    r5 = client(server.port, db=5)
    assert r5.lrange("jobs", 0, -1) == [b"five-b"]
    info = r5.info("keyspace")
    assert info["db0"]["keys"] == 1 and info["db5"]["keys"] == 2
    r5.close()
