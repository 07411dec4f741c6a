"""Messages of up to --max-msg-size go through the disk queues (--mem-queue-size=0) and out to
their consumers as messages kept in memory do: just under and just over the TCP loop's
4 MiB of unsent output past which a consumer takes no more (HIGH_WATER, nsqd/tcp/connection.py),
and --max-msg-size itself (8 MiB here). From a topic's queue and a channel's, to a plain
consumer and to one served by tasks of its own (deflate), by PUB and MPUB, after a restart
(read from the files), deferred (DPUB, REQ) and over HTTP (receive, pop: ours alone). The TCP
cases run on ours and on the Go nsqd v1.3.0, which delivers every one of them.

A consumer never FINs before it has all of a case's messages: one whose output passed the
high-water mark left the channel's rotation, and only a refill once it was sent brought it
back; without it the messages after the first waited for its next command."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from . import helpers

MAX = 8 << 20  # --max-msg-size
UNDER = 4_194_200  # its frame (body + 34 bytes) is just under 4 MiB
OVER = 4_194_400  # just over
SIZES = (UNDER, OVER, MAX)
SIZE_FLAGS = (f"--max-msg-size={MAX}", f"--max-body-size={4 * MAX}")
FLAGS = ("--mem-queue-size=0", *SIZE_FLAGS)
# the live case once more with the queues in memory (the default --mem-queue-size): the
# consumer's stall past the high-water mark was the TCP loop's, not the disk queue's
WHERE = {"disk": FLAGS, "memory": SIZE_FLAGS}
TIMEOUT = 10.0


def _bodies(tag: str) -> list[bytes]:
    """One body of each size, told apart by their start (and a cheap fill: deflate's work is
    not what is measured)."""
    out = []
    for size in SIZES:
        head = f"{tag}-{size}:".encode()
        out.append(head + b"x" * (size - len(head)))
    return out


def _short(bodies: list[bytes]) -> list[tuple[bytes, int]]:
    """What an assertion prints of bodies: their start and length."""
    return [(b[:24], len(b)) for b in bodies]


def _take_all(conn: helpers.Client, want: list[bytes]) -> list[helpers.DecodedMessage]:
    """Every one of `want`, in order, read with nothing FIN'd before the last; then FIN'd."""
    got = conn.messages(len(want), TIMEOUT)
    assert _short(helpers.bodies(got)) == _short(want)
    assert helpers.bodies(got) == want
    conn.fin_many(m.id for m in got)
    conn.barrier()
    return got


def _consumer(daemon: helpers.Daemon, topic: str, *, deflate: bool = False) -> helpers.Client:
    conn = daemon.client()
    if deflate:
        conn.deflate()
    conn.sub(topic, "ch", rdy=len(SIZES))
    return conn


@pytest.mark.parametrize("where", WHERE)
def test_large_messages_delivered_live_through_disk_queues(
    kind: str, data_dir: Path, where: str
) -> None:
    """A consumer subscribed with RDY 3 before the messages come, plain and deflated (TLS,
    snappy and AUTH connections are served the same way), by PUB and by MPUB. Before the
    fix: the deflated consumer got the message over 4 MiB and nothing after it (the plain
    one too before ddac1ed), while the Go nsqd delivered all."""
    with helpers.running(kind, data_dir, *WHERE[where]) as daemon, daemon.client() as producer:
        for topic, deflate, mpub in (
            ("plain", False, False),
            ("deflated", True, False),
            ("mpub", False, True),
            ("mpub-deflated", True, True),
        ):
            want = _bodies(topic)
            with _consumer(daemon, topic, deflate=deflate) as conn:
                if mpub:
                    producer.mpub(topic, want)
                else:
                    for body in want:
                        producer.pub(topic, body)
                _take_all(conn, want)


def test_large_messages_delivered_from_disk_backlogs_and_after_a_restart(
    kind: str, data_dir: Path
) -> None:
    """Queued before anyone reads them: in a topic's queue (no channel yet) and in a
    channel's (no consumer ready), read now, and the same left in the files over a clean
    restart; after it a DPUB of one over 4 MiB and its REQs (at once and with a delay)."""
    with helpers.running(kind, data_dir, *FLAGS) as daemon, daemon.client() as producer:
        for topic in ("channelq", "channelq-kept"):
            with daemon.client() as conn:
                conn.sub(topic, "ch", rdy=0)  # the channel: what comes waits in its queue
        for topic in ("topicq", "topicq-kept", "channelq", "channelq-kept"):
            for body in _bodies(topic):
                producer.pub(topic, body)
        for topic, deflate in (("topicq", False), ("channelq", True)):
            with _consumer(daemon, topic, deflate=deflate) as conn:
                _take_all(conn, _bodies(topic))
    with helpers.running(kind, data_dir, *FLAGS) as daemon, daemon.client() as producer:
        for topic, deflate in (("topicq-kept", True), ("channelq-kept", False)):
            with _consumer(daemon, topic, deflate=deflate) as conn:
                _take_all(conn, _bodies(topic))
        big = _bodies("deferred")[1]
        with _consumer(daemon, "channelq-kept") as conn:
            producer.send(helpers.command("DPUB channelq-kept 100", big))
            producer.expect_ok()
            for delay, attempts in ((0, 1), (100, 2), (0, 3)):
                msg = conn.message(TIMEOUT)
                assert (msg.body == big, msg.attempts) == (True, attempts)
                conn.req(msg.id, delay)
            msg = conn.message(TIMEOUT)
            assert (msg.body == big, msg.attempts) == (True, 4)
            conn.fin(msg.id)
            conn.barrier()


def _http_bodies(daemon: helpers.Daemon, verb: str, topic: str, query: str) -> list[bytes]:
    path = f"/channel/{verb}?topic={topic}&channel=ch&n={len(SIZES)}{query}"
    status, answer = daemon.request("POST", path, timeout=TIMEOUT)
    assert status == 200, answer[:200]
    return [base64.b64decode(m["body"]) for m in json.loads(answer)["messages"]]


def test_large_messages_taken_over_http_from_disk_queues(data_dir: Path) -> None:
    """Ours alone: /channel/pop and /channel/receive (FIN'd by its lease) give every size from
    a channel's disk queue, before and after a restart."""
    with helpers.running("ours", data_dir, *FLAGS) as daemon, daemon.client() as producer:
        for topic in ("popped", "received", "popped-kept"):
            for made in (
                f"/topic/create?topic={topic}",
                f"/channel/create?topic={topic}&channel=ch",
            ):
                assert daemon.request("POST", made)[0] == 200
            for body in _bodies(topic):
                producer.pub(topic, body)
        assert _http_bodies(daemon, "pop", "popped", "") == _bodies("popped")
        got = _http_bodies(daemon, "receive", "received", "&vt=30000&lease=L")
        assert got == _bodies("received")
        status, _ = daemon.request("POST", "/message/fin?topic=received&channel=ch&lease=L")
        assert status == 200
    with helpers.running("ours", data_dir, *FLAGS) as daemon:
        assert _http_bodies(daemon, "pop", "popped-kept", "") == _bodies("popped-kept")
