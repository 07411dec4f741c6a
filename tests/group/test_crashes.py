"""A group loses nothing one nsqd would keep: a worker killed with SIGKILL mid-traffic is
started again by the supervisor and its partition's disk queues resume; the whole group killed
and started again gives back every acknowledged message. --mem-queue-size=0: every message
written to disk before its OK, as nsqd promises with that flag."""

from __future__ import annotations

import os
import signal
import threading
import time

from tests.ops.conftest import START_TIMEOUT, V2, http_post, wait_until

from .conftest import Group


def _publish_until_broken(
    port: int, prefix: bytes, acked: list[bytes], stop: threading.Event
) -> None:
    """PUB one message at a time; each one answered OK is recorded (bounded: 20,000)."""
    try:
        with V2(port) as conn:
            for i in range(20_000):
                if stop.is_set():
                    return
                body = prefix + b"%d" % i
                conn.pub("t", body)
                acked.append(body)
    except (OSError, ConnectionError, AssertionError):
        return  # the worker died under it: what it had not answered is not owed


def _drain(conn: V2, wanted: set[bytes], timeout: float = 30.0) -> set[bytes]:
    """Consume (FIN) until every body in `wanted` arrived or `timeout` passed; all bodies seen."""
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout
    conn.sock.settimeout(1.0)
    while not wanted <= seen and time.monotonic() < deadline:
        try:
            kind, data = conn.frame()
        except TimeoutError:
            continue
        assert kind == 2, (kind, data)
        seen.add(data[26:])
        conn.fin(data[10:26])
    return seen


def test_a_killed_worker_is_restarted_and_loses_nothing_acknowledged(group: Group) -> None:
    group.start("--mem-queue-size=0")
    before = group.pids()[0]
    acked0: list[bytes] = []
    acked1: list[bytes] = []
    stop = threading.Event()
    writers = [
        threading.Thread(target=_publish_until_broken, args=(group.link(0), b"a", acked0, stop)),
        threading.Thread(target=_publish_until_broken, args=(group.link(1), b"b", acked1, stop)),
    ]
    for w in writers:
        w.start()
    wait_until(lambda: len(acked0) > 200 and len(acked1) > 200, START_TIMEOUT, "traffic")
    os.kill(before, signal.SIGKILL)
    wait_until(lambda: group.pids()[0] != before, START_TIMEOUT, "worker 0 started again")
    wait_until(lambda: group.link(0), START_TIMEOUT, "worker 0's link")
    time.sleep(0.2)
    stop.set()
    for w in writers:
        w.join(30)
    assert "worker 0 exited (signal 9)" in group.log_text()
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(100)
        wanted = set(acked0) | set(acked1)
        seen = _drain(sub, wanted)
    assert not wanted - seen, f"{len(wanted - seen)} acknowledged messages lost"


def test_the_whole_group_killed_and_started_again_loses_nothing_acknowledged(
    group: Group,
) -> None:
    group.start("--mem-queue-size=0")
    wanted = set()
    for k in (0, 1):
        with group.pin(k) as pub:
            for i in range(300):
                pub.pub("t", b"%d-%d" % (k, i))
                wanted.add(b"%d-%d" % (k, i))
    group.kill()
    group.start("--mem-queue-size=0")
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(100)
        seen = _drain(sub, wanted)
    assert not wanted - seen, f"{len(wanted - seen)} acknowledged messages lost"


def test_a_consumer_keeps_receiving_across_a_peers_restart(group: Group) -> None:
    """A consumer in worker 1 subscribed all along: worker 0 is killed while it holds a
    backlog; the link reconnects to the restarted worker 0 and pulls the rest."""
    group.start("--mem-queue-size=0")
    with group.pin(1) as sub:
        sub.sub("t", "c")
        with group.pin(0) as pub:  # the channel is in worker 0 too before this
            bodies = {b"w0-%d" % i for i in range(400)}
            for body in sorted(bodies):
                pub.pub("t", body)
        before = group.pids()[0]
        sub.rdy(3)  # pulling has begun, slowly
        os.kill(before, signal.SIGKILL)
        wait_until(lambda: group.pids()[0] != before, START_TIMEOUT, "worker 0 started again")
        sub.rdy(100)
        seen = _drain(sub, bodies)
    assert not bodies - seen, f"{len(bodies - seen)} acknowledged messages lost"


