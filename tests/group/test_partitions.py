"""A group behaves as one nsqd: what is published in one worker reaches a consumer in another,
FIN/REQ act where the consumer is, and nothing is pulled that no consumer has credit for."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest

from protocol.v2 import encoders
from tests.ops.conftest import (
    START_TIMEOUT,
    V2,
    Deflated,
    http_post,
    stats_channel,
    wait_until,
)

from .conftest import Group


def _drain(conn, n: int) -> list[tuple[bytes, bytes, int]]:
    """n messages from a subscribed connection, each FIN'd: (id, body, attempts)."""
    got = []
    while len(got) < n:
        kind, data = conn.frame()
        assert kind == 2, (kind, data)
        msg_id = data[10:26]
        got.append((msg_id, data[26:], int.from_bytes(data[8:10], "big")))
        conn.fin(msg_id)
    return got


def _publish(group: Group, worker: int, bodies: list[bytes]) -> None:
    """PUB each of `bodies` to topic t in `worker`."""
    with group.pin(worker) as pub:
        for body in bodies:
            pub.pub("t", body)


def test_a_consumer_in_one_worker_drains_what_another_worker_took(group: Group) -> None:
    group.start()
    _publish(group, 0, [b"m%d" % i for i in range(300)])
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(7)
        got = _drain(sub, 300)
    assert sorted(body for _, body, _ in got) == sorted(b"m%d" % i for i in range(300))
    assert len({msg_id for msg_id, _, _ in got}) == 300
    assert {attempts for _, _, attempts in got} == {1}


def test_consumers_in_both_workers_share_what_both_took(group: Group) -> None:
    group.start()
    with group.pin(0) as a, group.pin(1) as b:
        for i in range(100):
            (a if i % 2 else b).pub("t", b"%d" % i)
        a.sub("t", "c")
        b.sub("t", "c")
        a.rdy(1)  # a slow consumer beside a keen one: nothing is stranded either way
        b.rdy(50)
        seen: list[bytes] = []
        for _ in range(1000):  # bounded: 0.2 s a miss
            if len(seen) >= 100:
                break
            for conn in (b, a):
                conn.sock.settimeout(0.2)
                try:
                    seen += [body for _, body, _ in _drain(conn, 1)]
                except TimeoutError:
                    pass
    assert sorted(seen) == sorted(b"%d" % i for i in range(100))


def test_a_requeued_message_comes_back_with_its_attempts(group: Group) -> None:
    group.start()
    with group.pin(0) as pub:
        pub.pub("t", b"once")
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(1)
        kind, data = sub.frame()
        assert kind == 2 and data[26:] == b"once"
        sub.req(data[10:26])
        ((_, body, attempts),) = _drain(sub, 1)
    assert (body, attempts) == (b"once", 2)


def test_the_link_keeps_within_max_rdy_count(group: Group) -> None:
    """Two consumers with RDY 5 each in worker 1 (credit 10) pull from worker 0, whose
    --max-rdy-count is 5: the link asks for 5, not 10 (which nsqd would refuse)."""
    group.start("--max-rdy-count=5")
    _publish(group, 0, [b"%d" % i for i in range(30)])
    with group.pin(1) as a, group.pin(1) as b:
        for conn in (a, b):
            conn.sub("t", "c")
            conn.rdy(5)
        seen: list[bytes] = []
        for _ in range(100):  # bounded: 0.2 s a miss
            if len(seen) >= 30:
                break
            for conn in (a, b):
                conn.sock.settimeout(0.2)
                try:
                    seen += [body for _, body, _ in _drain(conn, 1)]
                except TimeoutError:
                    pass
    assert sorted(seen) == sorted(b"%d" % i for i in range(30))
    assert "E_INVALID" not in group.log_text()


def test_a_deferred_message_reaches_a_consumer_in_another_worker(group: Group) -> None:
    group.start()
    with group.pin(1) as sub:
        sub.sub("t", "c")  # the channel exists in both workers before the DPUB
        with group.pin(0) as pub:
            pub.send(encoders.dpub("t", 300, b"later"))
            pub.expect_ok()
        sub.rdy(1)
        ((_, body, attempts),) = _drain(sub, 1)
    assert (body, attempts) == (b"later", 1)


