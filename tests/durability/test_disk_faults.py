"""Disk faults while the daemon runs, ours beside the Go nsqd: a file that cannot be written
costs what it must and no more (the clean stop still writes every queue, ...)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import helpers
from .helpers import nsqd_process


def test_a_clean_stop_writes_the_queues_when_nsqd_dat_cannot_be_written(
    kind: str, data_dir: Path
) -> None:
    """nsqd.dat turned into a directory under the running daemon: its write at the stop fails
    (logged, as nsqd's "failed to persist metadata"), and the messages held in memory still go
    to the disk queue and come back after a restart, as with nsqd; the exit is clean."""
    topic = "datdir"
    bodies = [b"in-memory-%03d" % i for i in range(50)]
    daemon = helpers.start(kind, data_dir)
    with daemon.client() as conn:
        conn.sub(topic, "ch", rdy=0)
    with daemon.client() as conn:
        for body in bodies:
            conn.pub(topic, body)
    assert helpers.wait_for((data_dir / "nsqd.dat").is_file, 5)
    (data_dir / "nsqd.dat").unlink()
    (data_dir / "nsqd.dat").mkdir()
    rc, _ = daemon.terminate()
    assert rc == 0, daemon.log_tail()
    assert "failed to persist metadata" in daemon.log()
    (data_dir / "nsqd.dat").rmdir()
    with helpers.running(kind, data_dir) as again, again.client() as conn:
        conn.sub(topic, "ch", rdy=100)
        got = conn.consume(len(bodies), timeout=5, quiet=0.2, idle=2)
    assert sorted(helpers.bodies(got)) == bodies


def limit_file_size(daemon: helpers.Daemon, size: int | str) -> None:
    """Files of the daemon cannot grow past `size` from now on (EFBIG, a stand-in for a full
    disk set from outside with prlimit; its log must stay below it too)."""
    limit = f"--fsize={size}:unlimited"
    subprocess.run(["prlimit", f"--pid={daemon.proc.pid}", limit], check=True, timeout=10)


def test_a_journal_write_failing_when_deferred_messages_fall_due_keeps_the_daemon_up(
    data_dir: Path,
) -> None:
    """--durable-inflight: deferred messages fall due while their journal cannot grow. Each
    delivery's journal record fails: logged, /ping NOK, the messages delivered all the same
    (the scanner's hand-out raised the OSError and the daemon exited 1)."""
    daemon = helpers.start("ours", data_dir, "--durable-inflight")
    with daemon.client() as conn:
        conn.sub("due", "ch", rdy=10)
        for _ in range(3):  # bodies big enough that the journal outgrows the daemon's log
            assert daemon.request("POST", "/pub?topic=due&defer=2500", b"d" * 4000)[0] == 200
        journal = data_dir / "due:ch.inflight.journal"
        assert helpers.wait_for(lambda: journal.stat().st_size > 12_000, 5)
        limit_file_size(daemon, journal.stat().st_size)
        got = [conn.message(timeout=8) for _ in range(3)]
        assert [len(m.body) for m in got] == [4000] * 3
        status, health = daemon.request("GET", "/ping")
        assert daemon.alive()
        assert (status, health[:33]) == (500, b"NOK - journal due:ch write failed"), health
        limit_file_size(daemon, "unlimited")
        conn.fin_many(m.id for m in got)
        conn.barrier()
        conn.pub("due", b"after")  # its delivery's journal record is written again
        assert conn.message().body == b"after"
        assert daemon.request("GET", "/ping") == (200, b"OK")  # healthy again, as nsqd
    assert "JOURNAL(due:ch): write failed" in daemon.log()
    daemon.stop()


def test_a_timed_out_message_its_queue_cannot_take_is_kept_and_delivered_later(
    data_dir: Path,
) -> None:
    """--mem-queue-size=0: a message times out while its channel's queue file cannot grow.
    It waits in memory (logged, /ping NOK) and is delivered again once the disk takes writes;
    the scanner's requeue raised the write's failure and the daemon exited 1 (nsqd drops the
    message and goes on)."""
    daemon = helpers.start("ours", data_dir, "--mem-queue-size=0")
    with daemon.client() as conn, daemon.client() as publisher:
        conn.identify(msg_timeout=2000)
        conn.sub("late", "ch", rdy=1)
        publisher.pub("late", b"t" * 20_000)
        first = conn.message()
        queue = helpers.queue_files(data_dir, "late:ch")[-1]
        limit_file_size(daemon, queue.stat().st_size)
        assert helpers.wait_for(lambda: "not requeued" in daemon.log(), 8), daemon.log_tail()
        status, health = daemon.request("GET", "/ping")
        assert daemon.alive()
        assert (status, health[:4]) == (500, b"NOK "), health
        limit_file_size(daemon, "unlimited")
        again = conn.message(timeout=5)
    assert (again.id, again.attempts) == (first.id, 2)
    daemon.stop()


def test_a_req_its_queue_cannot_take_leaves_the_daemon_and_the_consumer_up(
    data_dir: Path,
) -> None:
    """--mem-queue-size=0: a REQ whose record cannot be written (EFBIG) is answered
    E_REQ_FAILED, not fatal, as nsqd answers a requeue its disk refused (logged, /ping NOK;
    the message is lost, as nsqd loses it): the pass refused the consumer as a publisher,
    found no error for a REQ, and the reactor's KeyError stopped the daemon."""
    daemon = helpers.start("ours", data_dir, "--mem-queue-size=0")
    with daemon.client() as conn, daemon.client() as publisher:
        conn.sub("req", "ch", rdy=1)
        publisher.pub("req", b"r" * 20_000)
        msg = conn.message()
        queue = helpers.queue_files(data_dir, "req:ch")[-1]
        limit_file_size(daemon, queue.stat().st_size)
        conn.req(msg.id)
        error = conn.expect_error()
        assert error.startswith(f"E_REQ_FAILED REQ {msg.id.decode()} failed "), error
        conn.barrier()  # the connection still serves
        status, health = daemon.request("GET", "/ping")
        assert (status, health[:4]) == (500, b"NOK "), health
        limit_file_size(daemon, "unlimited")
        publisher.pub("req", b"next")
        assert conn.message(timeout=5).body == b"next"
    assert daemon.alive()
    daemon.stop()


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("t:ch.inflight.journal", "JOURNAL(t:ch)"),
        ("trio-nsqd.dedupe", "DEDUPE"),
        ("trio-nsqd.attributes", "ATTRIBUTES"),
        ("t:ch.diskqueue.ttl", "DISKQUEUE("),
    ],
)
def test_the_daemon_starts_when_a_file_of_ours_cannot_be_read(
    data_dir: Path, name: str, what: str
) -> None:
    """A directory where a file of ours is expected (as an unreadable file): the start logs it
    and goes on without its records, as for a damaged one; it refused to start (exit 1)."""
    flags = ("--durable-inflight", "--dedupe-window=1m", "--mem-queue-size=0")
    with helpers.running("ours", data_dir, *flags) as daemon, daemon.client() as conn:
        conn.sub("t", "ch", rdy=0)
    (data_dir / name).unlink(missing_ok=True)
    (data_dir / name).mkdir()
    with helpers.running("ours", data_dir, *flags) as daemon, daemon.client() as conn:
        conn.pub("t", b"served")
        conn.sub("t", "ch", rdy=1)
        assert conn.message().body == b"served"
    assert f"{what}" in daemon.log() and "cannot read" in daemon.log(), daemon.log_tail()


