"""--dedupe-window (ours): /pub and /mpub with dedupe_key publish nothing twice within the
window, across a clean restart and a kill -9; off by default (keys ignored, as nsqd ignores
unknown parameters, and no file of ours in the data path)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from durability import helpers

from nsqd.storage import records

from .test_policies import call, stats


def count(daemon: helpers.Daemon, topic: str) -> int:
    return stats(daemon)[topic]["message_count"]


def duplicates(daemon: helpers.Daemon) -> dict[str, int]:
    """nsq_topic_duplicates_total of GET /metrics, by topic."""
    _, text = call(daemon, "GET", "/metrics")
    found = re.findall(r'^nsq_topic_duplicates_total\{topic="([^"]*)"\} (\d+)$', text, re.M)
    return {topic: int(n) for topic, n in found}


def test_repeated_keys_are_acknowledged_and_not_stored(data_dir: Path) -> None:
    with helpers.running("ours", data_dir, "--dedupe-window=60s") as daemon:
        for _ in range(3):
            assert call(daemon, "POST", "/pub?topic=d&dedupe_key=job-1", b"one") == (200, "OK")
        assert count(daemon, "d") == 1
        assert call(daemon, "POST", "/mpub?topic=d&dedupe_key=b7", b"a\nb\nc") == (200, "OK")
        assert call(daemon, "POST", "/mpub?topic=d&dedupe_key=b7", b"a\nb\nc\nd\ne") == (200, "OK")
        assert count(daemon, "d") == 1 + 5  # the retry's first three were stored before
        # dedupe_offset: the same rows sent split differently are still the same keys
        call(daemon, "POST", "/mpub?topic=d&dedupe_key=p3&dedupe_offset=0", b"r0\nr1")
        call(daemon, "POST", "/mpub?topic=d&dedupe_key=p3&dedupe_offset=1", b"r1\nr2\nr3")
        assert count(daemon, "d") == 6 + 4
        status, doc = call(daemon, "POST", "/mpub?topic=d&dedupe_key=p3&dedupe_offset=-1", b"x")
        assert (status, doc["message"]) == (400, "INVALID_DEDUPE_OFFSET")
        # keys are per topic; a message without a key is never a duplicate
        assert call(daemon, "POST", "/pub?topic=other&dedupe_key=job-1", b"x") == (200, "OK")
        assert call(daemon, "POST", "/pub?topic=d", b"plain") == (200, "OK")
        assert call(daemon, "POST", "/pub?topic=d", b"plain") == (200, "OK")
        assert count(daemon, "d") == 12 and count(daemon, "other") == 1
        # a deferred publish too
        assert call(daemon, "POST", "/pub?topic=d&defer=10&dedupe_key=late", b"l") == (200, "OK")
        assert call(daemon, "POST", "/pub?topic=d&defer=10&dedupe_key=late", b"l") == (200, "OK")
        assert count(daemon, "d") == 13
        # what was skipped, per topic, in /metrics: 2 /pub, 3 /mpub, 1 by offset, 1 deferred
        assert duplicates(daemon) == {"d": 7, "other": 0}


def test_keys_survive_a_restart_and_a_kill_9(data_dir: Path) -> None:
    # messages on disk (a kill -9 loses what is only in memory, keys or not)
    flags = ("--dedupe-window=60s", "--mem-queue-size=0")
    daemon = helpers.start("ours", data_dir, *flags)
    call(daemon, "POST", "/mpub?topic=d&dedupe_key=q1-b0-p0", b"r0\nr1")
    daemon.stop()
    daemon = helpers.start("ours", data_dir, *flags)
    call(daemon, "POST", "/mpub?topic=d&dedupe_key=q1-b0-p0", b"r0\nr1")  # the retried task
    assert stats(daemon)["d"]["depth"] == 2 and count(daemon, "d") == 0
    call(daemon, "POST", "/pub?topic=d&dedupe_key=q1-b1-p0", b"r2")
    daemon.kill()  # acknowledged: its key was written before the answer
    daemon = helpers.start("ours", data_dir, *flags)
    call(daemon, "POST", "/pub?topic=d&dedupe_key=q1-b1-p0", b"r2")
    call(daemon, "POST", "/mpub?topic=d&dedupe_key=q1-b0-p0", b"r0\nr1")
    assert stats(daemon)["d"]["depth"] == 3, stats(daemon)["d"]
    daemon.stop()


def test_key_ranges_overlap_across_a_restart(data_dir: Path) -> None:
    # an /mpub's keys are kept as one range record; a retry split differently overlaps it
    flags = ("--dedupe-window=60s", "--mem-queue-size=0")
    daemon = helpers.start("ours", data_dir, *flags)
    call(daemon, "POST", "/mpub?topic=r&dedupe_key=q:7:1&dedupe_offset=10", b"a\nb\nc")
    call(daemon, "POST", "/mpub?topic=r&dedupe_key=q:7:1&dedupe_offset=12", b"c\nd")  # c: seen
    daemon.kill()
    daemon = helpers.start("ours", data_dir, *flags)
    call(daemon, "POST", "/mpub?topic=r&dedupe_key=q:7:1&dedupe_offset=9", b"z\na\nb\nc\nd\ne")
    assert stats(daemon)["r"]["depth"] == 6, stats(daemon)["r"]  # a b c d, then z and e
    call(daemon, "POST", "/pub?topic=r&dedupe_key=q:7:1/14", b"e")  # /pub names the same key
    assert stats(daemon)["r"]["depth"] == 6
    daemon.stop()


def test_the_window_ends_and_a_refused_publish_is_not_remembered(data_dir: Path) -> None:
    with helpers.running("ours", data_dir, "--dedupe-window=1s") as daemon:
        call(daemon, "POST", "/pub?topic=w&dedupe_key=k", b"1")
        time.sleep(1.3)
        call(daemon, "POST", "/pub?topic=w&dedupe_key=k", b"2")
        assert count(daemon, "w") == 2
        call(daemon, "POST", "/topic/config?topic=full&max_depth=1")
        call(daemon, "POST", "/pub?topic=full", b"fills it")
        assert call(daemon, "POST", "/pub?topic=full&dedupe_key=r", b"x")[0] == 503
        call(daemon, "POST", "/topic/config?topic=full&max_depth=")
        assert call(daemon, "POST", "/pub?topic=full&dedupe_key=r", b"x") == (200, "OK")
        assert stats(daemon)["full"]["depth"] == 2


def test_a_deleted_topic_s_duplicates_go_with_it(data_dir: Path) -> None:
    """Made again, a topic counts its duplicates from 0, as its other counters: the count was
    kept per topic name for every topic ever made (one entry each under topic churn)."""
    with helpers.running("ours", data_dir, "--dedupe-window=60s") as daemon:
        for _ in range(2):
            assert call(daemon, "POST", "/pub?topic=gone&dedupe_key=k", b"1") == (200, "OK")
        assert duplicates(daemon) == {"gone": 1}
        assert call(daemon, "POST", "/topic/delete?topic=gone")[0] == 200
        assert call(daemon, "POST", "/pub?topic=gone&dedupe_key=k2", b"2") == (200, "OK")
        assert duplicates(daemon) == {"gone": 0}
        # the keys stay to the window's end: a retry after the delete is still one
        assert call(daemon, "POST", "/pub?topic=gone&dedupe_key=k", b"1") == (200, "OK")
        assert count(daemon, "gone") == 1 and duplicates(daemon) == {"gone": 1}


def test_off_by_default(data_dir: Path) -> None:
    with helpers.running("ours", data_dir) as daemon:
        for _ in range(2):
            assert call(daemon, "POST", "/pub?topic=o&dedupe_key=k", b"1") == (200, "OK")
        assert count(daemon, "o") == 2
        assert "nsq_topic_duplicates_total" not in call(daemon, "GET", "/metrics")[1]
    assert not (data_dir / "trio-nsqd.dedupe").exists()


def test_damaged_key_file_is_skipped(data_dir: Path) -> None:
    (data_dir / "trio-nsqd.dedupe").write_bytes(b"\x00\x00\x00\x20garbage")
    with helpers.running("ours", data_dir, "--dedupe-window=60s") as daemon:
        assert call(daemon, "GET", "/ping") == (200, "OK")
        call(daemon, "POST", "/pub?topic=z&dedupe_key=k", b"1")
        assert count(daemon, "z") == 1
    assert "DEDUPE: " in daemon.log_path.read_text()


def test_a_damaged_key_record_forgets_only_its_key(data_dir: Path) -> None:
    """One flipped byte in the length of one key's record (after a kill -9): that key alone is
    forgotten, the keys written after it are still duplicates."""
    flags = ("--dedupe-window=60s",)
    daemon = helpers.start("ours", data_dir, *flags)
    for i in range(5):
        assert call(daemon, "POST", f"/pub?topic=k&dedupe_key=key-{i}", b"x") == (200, "OK")
    daemon.kill()
    path = data_dir / "trio-nsqd.dedupe"
    data = bytearray(path.read_bytes())
    pos = len(records.FILE_MAGIC)
    for _ in range(2):  # on to the third record
        pos += records.HEAD_SIZE + int.from_bytes(data[pos + 2 : pos + 6], "big")
    data[pos + 5] ^= 0x20  # the low byte of its length
    path.write_bytes(bytes(data))
    with helpers.running("ours", data_dir, *flags) as daemon2:
        for i in range(5):
            call(daemon2, "POST", f"/pub?topic=k&dedupe_key=key-{i}", b"again")
        assert count(daemon2, "k") == 1  # key-2 only
        assert duplicates(daemon2) == {"k": 4}
    assert "DEDUPE: damaged record(s)" in daemon2.log_path.read_text()


def _writes(pid: int) -> int:
    """The write() calls the process made so far (/proc/<pid>/io syscw)."""
    with open(f"/proc/{pid}/io") as f:
        return int(dict(line.split(": ") for line in f.read().splitlines())["syscw"])


def test_publishes_of_one_pass_share_one_write_of_records_and_keys(data_dir: Path) -> None:
    """50 keyed /pub requests pipelined on one keep-alive connection are served in one pass
    of the reactor: their messages (each one through the disk queue: --mem-queue-size=0) and
    their keys are written with one write() per file, and they are answered after it (one
    write): a kill -9 right after the answers loses none of them. Each publish wrote its record
    and its key alone before (100 writes)."""
    import socket

    flags = ("--dedupe-window=60s", "--mem-queue-size=0")
    daemon = helpers.start("ours", data_dir, *flags)
    call(daemon, "POST", "/pub?topic=g&dedupe_key=first", b"x")  # the topic, its files
    deadline = time.monotonic() + 10  # in nsqd.dat, so that it comes back after the kill
    while b'"g"' not in (data_dir / "nsqd.dat").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)
    requests = b"".join(
        b"POST /pub?topic=g&dedupe_key=k%d HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nbody%02d"
        % (i, i)
        for i in range(50)
    )
    with socket.create_connection((helpers.HOST, daemon.http_port), timeout=10) as sock:
        before = _writes(daemon.proc.pid)
        sock.sendall(requests)
        answers = b""
        while answers.count(b"HTTP/1.1 200 OK") < 50:
            chunk = sock.recv(65536)
            assert chunk, answers
            answers += chunk
        writes = _writes(daemon.proc.pid) - before
    # the pass's two files and its answers, plus a wake-up or an fsync's on a busy machine
    assert writes <= 12, writes
    daemon.kill()
    daemon = helpers.start("ours", data_dir, *flags)
    assert stats(daemon)["g"]["depth"] == 51
    for i in range(50):  # every key was kept: publishing again stores nothing
        call(daemon, "POST", f"/pub?topic=g&dedupe_key=k{i}", b"again")
    assert stats(daemon)["g"]["depth"] == 51
    daemon.stop()
