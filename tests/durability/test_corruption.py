"""Damaged disk queue files: the daemon starts, logs an error, sets the bad file aside
(``<file>.bad``), skips what it cannot read and delivers every other message. It never dies.

Damage in the reading path of go-diskqueue (spec 5.2):
* the last data file of a topic queue is cut in the middle of a record (a torn write);
* a record length in the middle data file of a channel queue is garbage (a flipped sector).
Expected deliveries are exactly the records before the damage in the damaged file plus every
record of every other file: the reader jumps to the next file at the first bad record.
And a queue whose metadata file is garbage: ours delivers everything in its data files (the
Go nsqd none; ours salvages more than go-diskqueue here, on purpose)."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

from . import helpers

FLAGS = ("--mem-queue-size=0", "--max-bytes-per-file=4096")  # everything on disk, many files
N = 300
BAD_RECORD = 10  # index, in its file, of the record whose length is overwritten
GARBAGE_LENGTH = 0x7FFFFFF0


def body(topic: str, i: int) -> bytes:
    return b"%s-%05d-" % (topic.encode(), i) + b"x" * 40


def file_bodies(path: Path) -> list[bytes]:
    return [rec[26:] for rec in helpers.read_records(path)]


def test_damaged_files_are_skipped_and_the_rest_delivered(kind: str, data_dir: Path) -> None:
    with helpers.running(kind, data_dir, *FLAGS) as daemon:
        with daemon.client() as conn:
            conn.sub("corrupt_c", "ch")  # a channel, no consumer
        with daemon.client() as conn:
            for topic in ("corrupt_t", "corrupt_c", "corrupt_m"):
                bodies = [body(topic, i) for i in range(N)]
                conn.mpub_many(topic, [bodies[i : i + 25] for i in range(0, N, 25)])

        def in_channel_files() -> bool:  # the Go nsqd moves topic -> channel asynchronously
            files = helpers.queue_files(data_dir, "corrupt_c:ch")
            return sum(len(helpers.read_records(f)) for f in files) >= N

        helpers.wait_for(in_channel_files, 5.0)

    # (1) topic queue: cut its last file in the middle of its last record
    t_unread = helpers.unread_records(data_dir, "corrupt_t")
    t_files = list(t_unread)
    assert len(t_files) >= 3, helpers.data_files(data_dir)
    before_t = [rec[26:] for recs in t_unread.values() for rec in recs]
    assert sorted(before_t) == sorted(body("corrupt_t", i) for i in range(N))
    last = t_files[-1]
    offsets = helpers.record_offsets(last)
    assert len(offsets) >= 2
    with open(last, "r+b") as f:
        f.truncate(offsets[-1] + 10)
    expected_t = set(before_t) - {t_unread[last][-1][26:]}

    # (2) channel queue: garbage length in the middle of its second file
    c_unread = helpers.unread_records(data_dir, "corrupt_c:ch")
    c_files = list(c_unread)
    assert len(c_files) >= 3, helpers.data_files(data_dir)
    victim = c_files[1]
    with open(victim, "r+b") as f:
        f.seek(helpers.record_offsets(victim)[BAD_RECORD])
        f.write(struct.pack(">i", GARBAGE_LENGTH))
    damaged = {rec[26:] for rec in c_unread[victim][BAD_RECORD:]}
    # the Go nsqd may have left some in the topic's queue: they go to the channel at start
    at_topic = helpers.unread_records(data_dir, "corrupt_c")
    all_c = [rec[26:] for queue in (c_unread, at_topic) for recs in queue.values() for rec in recs]
    assert sorted(all_c) == sorted(body("corrupt_c", i) for i in range(N))
    expected_c = set(all_c) - damaged

    # (3) another topic queue: its metadata file is garbage. Both log "failed to
    # retrieveMetaData". Ours then starts over at the oldest data file, so every record comes
    # back (those read before the shutdown may come twice: at least once); go-diskqueue takes
    # it as an empty queue at position 0,0 and delivers none of them.
    (data_dir / "corrupt_m.diskqueue.meta.dat").write_bytes(b"garbage\n")
    expected_m = {body("corrupt_m", i) for i in range(N)}

    with helpers.running(kind, data_dir, *FLAGS) as daemon2:
        with daemon2.client() as conn:
            conn.sub("corrupt_m", "late", rdy=100)
            got_m = conn.consume(N if kind == "ours" else 0, timeout=10, quiet=0.5)
        with daemon2.client() as conn:
            conn.sub("corrupt_t", "late", rdy=100)
            got_t = conn.consume(len(expected_t), timeout=10, quiet=0.5)
        with daemon2.client() as conn, daemon2.client() as producer:
            conn.sub("corrupt_c", "ch", rdy=100)
            got_c = conn.consume(len(expected_c), timeout=10, quiet=0.5)
            assert daemon2.alive()
            producer.pub("corrupt_c", b"after")  # the damaged queue still works
            assert conn.message().body == b"after"
        log = daemon2.log()

    for name, got, expected in (("corrupt_t", got_t, expected_t), ("corrupt_c", got_c, expected_c)):
        counts = Counter(helpers.bodies(got))
        assert max(counts.values()) == 1, f"{name}: duplicates"
        missing = expected - set(counts)
        extra = set(counts) - expected
        assert not missing, f"{name}: {len(missing)} intact messages not delivered"
        assert not extra, f"{name}: {len(extra)} damaged records delivered"
    if kind == "ours":
        assert set(helpers.bodies(got_m)) == expected_m
    else:  # go-diskqueue restarts at 0,0 = "empty" and overwrites the old records later
        assert not got_m
    errors = [line for line in log.splitlines() if "ERROR" in line]
    for queue in ("corrupt_t", "corrupt_c:ch", "corrupt_m"):
        assert any(queue in line for line in errors), f"no ERROR logged for {queue}:\n{log}"
    bad = [n for n in helpers.data_files(data_dir) if n.endswith(".bad")]
    assert f"{victim.name}.bad" in bad, helpers.data_files(data_dir)
    assert f"{last.name}.bad" in bad, helpers.data_files(data_dir)