def test_a_dedupe_key_that_cannot_be_written_refuses_the_publish_as_a_store_failure(
    data_dir: Path,
) -> None:
    """--dedupe-window: the keys file cannot be written (a directory in its place). A /pub
    with a dedupe_key is refused as nsqd refuses a failed put (503 EXITING) and /ping turns
    NOK; it was a 500 INTERNAL_ERROR with /ping OK."""
    (data_dir / "trio-nsqd.dedupe").mkdir()
    with helpers.running("ours", data_dir, "--dedupe-window=1m") as daemon:
        status, body = daemon.request("POST", "/pub?topic=keys&dedupe_key=k1", b"once")
        assert (status, body) == (503, b'{"message":"EXITING"}')
        status, health = daemon.request("GET", "/ping")
        assert (status, health[:31]) == (500, b"NOK - dedupe keys write failed "), health


def test_a_ttl_that_cannot_be_written_keeps_the_message_and_its_ttl_for_the_run(
    data_dir: Path,
) -> None:
    """--mem-queue-size=0: a /pub?ttl= whose TTL record cannot be written (a directory in its
    file's place): the message is in its queue, so it is answered 200 and delivered, the TTL
    kept in memory, the failure logged and /ping NOK (a 500 INTERNAL_ERROR, whose retry
    stored the message twice; from a requeue it went up into the scanner)."""
    with helpers.running("ours", data_dir, "--mem-queue-size=0") as daemon:
        with daemon.client() as conn:
            conn.sub("ttl", "ch", rdy=0)
        (data_dir / "ttl:ch.diskqueue.ttl").mkdir()
        assert daemon.request("POST", "/pub?topic=ttl&ttl=60000", b"short-lived")[0] == 200
        status, health = daemon.request("GET", "/ping")
        assert (status, health[:4]) == (500, b"NOK "), health
        with daemon.client() as conn:
            conn.sub("ttl", "ch", rdy=1)
            assert conn.message().body == b"short-lived"
            conn.barrier()
    assert "TTL write failed" in daemon.log()


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted on `path` (root only; unmounted after the block)."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, timeout=10)