def test_a_paused_channel_is_paused_in_every_worker(group: Group) -> None:
    group.start()
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?topic=t&channel=c")[0] == 200
    assert http_post(f"{base}/channel/pause?topic=t&channel=c")[0] == 200
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(5)
        with group.pin(0) as pub:
            pub.pub("t", b"held")
        sub.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sub.frame()
        assert http_post(f"{base}/channel/unpause?topic=t&channel=c")[0] == 200
        sub.sock.settimeout(5)
        ((_, body, _),) = _drain(sub, 1)
    assert body == b"held"


def test_nothing_is_pulled_past_the_consumers_credit(group: Group) -> None:
    """A consumer in worker 1 with RDY 5 holds the 5 it was sent: worker 1 pulls nothing more
    (its link's RDY 0 reaches worker 0 before the FINs of those 5, which would free worker 0
    to send the link 5 more); the rest wait in worker 0 for any consumer. Five times: FIN the
    5 held, take 5 more, hold them."""
    group.start()
    _publish(group, 0, [b"%d" % i for i in range(100)])
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(5)
        for held in range(5):
            ids = []
            for _ in range(5):
                kind, data = sub.frame()
                assert kind == 2
                ids.append(data[10:26])
            for _ in range(10):  # bounded: what would be over-pulled comes within milliseconds
                here = stats_channel(group.worker_stats(1), "t", "c")
                assert (here["depth"], here["in_flight_count"]) == (0, 5), here
                time.sleep(0.02)
            there = stats_channel(group.worker_stats(0), "t", "c")
            assert there["depth"] == 95 - 5 * held, there
            for msg_id in ids:
                sub.fin(msg_id)


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "nsqd closed the connection"
        data += chunk
    return data


def _consumer(group: Group, worker: int, deflate: bool) -> V2:
    """A V2 connection in `worker`: served by the reactor, or (deflate) by tasks of its own."""
    conn = group.pin(worker)
    if deflate:
        conn.send(encoders.identify({"feature_negotiation": True, "deflate": True}))
        size = int.from_bytes(_exactly(conn.sock, 4), "big")  # the answer: read no further
        data = _exactly(conn.sock, size)
        assert data[:4] == b"\0\0\0\0" and json.loads(data[4:])["deflate"], data
        conn.sock = Deflated(conn.sock)  # type: ignore[assignment]
        conn.expect_ok()  # the first frame compressed
    return conn


@pytest.mark.parametrize(
    ("deflate", "suffix"),
    [(False, ""), (True, ""), (False, "#ephemeral")],
    ids=["reactor", "own-tasks", "ephemeral"],
)
def test_a_channel_made_by_sub_gets_what_any_worker_takes_after_its_ok(
    group: Group, deflate: bool, suffix: str
) -> None:
    """nsqd: a channel gets every message published after it was made. A SUB that makes a
    channel in one worker is answered once every worker has it: a PUB sent the moment the OK
    arrives, in a worker where the topic has another channel already, reaches the new one too
    (it used to go to the old channel alone there, the new one never saw it). An ephemeral
    one is made in the peers by this worker's pull links, started by the SUB."""
    group.start()
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?topic=t&channel=old")[0] == 200  # both workers
    with group.pin(1) as pub:
        for i in range(8):
            with _consumer(group, 0, deflate) as sub:
                sub.sub("t", f"new{i}{suffix}")
                pub.pub("t", b"after %d" % i)
                sub.rdy(1)
                sub.sock.settimeout(3)
                ((_, body, _),) = _drain(sub, 1)
                assert body == b"after %d" % i
    if suffix:  # gone with their consumer, from every worker (the links left the peers')

        def none_left() -> bool:
            return not [c for k in (0, 1) for c in _channels(group, k) if c.startswith("new")]

        wait_until(none_left, 10, "the ephemeral channels gone")


def test_a_sub_is_answered_while_a_peer_is_down(group: Group) -> None:
    """The SUB that makes a channel waits for the peers that run, not for one that is down (it
    makes the channel when it starts again, from its peers')."""
    group.start()
    group.proc.send_signal(signal.SIGSTOP)  # the supervisor: it starts nobody again meanwhile
    try:
        os.kill(group.pids()[1], signal.SIGKILL)
        with group.pin(0) as sub:
            began = time.monotonic()
            sub.sub("t", "c")
            assert time.monotonic() - began < 1.5
    finally:
        group.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: group.link(1), START_TIMEOUT, "worker 1 started again")
    wait_until(lambda: "c" in _channels(group, 1), START_TIMEOUT, "the channel in worker 1")


def _channels(group: Group, k: int) -> list[str]:
    topics = group.worker_stats(k)["topics"]
    return [c["channel_name"] for t in topics for c in t["channels"]]
