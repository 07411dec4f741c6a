"""--dedupe-window across a kill -9 that lands between a keyed publish's two writes (its
messages to their disk queue's file, its keys to `trio-nsqd.dedupe`): the publisher got no
answer, so it retries, and the retry must be stored exactly once.

strace kills the daemon with SIGKILL at the first write() to the chosen file after its start
(syscall fault injection: the signal is delivered as that call begins, so the call never
runs). The keys are written first and name where their messages end in the queue's file; a
kill at the messages' write leaves a key whose messages are missing, which the next start
forgets. Written after the messages (before this change), a kill at the keys' write left the
messages stored and the key lost, and the retry stored them twice."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
from durability import helpers

from nsqd.storage import records

from .test_policies import call, channel_stats, drain, stats

FLAGS = ("--dedupe-window=60s", "--mem-queue-size=0")  # every message through its disk queue


def killed_at_first_write(path: Path) -> list[str]:
    strace = shutil.which("strace")
    assert strace, "strace is missing: bash scripts/install_strace.sh"
    return [
        strace,
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-P",
        str(path),
        "-e",
        "trace=write",
        "-e",
        "inject=write:signal=SIGKILL:when=1",
    ]


def kill_traced(daemon: helpers.Daemon) -> None:
    """SIGKILL to the daemon strace runs (killed, strace would let it go on untraced)."""
    pid = daemon.proc.pid
    with contextlib.suppress(OSError):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for child in children:
            os.kill(int(child), signal.SIGKILL)
    daemon.proc.wait(10)


def depth(daemon: helpers.Daemon, channel: bool) -> int:
    if channel:
        return channel_stats(daemon, "t", "c")["depth"]
    return stats(daemon)["t"]["depth"]


@pytest.mark.parametrize("mpub", [False, True], ids=["pub", "mpub"])
@pytest.mark.parametrize("channel", [False, True], ids=["topic_queue", "channel_queue"])
@pytest.mark.parametrize("kill_at", ["keys", "messages"])
def test_a_publish_killed_between_its_two_writes_is_stored_once_when_retried(
    data_dir: Path, kill_at: str, channel: bool, mpub: bool
) -> None:
    with helpers.running("ours", data_dir, *FLAGS) as daemon:
        # the topic (and its channel) in nsqd.dat, so that they come back after the kill, and
        # a key kept before it
        assert call(daemon, "POST", "/topic/create?topic=t")[0] == 200
        if channel:
            assert call(daemon, "POST", "/channel/create?topic=t&channel=c")[0] == 200
        assert call(daemon, "POST", "/pub?topic=t&dedupe_key=before", b"before") == (200, "OK")
    queue_file = data_dir / f"{'t:c' if channel else 't'}.diskqueue.000000.dat"
    stored = queue_file.stat().st_size
    target = data_dir / "trio-nsqd.dedupe" if kill_at == "keys" else queue_file

    daemon = helpers.start("ours", data_dir, *FLAGS, wrap=killed_at_first_write(target))
    path, body, n = (
        ("/mpub?topic=t&dedupe_key=batch", b"m0\nm1\nm2", 3)
        if mpub
        else ("/pub?topic=t&dedupe_key=k", b"once", 1)
    )
    with pytest.raises(OSError):  # killed before it answered (the connection reset or closed)
        daemon.request("POST", path, body)
    try:
        assert daemon.proc.wait(10) != 0
    except subprocess.TimeoutExpired:
        kill_traced(daemon)
        pytest.fail(f"not killed at the first write to {target.name}:\n{daemon.log_tail()}")
    # the kill came before the messages reached their file, in both cases (keys first)
    assert queue_file.stat().st_size == stored

    with helpers.running("ours", data_dir, *FLAGS) as daemon:
        assert call(daemon, "POST", path, body) == (200, "OK")  # the retry: stored
        assert call(daemon, "POST", path, body) == (200, "OK")  # again: now a duplicate
        assert call(daemon, "POST", "/pub?topic=t&dedupe_key=before", b"before") == (200, "OK")
        assert depth(daemon, channel) == 1 + n, stats(daemon)
        log = daemon.log_tail()
    if kill_at == "messages":  # its key was on file, naming a position its queue never reached
        assert "forgotten: their messages are not in t" in log, log


def test_a_keyed_publish_whose_queue_write_fails_is_stored_when_retried(data_dir: Path) -> None:
    """The first write() to the queue's file fails (ENOSPC, injected by strace): the publish is
    not acknowledged (its connection closed unanswered, as the reactor closes every publisher
    of a pass whose write failed) and its key is forgotten, in memory and in the file, so the
    retry is stored, and is a duplicate from then on, across a kill -9 too. The key stayed in
    memory before, and the retry was answered OK as a duplicate of a message never stored."""
    with helpers.running("ours", data_dir, *FLAGS) as daemon:
        assert call(daemon, "POST", "/topic/create?topic=t")[0] == 200
    queue_file = data_dir / "t.diskqueue.000000.dat"
    strace = killed_at_first_write(queue_file)
    strace[-1] = "inject=write:error=ENOSPC:when=1"
    daemon = helpers.start("ours", data_dir, *FLAGS, wrap=strace)
    try:
        # on a keep-alive connection's second request: served in the reactor's pass, whose
        # write fails (a connection's first request is its task's, refused at once)
        conn = http.client.HTTPConnection(helpers.HOST, daemon.http_port, timeout=5)
        conn.request("GET", "/ping")
        assert conn.getresponse().read() == b"OK"
        conn.request("POST", "/pub?topic=t&dedupe_key=k", b"once")
        with pytest.raises(OSError):  # closed unanswered
            conn.getresponse()
        conn.close()
        assert call(daemon, "POST", "/pub?topic=t&dedupe_key=k", b"once") == (200, "OK")
        assert call(daemon, "POST", "/pub?topic=t&dedupe_key=k", b"once") == (200, "OK")
        assert stats(daemon)["t"]["depth"] == 1
    finally:
        kill_traced(daemon)
    with helpers.running("ours", data_dir, *FLAGS) as daemon:
        assert call(daemon, "POST", "/pub?topic=t&dedupe_key=k", b"once") == (200, "OK")
        assert stats(daemon)["t"]["depth"] == 1


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_keys_of_messages_read_and_gone_with_their_files_are_kept(
    data_dir: Path, stop: str
) -> None:
    """A key names where its messages ended in their queue's file; once they were read and the
    file removed (small files: two messages each), its queue's files no longer reach that
    file at all, yet the queue moved past it: the key is kept across a stop or a kill -9."""
    flags = (*FLAGS, "--max-bytes-per-file=64")
    daemon = helpers.start("ours", data_dir, *flags)
    for i in range(5):
        assert call(daemon, "POST", f"/pub?topic=r&dedupe_key=k{i}", b"m%d" % i) == (200, "OK")
    assert len(helpers.queue_files(data_dir, "r")) >= 3
    drain(daemon, "r", 5)
    assert helpers.wait_for(lambda: len(helpers.queue_files(data_dir, "r")) <= 1, 5)
    daemon.stop() if stop == "clean" else daemon.kill()
    with helpers.running("ours", data_dir, *flags) as daemon:
        for i in range(5):
            assert call(daemon, "POST", f"/pub?topic=r&dedupe_key=k{i}", b"m%d" % i) == (200, "OK")
        assert stats(daemon)["r"]["message_count"] == 0
        assert "forgotten" not in daemon.log_tail()


def _key_record(topic: str, key: str, ends: list[tuple[str, int, int]]) -> bytes:
    """A key's record as docs/dedupe.md's file format has it (the queue positions its
    messages end at after the topic: the topic length's second bit)."""
    t = topic.encode()
    head = struct.pack(">qH", time.time_ns(), len(t) | (0x4000 if ends else 0)) + t
    if ends:
        head += bytes((len(ends),))
        for name, num, pos in ends:
            head += bytes((len(name),)) + name.encode() + struct.pack(">IQ", num, pos)
    return head + key.encode()


def test_key_records_naming_queue_positions_are_checked_one_by_one(data_dir: Path) -> None:
    """Records written by hand: a key whose queue's file reaches its position is kept, one
    past the file's end is forgotten, one naming a queue with no file at all is forgotten, a
    record without positions is kept, and a record cut short inside its positions (its frame
    intact) is skipped alone with a log line."""
    with helpers.running("ours", data_dir, *FLAGS) as daemon:
        assert call(daemon, "POST", "/pub?topic=p", b"on file") == (200, "OK")
    size = (data_dir / "p.diskqueue.000000.dat").stat().st_size
    cut = _key_record("p", "cut", [("p", 0, size)])
    payloads = [
        _key_record("p", "reached", [("p", 0, size)]),
        _key_record("p", "past", [("p", 0, size + 1)]),
        _key_record("p", "no-file", [("p", 0, size), ("p:gone", 0, 10)]),
        _key_record("p", "plain", []),
        cut[: cut.index(b"p", 12) + 3],
    ]
    (data_dir / "trio-nsqd.dedupe").write_bytes(
        records.FILE_MAGIC + b"".join(map(records.frame, payloads))
    )
    with helpers.running("ours", data_dir, *FLAGS) as daemon:
        for key in ("reached", "past", "no-file", "plain", "cut"):
            assert call(daemon, "POST", f"/pub?topic=p&dedupe_key={key}", b"x") == (200, "OK")
        assert stats(daemon)["p"]["depth"] == 1 + 3  # past, no-file, cut stored
        log = daemon.log_tail()
    assert log.count("forgotten: their messages are not in p.diskqueue up to 0,") == 1, log
    assert "forgotten: their messages are not in p:gone.diskqueue up to 0,10" in log, log
    assert "DEDUPE: malformed record" in log, log


def test_a_mostly_stale_key_file_is_compacted_after_a_write_and_keeps_the_live_keys(
    data_dir: Path,
) -> None:
    """Keys logged past 4x the live ones and 100,000 more: the file is rewritten from memory
    after a publish's write (not while a pass's keys wait to be written), and the live keys
    are in the file after a kill -9, the expired ones not."""
    flags = ("--dedupe-window=1s", "--mem-queue-size=0")
    path = data_dir / "trio-nsqd.dedupe"
    body = b"\n".join(b"m" for _ in range(1000))
    with helpers.running("ours", data_dir, *flags) as daemon:
        conn = http.client.HTTPConnection(helpers.HOST, daemon.http_port, timeout=10)
        largest, offset = 0, 0
        for _ in range(12):  # each round's keys expire before the next
            for _ in range(30):  # each /mpub's first key repeats the last: a list, not a range
                conn.request("POST", f"/mpub?topic=c&dedupe_key=p&dedupe_offset={offset}", body)
                assert conn.getresponse().read() == b"OK"
                offset += 999
            size = path.stat().st_size
            if size < largest:
                break
            largest = size
            time.sleep(1.05)
        else:
            pytest.fail(f"never compacted: {largest} bytes")
        conn.close()
        daemon.kill()
    # a longer window now: what the file holds is live again, what compaction dropped is gone
    daemon = helpers.start("ours", data_dir, "--dedupe-window=60s", "--mem-queue-size=0")
    try:
        last = offset - 1  # the last key of the last /mpub: written after the compaction
        stored = stats(daemon)["c"]["depth"]
        assert call(daemon, "POST", f"/pub?topic=c&dedupe_key=p/{last}", b"m") == (200, "OK")
        assert call(daemon, "POST", "/pub?topic=c&dedupe_key=p/0", b"m") == (200, "OK")
        assert stats(daemon)["c"]["depth"] == stored + 1  # p/0 expired, compacted away
    finally:
        daemon.stop()


@pytest.mark.parametrize("kill_at", ["journal", "keys"])
def test_a_keyed_message_handed_straight_to_a_consumer_is_never_lost_to_a_kill(
    data_dir: Path, kill_at: str
) -> None:
    """--durable-inflight, messages in memory: a keyed publish is handed straight to the
    connected consumer, and the in-flight journal's record is its only copy on disk, so its key
    is written after that record (no queue position names it). A kill at the journal's write:
    nothing of it is on file, and the retry stores it once. A kill at the keys' write (after
    the journal's): the journal gives the message back and the retry stores it again, two
    copies, never none (docs/dedupe.md)."""
    flags = ("--dedupe-window=60s", "--durable-inflight")
    with helpers.running("ours", data_dir, *flags) as daemon:
        assert call(daemon, "POST", "/topic/create?topic=t")[0] == 200
        assert call(daemon, "POST", "/channel/create?topic=t&channel=c")[0] == 200
    target = data_dir / ("t:c.inflight.journal" if kill_at == "journal" else "trio-nsqd.dedupe")
    daemon = helpers.start("ours", data_dir, *flags, wrap=killed_at_first_write(target))
    try:
        with daemon.client() as conn:
            conn.sub("t", "c", rdy=10)
            with pytest.raises(OSError):  # killed before it answered
                daemon.request("POST", "/pub?topic=t&dedupe_key=k", b"once")
        assert daemon.proc.wait(10) != 0
    finally:
        kill_traced(daemon)
    with helpers.running("ours", data_dir, *flags) as daemon:
        assert call(daemon, "POST", "/pub?topic=t&dedupe_key=k", b"once") == (200, "OK")
        with daemon.client() as conn:
            conn.sub("t", "c", rdy=10)
            got = conn.consume(1, quiet=0.5, idle=2.0)
    assert [m.body for m in got] == [b"once"] * (1 if kill_at == "journal" else 2)


@pytest.mark.parametrize("kill_at", ["keys", "messages"])
def test_pipelined_keyed_publishes_killed_in_their_pass_are_each_stored_once(
    data_dir: Path, kill_at: str
) -> None:
    """20 keyed /pub requests pipelined on one connection, served together in the reactor's
    passes (one write per file a pass, each key's record naming where its own message ends),
    killed at the first write to the key file or to the queue file: none was answered, so the
    client sends all 20 again, and each message is stored once."""
    with helpers.running("ours", data_dir, *FLAGS) as daemon:
        assert call(daemon, "POST", "/topic/create?topic=t")[0] == 200
    target = data_dir / ("trio-nsqd.dedupe" if kill_at == "keys" else "t.diskqueue.000000.dat")
    requests = [
        b"POST /pub?topic=t&dedupe_key=k%d HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nbody%02d"
        % (i, i)
        for i in range(20)
    ]
    daemon = helpers.start("ours", data_dir, *FLAGS, wrap=killed_at_first_write(target))
    try:
        with socket.create_connection((helpers.HOST, daemon.http_port), timeout=10) as sock:
            sock.sendall(b"".join(requests))
            answers = b""
            with contextlib.suppress(OSError):
                while chunk := sock.recv(65536):
                    answers += chunk
        assert answers.count(b"200 OK") == 0, answers
        assert daemon.proc.wait(10) != 0
    finally:
        kill_traced(daemon)
    with helpers.running("ours", data_dir, *FLAGS) as daemon:
        for i in range(20):
            path = f"/pub?topic=t&dedupe_key=k{i}"
            assert call(daemon, "POST", path, b"body%02d" % i) == (200, "OK")
        assert stats(daemon)["t"]["depth"] == 20
