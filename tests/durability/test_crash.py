"""kill -9 after the publisher got its OKs: every acknowledged message is still there.

With --mem-queue-size=0 every message is written to a disk queue before PUB/MPUB answers OK
(with the default size they would sit in memory, and a crash loses memory queues in nsqd too:
spec 4.10). The write() has returned, so the bytes are in the page cache and survive the death
of the process; --sync-every=1 makes the queue metadata follow closely.

At-least-once: a message moved from a topic's disk queue to its channel's disk queue can be
delivered twice after a crash, if the topic queue's read position (in its metadata file) had
not been persisted when the process died: the topic hands the same record to the channel again.
A topic without channels is never read, so its messages can never be duplicated."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from . import helpers

FLAGS = ("--sync-every=1", "--mem-queue-size=0")
# The Go nsqd fsyncs after every write with --sync-every=1 (~2 ms each): its run, which only
# proves the test right, uses fewer messages to stay fast.
SIZES = {"ours": (3000, 2000), "reference": (600, 400)}


def publish(conn: helpers.Client, topic: str, bodies: list[bytes]) -> None:
    """A mix: single PUBs first, MPUB batches of 100 for the rest."""
    for b in bodies[:100]:
        conn.pub(topic, b)
    rest = bodies[100:]
    conn.mpub_many(topic, [rest[i : i + 100] for i in range(0, len(rest), 100)], window=4)


def test_kill_9_loses_no_acknowledged_message(
    kind: str, data_dir: Path, record_property: pytest.RecordProperty
) -> None:
    n_a, n_b = SIZES[kind]
    sent_a = [b"crash-a-%05d" % i for i in range(n_a)]
    sent_b = [b"crash-b-%05d" % i for i in range(n_b)]

    daemon = helpers.start(kind, data_dir, *FLAGS)
    with daemon.client() as conn:
        conn.sub("crash_a", "ch")  # the channel exists, its consumer goes away
    with daemon.client() as conn:
        # First half, then a pause for the queue metadata to catch up; second half, then the
        # kill right after the last OK: the restart finds metadata that is current for some
        # records and behind the data files for the others.
        publish(conn, "crash_a", sent_a[: n_a // 2])
        publish(conn, "crash_b", sent_b[: n_b // 2])
        helpers.sleep(0.5)
        publish(conn, "crash_a", sent_a[n_a // 2 :])
        publish(conn, "crash_b", sent_b[n_b // 2 :])
        daemon.kill()
    assert daemon.proc.returncode == -9

    with helpers.running(kind, data_dir, *FLAGS) as daemon2:
        with daemon2.client() as conn:
            conn.sub("crash_a", "ch", rdy=500)
            got_a = conn.consume(n_a, timeout=20, quiet=0.5, idle=2)
        with daemon2.client() as conn:
            conn.sub("crash_b", "late", rdy=500)  # the topic's backlog goes to its first channel
            got_b = conn.consume(n_b, timeout=20, quiet=0.5, idle=2)

    problems = []
    for name, sent, got in (("crash_a", sent_a, got_a), ("crash_b", sent_b, got_b)):
        counts = Counter(m.body for m in got)
        missing = set(sent) - set(counts)
        foreign = set(counts) - set(sent)
        dups = sum(c - 1 for c in counts.values())
        record_property(f"{name}_delivered", len(got))
        record_property(f"{name}_duplicates", dups)
        print(f"{kind} {name}: sent {len(sent)} delivered {len(got)} duplicates {dups}")
        if missing:
            problems.append(f"{name}: {len(missing)} acknowledged lost: {sorted(missing)[:5]}")
        if foreign:
            problems.append(f"{name}: unknown bodies {sorted(foreign)[:5]}")
        if name == "crash_b" and dups:
            problems.append(
                f"{name}: {dups} duplicates, but a topic without channels is never read"
            )
    assert not problems, "\n".join(problems)
    # crash_a duplicates may only come from the topic -> channel hand-off (module docstring)


def test_kill_9_keeps_a_single_queued_message(kind: str, data_dir: Path) -> None:
    """The smallest case: one message in a channel's disk queue (nobody reading) and one in
    a topic's (no channel), the metadata given time to catch up, then kill -9. A queue that
    reads a record ahead must not persist a read position past it."""
    daemon = helpers.start(kind, data_dir, *FLAGS)
    with daemon.client() as conn:
        conn.sub("single", "ch")
    with daemon.client() as conn:
        conn.pub("single", b"in-channel")
        conn.pub("single_t", b"in-topic")
    metas = [data_dir / f"{q}.diskqueue.meta.dat" for q in ("single:ch", "single_t")]
    helpers.wait_for(lambda: all(m.exists() for m in metas), 3.0)  # --sync-every=1
    helpers.sleep(0.3)
    meta_text = {m.name: m.read_text() for m in metas if m.exists()}
    daemon.kill()

    with helpers.running(kind, data_dir, *FLAGS) as daemon2:
        with daemon2.client() as conn:
            conn.sub("single", "ch", rdy=10)
            got_c = helpers.bodies(conn.consume(1, timeout=5, idle=1))
        with daemon2.client() as conn:
            conn.sub("single_t", "ch", rdy=10)
            got_t = helpers.bodies(conn.consume(1, timeout=5, idle=1))
    assert (got_c, got_t) == ([b"in-channel"], [b"in-topic"]), (
        f"metadata (depth, read, write positions) before kill -9: {meta_text}"
    )


def test_kill_9_right_after_fins_keeps_them_finished(data_dir: Path) -> None:
    """--sync-every=1: a batch read from a channel's disk queue, FIN'd (the FINs answered
    for), then kill -9 at once: none of the batch comes back. Ours persisted the read
    position in the syncer's worker thread after the batch had left, the FINs' answer beat
    it and the whole batch was delivered again (found by kill -9 chaos, every time with this
    sequence). The Go nsqd syncs right after each read, in its queue's goroutine, beside the
    delivery: it gave none back in 3 runs of 3, but a busy machine can let the kill beat its
    last sync, so it is not run here (the test would be flaky on it, not wrong)."""
    kind = "ours"
    got = helpers.fin_then_kill(helpers.start(kind, data_dir, *FLAGS), "finback", 300, 50)
    with helpers.running(kind, data_dir, *FLAGS) as daemon2, daemon2.client() as conn:
        conn.sub("finback", "ch", rdy=500)
        after = conn.consume(250, timeout=20, quiet=0.5, idle=2)
    back = sorted({m.body for m in got} & {m.body for m in after})
    assert not back, f"{len(back)} FIN'd (and answered for) messages delivered again"
    never = {b"m-%03d" % i for i in range(300)} - {m.body for m in got}
    assert never <= {m.body for m in after}, "lost some of the 250 never delivered"
