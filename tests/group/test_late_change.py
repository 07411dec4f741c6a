"""A delete or an empty asked of one worker waits for every peer that is up (--workers;
fanout.PATIENT), so no peer makes it after the group answered: served late, it removed what
that peer's clients published after the answer, which one nsqd keeps. A peer stopped
(SIGSTOP: a long GC pause, a stalled disk) was left out after 2 s, the client got its 200,
and the peer, woken, served the change and the publishes made since in whatever order its
loop found them. Now the answer waits until the peer answered, or is known down: killed
(here by the supervisor's watchdog, --worker-timeout), when its worker-K.missed holds the
change and its next start makes it."""

from __future__ import annotations

import os
import signal
import socket
import time
from contextlib import closing

import pytest

from nsqd.group import missed
from tests.ops.conftest import START_TIMEOUT, http_json, http_post, wait_until

from .conftest import Group
from .test_down_worker import _on_disk

WAIT = 10.0
STOPPED = 3.0  # seconds a stopped peer holds the answer back here (the old limit was 2)


def _ask(group: Group, k: int, target: str) -> socket.socket:
    """`POST /target` sent to worker k's private HTTP without the peer header: the group's
    request, made in that worker first (a client's on the shared port lands in any)."""
    host, _, port = group.private_http(k).rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.sendall(b"POST /%s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" % target.encode())
    return sock


def _status(sock: socket.socket, timeout: float) -> int | None:
    """The answer's status, or None when none came within `timeout`."""
    sock.settimeout(timeout)
    try:
        head = sock.recv(4096)
    except TimeoutError:
        return None
    return int(head.split(b" ", 2)[1])


def _gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie not yet reaped has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _depths(stats: dict, topic: str) -> dict[str, int]:
    """`topic`'s depth and its channels' in a /stats document (absent: no such topic)."""
    found = {}
    for t in stats["topics"] or ():
        if t["topic_name"] == topic:
            found[topic] = t["depth"]
            found.update({c["channel_name"]: c["depth"] for c in t["channels"] or ()})
    return found


@pytest.mark.parametrize(
    ("target", "after"),
    [
        # the topic went with its channel: the new message waits in the topic made anew
        ("topic/delete?topic=t", {"t": 1}),
        ("channel/empty?topic=t&channel=c", {"t": 0, "c": 1}),
    ],
    ids=["delete", "empty"],
)
def test_a_change_waits_for_a_stopped_peer(
    group: Group, target: str, after: dict[str, int]
) -> None:
    group.start()
    url = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{url}/topic/create?topic=t")[0] == 200
    assert http_post(f"{url}/channel/create?topic=t&channel=c")[0] == 200
    for k in (0, 1):
        with group.pin(k) as pub:
            pub.pub("t", b"before")
    peer = group.pids()[1]
    os.kill(peer, signal.SIGSTOP)
    try:
        with closing(_ask(group, 0, target)) as asked:
            # left out after 2 s, worker 1 made the change when it woke, after the publish below
            assert _status(asked, STOPPED) is None, "answered while worker 1 had not made it"
            os.kill(peer, signal.SIGCONT)
            assert _status(asked, WAIT) == 200
    finally:
        os.kill(peer, signal.SIGCONT)
    assert "group: waiting for worker 1 (" in group.log_text()
    with group.pin(1) as pub:
        pub.pub("t", b"after")  # after the answer: one nsqd keeps it
    assert _depths(http_json(f"{url}/stats?format=json&topic=t"), "t") == after
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(10)
        assert sub.message()[1] == b"after"


def test_a_peer_killed_while_waited_for_makes_the_change_at_its_start(group: Group) -> None:
    """Worker 1 stopped for good: the watchdog kills it after --worker-timeout, and the
    group's answer comes once the change is in its worker-1.missed (or asked of it again,
    started anew). An empty went to a surely down peer alone, so this one's messages came
    back with its start. A client that gives up meanwhile (here the delete's) cancels
    nothing: the change is made in every worker all the same."""
    group.start("--mem-queue-size=0", "--worker-timeout=2s")  # on disk: a kill -9 keeps it
    url = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{url}/topic/create?topic=t")[0] == 200
    assert http_post(f"{url}/channel/create?topic=t&channel=c")[0] == 200
    with group.pin(1) as pub:
        pub.pub("t", b"before")
        pub.pub("u", b"before")
    wanted = {"t": ["c"], "u": []}
    wait_until(lambda: _on_disk(group, 1) == wanted, WAIT, "worker 1's nsqd.dat")
    peer, listened = group.pids()[1], group.listened(1)
    os.kill(peer, signal.SIGSTOP)
    try:
        with closing(_ask(group, 0, "topic/delete?topic=u")):
            waiting = "waiting for worker 1 ("

            def waited() -> bool:
                return waiting in group.log_text() and "/topic/delete" in group.log_text()

            wait_until(waited, WAIT, "worker 0 waiting for worker 1")
        # the delete's client gave up; the empty's waits for its answer
        with closing(_ask(group, 0, "channel/empty?topic=t&channel=c")) as asked:
            assert _status(asked, START_TIMEOUT) == 200
            assert _gone(peer), "answered while worker 1 lived, and had not made the empty"
    finally:
        if not _gone(peer):
            os.kill(peer, signal.SIGCONT)
    wait_until(lambda: group.listened(1) > listened, START_TIMEOUT, "worker 1 back")

    def made() -> dict[str, int]:
        stats = group.worker_stats(1)
        return {**_depths(stats, "t"), **_depths(stats, "u")}

    wait_until(lambda: made() == {"t": 0, "c": 0}, WAIT, "the delete and the empty made")
    with group.pin(1) as pub:
        pub.pub("t", b"after")
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(10)
        assert sub.message()[1] == b"after"