@contextlib.contextmanager
def failing_fsync_disk(path: Path) -> Iterator[Path]:
    """An ext4 (no journal, errors=continue) of 32 MB mounted on `path` from a loop device
    whose image lies on a tmpfs of 8 MB (root only): once that tmpfs is full (`fill_up` of
    the path yielded), write() on `path` still succeeds into the page cache while the fsync
    that must write it back fails, ENOSPC from the loop device: a real failing fsync, where
    no device-mapper is at hand. Unmounted and detached after the block."""
    backing = path.parent / f"{path.name}-backing"
    backing.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(backing)], check=True)
    image = backing / "disk.img"
    try:
        image.touch()
        os.truncate(image, 32 << 20)  # sparse: its blocks are taken as the ext4 writes them
        mkfs = ["mkfs.ext4", "-q", "-O", "^has_journal", str(image)]
        subprocess.run(mkfs, check=True, timeout=30)
        loop = subprocess.run(
            ["losetup", "-f", "--show", str(image)], check=True, capture_output=True, text=True
        ).stdout.strip()
        try:
            subprocess.run(["mount", "-o", "errors=continue", loop, str(path)], check=True)
            try:
                yield backing
            finally:
                subprocess.run(["umount", "-l", str(path)], check=False, timeout=10)
        finally:
            subprocess.run(["losetup", "-d", loop], check=False, timeout=10)
    finally:
        subprocess.run(["umount", "-l", str(backing)], check=False, timeout=10)


def fill_up(path: Path, leave: int) -> None:
    """Fill the file system of `path` until `leave` bytes are free."""
    st = os.statvfs(path)
    with open(path / "filler", "wb") as f, contextlib.suppress(OSError):
        f.write(b"\0" * max(st.f_bavail * st.f_frsize - leave, 0))


def test_the_daemon_starts_when_a_journal_cannot_be_compacted_on_a_nearly_full_disk(
    data_dir: Path,
) -> None:
    """--durable-inflight: 400 KB of deferred messages in a journal, 50 KB free at the next
    start: the start's compaction of the journal cannot be written, which is logged (/ping
    NOK), and the daemon starts with the messages, appending to the file as it is (the start
    exited 1, where nsqd.dat alone would have fitted)."""
    with small_disk(data_dir, "2m"):
        with helpers.running("ours", data_dir, "--durable-inflight") as daemon:
            with daemon.client() as conn:
                conn.sub("big", "ch", rdy=0)
            for i in range(4):
                body = b"%d" % i + b"d" * 100_000
                assert daemon.request("POST", "/pub?topic=big&defer=3600000", body)[0] == 200
        fill_up(data_dir, 50_000)
        with helpers.running("ours", data_dir, "--durable-inflight") as daemon:
            stats = json.loads(daemon.request("GET", "/stats?format=json&topic=big")[1])
            assert stats["topics"][0]["channels"][0]["deferred_count"] == 4
            assert stats["health"].startswith("NOK - journal big:ch write failed"), stats
            assert "JOURNAL(big:ch): write failed" in daemon.log()