def test_a_channel_made_while_a_worker_was_down_is_made_there_when_it_starts_again(
    group: Group,
) -> None:
    """The peers up when a channel is made make it; a worker that was down then (killed, or
    still starting, as when a bench makes its channel right after the group answers) takes
    the peers' topics and channels before it listens, so what it accepts reaches the channel."""
    group.start()
    before = group.pids()[1]
    os.kill(before, signal.SIGKILL)
    wait_until(lambda: not group.link(1), START_TIMEOUT, "worker 1 gone")
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=late")[0] == 200
    assert http_post(f"{base}/channel/create?topic=late&channel=c")[0] == 200
    assert group.pids()[1] == before, "worker 1 was started again before the channel was made"
    wait_until(lambda: group.pids()[1] != before, START_TIMEOUT, "worker 1 started again")
    # its link listens before it caught up: its shared ports only after
    wait_until(lambda: group.listened(1) == 2, START_TIMEOUT, "worker 1 listening again")
    with group.pin(1) as pub:
        pub.pub("late", b"after the restart")
    (topic,) = group.worker_stats(1, "&topic=late")["topics"]
    assert [c["channel_name"] for c in topic["channels"]] == ["c"]
    assert topic["channels"][0]["message_count"] == 1


def test_a_pause_made_while_a_worker_was_down_reaches_it_when_it_starts_again(
    group: Group,
) -> None:
    """A pause that reached only the workers that were up (here: made in worker 0 alone, as
    its fan-out finds worker 1 down) is worker 1's state too once it starts again: it catches
    up the peers' paused flags, not just their topics and channels (its own nsqd.dat has the
    old state)."""

    group.start()
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?topic=t&channel=c")[0] == 200
    assert group.post(0, "channel/pause?topic=t&channel=c") == 200

    def paused(k: int) -> bool:
        (topic,) = group.worker_stats(k, "&topic=t")["topics"]
        (channel,) = topic["channels"]
        return bool(channel["paused"])

    assert paused(0) and not paused(1)  # the pause reached worker 0 only
    before = group.pids()[1]
    os.kill(before, signal.SIGKILL)
    wait_until(lambda: group.pids()[1] != before, START_TIMEOUT, "worker 1 started again")
    # its link listens before it caught up: its shared ports only after
    wait_until(lambda: group.listened(1) == 2, START_TIMEOUT, "worker 1 listening again")
    assert paused(1)


def test_a_worker_that_stops_answering_is_killed_and_started_again(group: Group) -> None:
    """--worker-timeout: a worker alive but serving nobody (SIGSTOPped here; a fault's endless
    loop alike) would keep its share of new connections waiting for ever. The supervisor kills
    it once it has answered no /ping for the timeout, and the group starts it again: what it had
    on disk is served again, and the worker that kept answering is left alone."""
    group.start("--mem-queue-size=0", "--worker-timeout=2s")
    with group.pin(1) as pub:
        for i in range(20):
            pub.pub("t", b"m%d" % i)
    pids = group.pids()
    os.kill(pids[1], signal.SIGSTOP)
    try:
        wait_until(lambda: group.pids()[1] != pids[1], 20, "worker 1 killed and started again")
    finally:
        try:
            os.kill(pids[1], signal.SIGCONT)  # (not killed: the test fails; let it stop)
        except ProcessLookupError:
            pass
    assert "worker 1 exited (signal 9)" in group.log_text()
    assert "answered no /ping" in group.log_text()
    assert group.pids()[0] == pids[0]
    wait_until(lambda: group.link(1), START_TIMEOUT, "worker 1's link")
    with group.pin(0) as sub:
        sub.sub("t", "c")
        sub.rdy(100)
        wanted = {b"m%d" % i for i in range(20)}
        assert _drain(sub, wanted) == wanted


def test_a_worker_that_answers_is_never_killed(group: Group) -> None:
    """A busy worker still answers /ping: nothing is killed however short the timeout."""
    group.start("--worker-timeout=1s")
    pids = group.pids()
    with group.pin(0) as a, group.pin(1) as b:
        end = time.monotonic() + 4
        while time.monotonic() < end:
            for conn in (a, b):
                conn.pub("t", b"x" * 1000)
    assert group.pids() == pids
    assert "answered no /ping" not in group.log_text()