def test_a_create_a_delete_overtook_is_not_made_late(group: Group) -> None:
    """A create asked while a peer was stopped is answered without it (2 s); a delete of the
    same queue asked after that answer waits for the peer, which, woken, may serve the
    delete first and the create last (its tasks run in any order). That create, stamped
    before the delete, must make nothing: it made the channel again in that worker alone,
    filling with messages nobody read. Here the late create is sent as the peer's fan-out
    sends it (stamped by the same CLOCK_MONOTONIC), after the delete, to worker 1."""
    group.start()
    url = f"http://127.0.0.1:{group.http}"
    for topic in ("t", "u"):
        assert http_post(f"{url}/topic/create?topic={topic}")[0] == 200
        assert http_post(f"{url}/channel/create?topic={topic}&channel=c")[0] == 200
    asked = time.monotonic()  # when the late creates were asked, before the deletes
    assert http_post(f"{url}/channel/delete?topic=t&channel=c")[0] == 200
    assert http_post(f"{url}/topic/delete?topic=u")[0] == 200
    for target in ("channel/create?topic=t&channel=c", "topic/create?topic=u"):
        assert group.post(1, target, stamp=asked) == 200  # served, and overruled
    assert group.post(1, "channel/create?topic=u&channel=c", stamp=asked) == 200
    stats = group.worker_stats(1)
    assert (_depths(stats, "t"), _depths(stats, "u")) == ({"t": 0}, {})
    # one asked after the deletes is made, as one nsqd makes it
    for target in ("topic/create?topic=u", "channel/create?topic=u&channel=c"):
        assert group.post(1, target, stamp=time.monotonic()) == 200
    assert _depths(group.worker_stats(1), "u") == {"u": 0, "c": 0}


def test_a_pause_older_than_a_delete_leaves_the_queue_made_since_alone(group: Group) -> None:
    """A pause word asked before a channel was deleted and made again reaches a peer late:
    the channel it paused is gone, and the one made since is unpaused in the group, so it
    stays unpaused there (it was paused in that worker alone, holding its messages). A new
    topic has its own guard (new_topics.py: unpaused since made)."""
    group.start()
    url = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{url}/topic/create?topic=t")[0] == 200
    assert http_post(f"{url}/channel/create?topic=t&channel=c")[0] == 200
    asked = time.monotonic()
    assert http_post(f"{url}/channel/delete?topic=t&channel=c")[0] == 200
    assert http_post(f"{url}/channel/create?topic=t&channel=c")[0] == 200
    assert group.post(1, "channel/pause?topic=t&channel=c", stamp=asked) == 200
    (topic,) = group.worker_stats(1)["topics"]
    assert [c["paused"] for c in topic["channels"]] == [False]
    assert "pause made while this worker was down" not in group.log_text()


def test_a_stale_pause_word_takes_its_pending_line_with_it(group: Group) -> None:
    """A pause asked while worker 1 hung: its asker's wait ran out and it wrote the word down
    in worker-1.missed, but worker 1, woken, had served an unpause asked after it first (its
    requests run in any order), so the line came after that unpause dropped the lines of its
    kind. The pause's request then reaches worker 1: older than its last change, it is answered
    as served and changes nothing, and its line must go with it: left, worker 1's next start
    (here after a kill -9) paused the channel again in that worker alone, holding its
    messages there while the group said unpaused."""
    group.start("--mem-queue-size=0")
    url = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{url}/topic/create?topic=t")[0] == 200
    assert http_post(f"{url}/channel/create?topic=t&channel=c")[0] == 200
    asked = time.monotonic()  # when the pause was asked
    assert http_post(f"{url}/channel/unpause?topic=t&channel=c")[0] == 200  # later, served
    line = group.data / "worker-1.missed"
    missed.record(str(line), ("pause", "t", "c"))  # the pause's asker, its wait run out
    assert group.post(1, "channel/pause?topic=t&channel=c", stamp=asked) == 200  # overruled
    assert not line.exists(), missed.read(str(line))
    wait_until(lambda: _on_disk(group, 1) == {"t": ["c"]}, WAIT, "worker 1's nsqd.dat")
    listened = group.listened(1)
    os.kill(group.pids()[1], signal.SIGKILL)
    wait_until(lambda: group.listened(1) > listened, START_TIMEOUT, "worker 1 back")
    (topic,) = group.worker_stats(1)["topics"]
    assert [c["paused"] for c in topic["channels"]] == [False]
    assert "pause made while this worker was down" not in group.log_text()