def resp_command(sock: socket.socket, *args: bytes) -> bytes:
    """One Redis command (RESP2) and the first line of its reply."""
    sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
    reply = b""
    while not reply.endswith(b"\r\n"):
        reply += sock.recv(1)
    return reply


def test_keys_expiring_while_resp_log_cannot_grow_leave_the_daemon_up(data_dir: Path) -> None:
    """--resp-address: keys expire while resp.log cannot grow. The expiry pass's failed write
    is logged and turns /ping NOK, as a command's does; it ended the expiry task and the
    daemon (exit 1) before the clean stop, and the messages held in memory were lost."""
    port = nsqd_process.free_ports(1)[0]
    daemon = helpers.start("ours", data_dir, f"--resp-address={helpers.HOST}:{port}")
    with socket.create_connection((helpers.HOST, port), timeout=5) as sock:
        assert resp_command(sock, b"SET", b"big", b"v" * 30_000) == b"+OK\r\n"
        for i in range(5):
            assert resp_command(sock, b"SET", b"k%d" % i, b"x", b"PX", b"1500") == b"+OK\r\n"
    bodies = [b"in-memory-%d" % i for i in range(20)]
    with daemon.client() as conn:
        conn.sub("kept", "ch", rdy=0)
        for body in bodies:
            conn.pub("kept", body)
    limit_file_size(daemon, (data_dir / "resp.log").stat().st_size)
    assert helpers.wait_for(lambda: "RESP: Error writing to resp.log" in daemon.log(), 8)
    status, health = daemon.request("GET", "/ping")
    assert (status, health[:28]) == (500, b"NOK - resp.log write failed "), health
    limit_file_size(daemon, "unlimited")
    with socket.create_connection((helpers.HOST, port), timeout=5) as sock:
        # refused (-MISCONF, as Redis after a failed AOF write) until the kept records are
        # written again, about a second later (test_resp_misconf.py)
        ok = lambda: resp_command(sock, b"SET", b"later", b"y") == b"+OK\r\n"  # noqa: E731
        assert helpers.wait_for(ok, 5, interval=0.1)
    assert daemon.request("GET", "/ping") == (200, b"OK")  # a good write: healthy again
    daemon.stop()
    with helpers.running("ours", data_dir) as again, again.client() as conn:
        conn.sub("kept", "ch", rdy=100)
        got = conn.consume(len(bodies), timeout=5, quiet=0.2, idle=2)
    assert sorted(helpers.bodies(got)) == sorted(bodies)


