"""resp.log on its own (storage/resp_log.py): replay, compaction (the log stays bounded by
what is stored), a damaged record skipped with a log line, a torn tail cut off, a log in the
framing before records.py read and rewritten."""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

import redis

from nsqd.resp.keyspace import Keyspace
from nsqd.storage import records
from nsqd.storage.resp_log import FILE, RespLog, decode, encode

from .helpers import client, wait_for


def fresh(path: Path) -> tuple[Keyspace, RespLog]:
    ks = Keyspace()
    log = RespLog(str(path), sync_every=1, sync_timeout=1.0, sync_due=lambda: None)
    log.load(ks)
    return ks, log


def state(ks: Keyspace) -> dict:
    return {k: (list(v) if not isinstance(v, bytes | dict) else v) for k, v in ks.data.items()}


def test_replay_rebuilds_the_keyspace(tmp_path: Path) -> None:
    ks, log = fresh(tmp_path)
    ks.push(b"q", [b"a", b"b", b"c"], left=False)
    ks.push(b"q", [b"z"], left=True)
    ks.pop(b"q", 2, left=True)
    ks.set_string(b"s", b"v", 99_999_999_999_999, keep_ttl=False)
    ks.hset(b"h", [b"f", b"1", b"g", b"2"])
    ks.hdel(b"h", [b"f"])
    ks.push(b"r", [b"1", b"2", b"3", b"4"], left=False)
    ks.lrem(b"r", -1, b"4")
    ks.ltrim(b"r", 1, 1)
    log.close()
    again, log2 = fresh(tmp_path)
    assert (
        state(again)
        == state(ks)
        == {b"q": [b"b", b"c"], b"s": b"v", b"h": {b"g": b"2"}, b"r": [b"2"]}
    )
    assert again.expires == {b"s": 99_999_999_999_999}
    log2.close()


def test_replay_of_stream_trims_by_maxlen_and_minid(tmp_path: Path) -> None:
    ks, log = fresh(tmp_path)
    for ms in range(1, 7):
        ks.xadd(b"st", (ms, 0), [b"f", b"%d" % ms])
    ks.trim_stream(b"st", (b"minid", (3, 0), False, 0))  # 1 and 2 go
    ks.xadd(b"st", (7, 0), [b"f", b"7"], (b"maxlen", 4, False, 0))  # 3 goes
    log.close()
    again, log2 = fresh(tmp_path)
    assert again.data[b"st"].ids == ks.data[b"st"].ids == [(4, 0), (5, 0), (6, 0), (7, 0)]
    log2.close()


def test_compaction_keeps_the_log_bounded(tmp_path: Path) -> None:
    ks, log = fresh(tmp_path)
    log.rewrite_min = 64 * 1024
    body = b"x" * 200
    for i in range(5000):  # a queue that never holds more than 10 elements
        ks.push(b"q", [body + b"%d" % i], left=False)
        if len(ks.data[b"q"]) > 10:
            ks.pop(b"q", 1, left=True)
        log.flush()
        while log._log.replacing:  # a compaction's child at work: a producer slower than it
            log.flush()
    size = (tmp_path / FILE).stat().st_size
    assert size < 3 * 64 * 1024, size  # 5000 pushes of 200 bytes would be > 1 MB
    log.close()
    again, log2 = fresh(tmp_path)
    assert list(again.data[b"q"]) == [body + b"%d" % i for i in range(4990, 5000)]
    log2.close()


RECORDS = [(b"RPUSH", b"q", b"a"), (b"RPUSH", b"q", b"b"), (b"RPUSH", b"q", b"c")]


def test_damaged_record_is_skipped_and_torn_tail_cut(tmp_path: Path, caplog) -> None:
    blobs = [records.frame(encode(r)) for r in RECORDS]
    damaged = bytearray(blobs[1])
    damaged[-1] ^= 0xFF  # the payload's last byte: the checksum no longer holds
    path = tmp_path / FILE
    good = records.FILE_MAGIC + blobs[0] + bytes(damaged) + blobs[2]
    path.write_bytes(good + blobs[0][:7])
    with caplog.at_level(logging.ERROR, logger="nsqd"):
        ks, log = fresh(tmp_path)
    assert list(ks.data[b"q"]) == [b"a", b"c"]
    text = caplog.text
    assert "damaged record" in text and "torn or damaged tail" in text
    assert path.stat().st_size == len(good)
    ks.push(b"q", [b"d"], left=False)
    log.close()
    scan = records.read(path.read_bytes(), "test")
    assert scan.damaged == 1 and decode(scan.payloads[-1]) == (b"RPUSH", b"q", b"d")


def test_a_log_in_the_old_framing_is_read_and_rewritten(tmp_path: Path) -> None:
    """[u32 length][u32 crc32 of the payload] little-endian, no header: what resp.log was."""
    old = b"".join(
        len(p).to_bytes(4, "little") + zlib.crc32(p).to_bytes(4, "little") + p
        for p in map(encode, RECORDS)
    )
    path = tmp_path / FILE
    path.write_bytes(old)
    ks, log = fresh(tmp_path)
    assert list(ks.data[b"q"]) == [b"a", b"b", b"c"]
    assert path.read_bytes().startswith(records.FILE_MAGIC)
    log.close()
    again, log2 = fresh(tmp_path)
    assert list(again.data[b"q"]) == [b"a", b"b", b"c"]
    log2.close()


def test_a_daemon_rewrites_in_a_child_and_loses_nothing(ours, tmp_path: Path) -> None:
    """Past 64 MiB resp.log is rewritten by a forked child while clients are served: kill -9
    right after it starts, and again after it finished, and every acknowledged push is
    there; a child's half-written file is removed at the next start."""
    data = tmp_path / "d"
    server = ours.start(data=data)
    big = b"x" * 65536

    def fill(r: redis.Redis, start: int) -> None:
        pipe = r.pipeline(transaction=False)
        for i in range(start, start + 1100):  # 72 MB: past the first rewrite's 64 MiB
            pipe.rpush("q", big + b"%d" % i)
        pipe.execute()

    def log_has(text: str) -> bool:
        return text in server.log_path.read_text(errors="replace")

    r = client(server.port)
    fill(r, 0)
    assert r.rpush("q", b"during") == 1101
    assert log_has("resp.log: rewriting in a child process")
    server.kill()  # the child (its file half written, most likely) dies with the daemon
    server = ours.start(data=data)
    r = client(server.port)
    assert r.llen("q") == 1101 and r.lindex("q", -1) == b"during"
    # asked after an answer: the port accepts (the kernel's backlog) before resp.log is loaded
    # and the child's file removed, and a command is served only after
    assert not list(data.glob("resp.log.tmp-*"))
    assert r.lindex("q", 1099) == big + b"1099"
    fill(r, 1100)  # twice the size it started with (and the pushes below): the next rewrite
    assert r.rpush("q", b"x" * 100_000) == 2202
    # the child runs at nice 19: beside busy processes it took 40-51 s (2 CPU hogs, 2 cores)
    wait_for(lambda: log_has("resp.log: rewritten in a child process"), 180, "the rewrite")
    assert r.rpush("q", b"after") == 2203
    server.kill()
    server = ours.start(data=data)
    r = client(server.port)
    assert r.llen("q") == 2203 and r.lindex("q", -1) == b"after"
    assert r.lindex("q", 2200) == big + b"2199" and r.lindex("q", 1100) == b"during"
    r.close()
