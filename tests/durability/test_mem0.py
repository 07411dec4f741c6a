"""--mem-queue-size=0: every message of a non-ephemeral topic/channel goes through its disk
queue, and a single consumer still gets each publisher's messages in publish order (a disk
queue is FIFO), also across a clean restart. Ephemeral topics and channels never touch the
data path."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from protocol.v2.message import DecodedMessage

from . import helpers

FLAGS = ("--mem-queue-size=0",)
PUBLISHERS = 3
PER_PUBLISHER = 1500


def body(p: int, seq: int) -> bytes:
    return b"p%d-%05d" % (p, seq)


def publish(addr: tuple[str, int], p: int, seqs: range, errors: list[BaseException]) -> None:
    """PUBs and MPUBs of different sizes, in sequence order."""
    try:
        with helpers.Client(addr) as conn:
            i = seqs.start
            while i < seqs.stop:
                size = (1, 7, 50, 1, 120)[i % 5]
                batch = [body(p, s) for s in range(i, min(i + size, seqs.stop))]
                if len(batch) == 1:
                    conn.pub("m0", batch[0])
                else:
                    conn.mpub("m0", batch)
                i += len(batch)
    except BaseException as exc:
        errors.append(exc)


def run_publishers(addr: tuple[str, int], seqs: range) -> list[threading.Thread]:
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=publish, args=(addr, p, seqs, errors), daemon=True)
        for p in range(PUBLISHERS)
    ]
    for t in threads:
        t.start()
    return threads


def join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "publisher stuck"


def assert_in_order(got: list[DecodedMessage], seqs: range) -> None:
    per: dict[int, list[int]] = {p: [] for p in range(PUBLISHERS)}
    for m in got:
        p, seq = m.body.split(b"-")
        per[int(p[1:])].append(int(seq))
    for p, order in per.items():
        assert sorted(order) == list(seqs), f"publisher {p}: missing or duplicate messages"
        jumps = [(a, b) for a, b in itertools.pairwise(order) if b < a]
        assert not jumps, f"publisher {p}: out of order at {jumps[:5]}"


def ephemeral_files(data_dir: Path) -> list[str]:
    return [n for n in helpers.data_files(data_dir) if "ephemeral" in n]


def test_everything_through_disk_in_order(kind: str, data_dir: Path) -> None:
    total = PUBLISHERS * PER_PUBLISHER
    seqs = range(PER_PUBLISHER)
    with helpers.running(kind, data_dir, *FLAGS) as daemon:
        ephemeral = []
        for topic, channel in (("m0", "e#ephemeral"), ("m0e#ephemeral", "c#ephemeral")):
            conn = daemon.client()
            conn.sub(topic, channel, rdy=1000)
            ephemeral.append(conn)
        with daemon.client() as conn:
            conn.mpub("m0e#ephemeral", [b"eph-%d" % i for i in range(500)])
        with daemon.client() as consumer:
            consumer.sub("m0", "ch", rdy=50)
            publishers = run_publishers(daemon.addr, seqs)
            got = consumer.consume(total, timeout=30)  # consuming while they publish
            join(publishers)
            assert not ephemeral_files(data_dir), helpers.data_files(data_dir)
        for conn in ephemeral:
            conn.close()
    assert len(got) == total
    assert_in_order(got, seqs)
    assert not ephemeral_files(data_dir), helpers.data_files(data_dir)


def test_every_message_written_to_the_channel_queue(kind: str, data_dir: Path) -> None:
    """nsqd has no channel memory queue at all with --mem-queue-size=0 (spec 4.3, 4.9): even
    with a consumer waiting, each message is appended to the channel's disk queue and read back
    from it. The channel's single data file (never rolled, so never deleted) shows it."""
    total = PUBLISHERS * PER_PUBLISHER
    with helpers.running(kind, data_dir, *FLAGS) as daemon:
        with daemon.client() as consumer:
            consumer.sub("m0", "ch", rdy=50)
            publishers = run_publishers(daemon.addr, range(PER_PUBLISHER))
            got = consumer.consume(total, timeout=30)
            join(publishers)
        files = helpers.queue_files(data_dir, "m0:ch")
        assert len(files) == 1, files
        written = len(helpers.read_records(files[0]))
    assert len(got) == total
    assert written == total, f"{total - written} of {total} messages never written to disk"


def test_order_survives_clean_restart(kind: str, data_dir: Path) -> None:
    """Half consumed (and FINed) before a SIGTERM, the rest after: still in order. A queue that
    reads a record ahead must give it back in place, not at the end of the queue."""
    total = PUBLISHERS * PER_PUBLISHER
    seqs = range(PER_PUBLISHER)
    with helpers.running(kind, data_dir, *FLAGS) as daemon:
        with daemon.client() as conn:
            conn.sub("m0", "ch")  # the channel exists, no consumer yet
        join(run_publishers(daemon.addr, seqs))
        with daemon.client() as consumer:
            consumer.sub("m0", "ch", rdy=0)
            consumer.rdy(100)
            first = consumer.messages(100)
            consumer.rdy(0)
            consumer.fin_many(m.id for m in first)
            consumer.barrier()
    with helpers.running(kind, data_dir, *FLAGS) as daemon2, daemon2.client() as consumer:
        consumer.sub("m0", "ch", rdy=100)
        rest = consumer.consume(total - len(first), timeout=20)
    assert_in_order(first + rest, seqs)