def test_a_topic_backlog_pumped_into_a_channel_that_cannot_grow_leaves_the_daemon_up(
    kind: str, data_dir: Path
) -> None:
    """--mem-queue-size=0: a topic's backlog on disk, then its first channel, whose queue file
    cannot take half of it (EFBIG). The daemon stays up, /ping NOK, and serves what comes next
    (the pump's task raised the write's failure and the daemon exited 1). nsqd loses what the
    channel cannot take; ours keeps it in memory and offers it to the queue again each second,
    so once the file can grow every message arrives, once (dropped, about half was lost)."""
    daemon = helpers.start(kind, data_dir, "--mem-queue-size=0")
    bodies = [b"backlog-%03d-" % i + b"b" * 200 for i in range(400)]
    with daemon.client() as conn:
        conn.mpub("pump", bodies)
    backlog = helpers.queue_files(data_dir, "pump")[-1]
    limit_file_size(daemon, backlog.stat().st_size // 2)
    with daemon.client() as conn:
        conn.sub("pump", "ch", rdy=0)
        assert helpers.wait_for(lambda: daemon.request("GET", "/ping")[0] == 500, 5)
        assert daemon.alive()
        limit_file_size(daemon, "unlimited")
        conn.pub("pump", b"next")
        conn.rdy(500)
        got = conn.consume(401 if kind == "ours" else 201, timeout=8, quiet=0.3, idle=2.5)
    assert b"next" in helpers.bodies(got)
    if kind == "reference":
        assert 100 < len(got) < 400, len(got)  # about half reached the channel's file
    else:
        assert sorted(helpers.bodies(got)) == sorted([*bodies, b"next"]), len(got)
    daemon.stop()


def test_a_topic_backlog_refused_by_one_channels_disk_reaches_each_channel_once(
    data_dir: Path,
) -> None:
    """--mem-queue-size=0: a paused topic's backlog pumped, at the unpause, into two channels,
    one of whose queue files cannot be created (a directory in its place). That channel keeps
    the refused backlog in memory and, once its file can be made, queues it: each channel's
    consumer gets every message, once; the other channel, whose write went through, gets no
    second copy (the refused channel had lost all of them)."""
    daemon = helpers.start("ours", data_dir, "--mem-queue-size=0")
    bodies = [b"two-%03d" % i for i in range(200)]
    with daemon.client() as conn:
        conn.mpub("two", bodies)
    assert daemon.request("POST", "/topic/pause?topic=two")[0] == 200
    blocked = data_dir / "two:bad.diskqueue.000000.dat"
    with daemon.client() as good, daemon.client() as bad:
        good.sub("two", "good", rdy=0)
        bad.sub("two", "bad", rdy=0)
        blocked.mkdir()  # its queue opens its file at its first write
        assert daemon.request("POST", "/topic/unpause?topic=two")[0] == 200
        assert helpers.wait_for(lambda: daemon.request("GET", "/ping")[0] == 500, 5)
        blocked.rmdir()
        good.rdy(500)
        bad.rdy(500)
        got_good = good.consume(len(bodies), timeout=8, quiet=0.3, idle=2.5)
        got_bad = bad.consume(len(bodies), timeout=8, quiet=0.3, idle=2.5)
    assert sorted(helpers.bodies(got_good)) == bodies, len(got_good)
    assert sorted(helpers.bodies(got_bad)) == bodies, len(got_bad)
    assert "messages of the topic's backlog not queued, kept in memory" in daemon.log()
    daemon.stop()


def _channel_lines(daemon: helpers.Daemon, channel: str) -> list[str]:
    return [line for line in daemon.log().splitlines() if f"CHANNEL({channel}):" in line]


def test_a_refused_backlog_kept_in_memory_logs_a_line_a_retry_round_not_a_message(
    data_dir: Path,
) -> None:
    """--mem-queue-size=0: a topic's backlog of 200 pumped into a channel whose queue file
    cannot be created (a directory in its place) waits in memory, offered to the queue again
    each second. Over ~3 s the channel's log has the first refusal and a line a retry round
    ("N messages kept in memory, disk refused"), then one line when the disk takes them; each
    round logged every message again (~200 lines a second)."""
    daemon = helpers.start("ours", data_dir, "--mem-queue-size=0")
    bodies = [b"noisy-%03d" % i for i in range(200)]
    with daemon.client() as conn:
        conn.mpub("noisy", bodies)
    assert daemon.request("POST", "/topic/pause?topic=noisy")[0] == 200
    blocked = data_dir / "noisy:ch.diskqueue.000000.dat"
    with daemon.client() as conn:
        conn.sub("noisy", "ch", rdy=0)
        blocked.mkdir()  # its queue opens its file at its first write
        assert daemon.request("POST", "/topic/unpause?topic=noisy")[0] == 200  # the pump
        assert helpers.wait_for(lambda: _channel_lines(daemon, "noisy:ch"), 5)
        helpers.sleep(3.3)  # three retry rounds
        lines = _channel_lines(daemon, "noisy:ch")
        assert 3 <= len(lines) <= 6, (len(lines), lines[:8])
        assert "200 messages kept in memory, disk refused: " in lines[-1], lines
        blocked.rmdir()
        taken = "the disk takes messages again, 200 queued"
        assert helpers.wait_for(lambda: taken in daemon.log(), 3), daemon.log_tail()
        conn.rdy(500)
        got = conn.consume(len(bodies), timeout=8, quiet=0.3, idle=2.5)
        assert sorted(helpers.bodies(got)) == bodies, len(got)
        assert sum(taken in line for line in _channel_lines(daemon, "noisy:ch")) == 1
    daemon.stop()


def test_deferred_messages_pumped_into_a_channel_whose_journal_fails_leave_the_daemon_up(
    data_dir: Path,
) -> None:
    """--durable-inflight: DPUBs wait in a topic without channels; its first channel's journal
    cannot be written (a directory in its place). The pump's deferral is logged, the daemon
    stays up and the channel serves (the journal's StoreError ended the pump's task and the
    daemon, exit 1)."""
    daemon = helpers.start("ours", data_dir, "--durable-inflight")
    with daemon.client() as conn:
        for i in range(3):
            conn.send(helpers.command("DPUB later 600000", b"deferred-%d" % i))
            conn.expect_ok()
    (data_dir / "later:ch.inflight.journal").mkdir()
    with daemon.client() as conn:
        conn.sub("later", "ch", rdy=1)
        conn.pub("later", b"now")
        assert conn.message().body == b"now"
    assert daemon.alive()
    assert "JOURNAL(later:ch): write failed" in daemon.log()
    daemon.stop()


def test_an_attributes_file_that_cannot_be_written_is_a_store_failure(data_dir: Path) -> None:
    """Attributes are set, then their file cannot be rewritten (a directory in its place): an
    ephemeral channel's last consumer leaving (its attributes leave the file) goes on with a
    log line and /ping NOK, and a new setting is refused (500); the OSError ended the leaving
    connection as an unexpected error, and /ping stayed OK."""
    with helpers.running("ours", data_dir) as daemon:
        assert daemon.request("POST", "/topic/config?topic=attrs&ttl=600000")[0] == 200
        (data_dir / "trio-nsqd.attributes").unlink()
        (data_dir / "trio-nsqd.attributes").mkdir()
        with daemon.client() as conn:
            conn.sub("attrs", "e#ephemeral", rdy=1)
        assert helpers.wait_for(lambda: "ATTRIBUTES: attributes write failed" in daemon.log(), 5)
        status, health = daemon.request("GET", "/ping")
        assert (status, health[:34]) == (500, b"NOK - attributes write failed - [E"), health
        status, body = daemon.request("POST", "/channel/config?topic=attrs&channel=c&ttl=1000")
        assert (status, body) == (500, b'{"message":"INTERNAL_ERROR"}')
    assert "unexpected error" not in daemon.log()


def test_a_good_dedupe_key_write_turns_ping_ok_again(data_dir: Path) -> None:
    """--dedupe-window: after a keys write that failed (the file may not grow: EFBIG), the
    next one that succeeds turns /ping OK again, as a disk queue's does; with the default
    --mem-queue-size no queue write came, and /ping stayed NOK."""
    with helpers.running("ours", data_dir, "--dedupe-window=1m") as daemon:
        assert daemon.request("POST", "/pub?topic=keys&dedupe_key=k1", b"one")[0] == 200
        keys = data_dir / "trio-nsqd.dedupe"
        limit_file_size(daemon, keys.stat().st_size)
        assert daemon.request("POST", "/pub?topic=keys&dedupe_key=k2", b"two")[0] == 503
        assert daemon.request("GET", "/ping")[0] == 500
        limit_file_size(daemon, "unlimited")
        assert daemon.request("POST", "/pub?topic=keys&dedupe_key=k3", b"three")[0] == 200
        assert daemon.request("GET", "/ping") == (200, b"OK")
