"""--durable-inflight in a group: a message on the pull link when its worker is killed with
SIGKILL comes twice, under one id, and nothing else does (docs/workers.md, What survives).

Worker 0 journals the message in flight to worker 1's link before it leaves; worker 1, stopped
(SIGSTOP) with the message unread in its socket, moves it into its own channel after worker 0
died, and its FIN reaches no one. Worker 0's journal gives the message back at its restart
and the link brings it over again: the consumer gets it twice, same id, same body, the second
with one more attempt. At least once, as NSQ promises: neither worker can know whether the
other still has it. A message published in worker 1 meanwhile comes once."""

from __future__ import annotations

import os
import signal
import time

from protocol.v2 import FrameType, decode_message
from protocol.v2.message import DecodedMessage
from tests.durability import helpers
from tests.ops.conftest import START_TIMEOUT, http_post, wait_until

from .conftest import Group

FLAGS = ("--durable-inflight", "--msg-timeout=60s")  # a message back early: from a journal


def _channel(group: Group, k: int) -> dict:
    """Worker k's own stats of channel t:c."""
    (topic,) = group.worker_stats(k, "&topic=t")["topics"]
    (channel,) = topic["channels"]
    return channel


def _messages(conn: helpers.Client, seconds: float) -> list[DecodedMessage]:
    """Every message that arrives within `seconds`, each FIN'd."""
    got = []
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        try:
            frame = conn.read_frame(left)
        except TimeoutError:
            break
        assert frame.frame_type == FrameType.MESSAGE, frame
        msg = decode_message(frame.data)
        conn.fin(msg.id)
        got.append(msg)
    return got


def test_a_message_on_the_link_at_its_workers_kill_comes_twice_under_one_id(
    group: Group,
) -> None:
    group.start(*FLAGS)
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?topic=t&channel=c")[0] == 200  # in both workers
    with helpers.Client((helpers.HOST, group.link(1))) as sub:
        sub.sub("t", "c", rdy=10)
        linked = lambda: any(c["ready_count"] for c in _channel(group, 0)["clients"])  # noqa: E731
        wait_until(linked, 10, "worker 1's link asking worker 0 for messages")
        pids = group.pids()
        os.kill(pids[1], signal.SIGSTOP)
        try:
            with helpers.Client((helpers.HOST, group.link(0))) as pub:
                pub.pub("t", b"on the link")
            on_link = lambda: _channel(group, 0)["in_flight_count"] == 1  # noqa: E731
            wait_until(on_link, 10, "worker 0's message in flight to the link")
            os.kill(pids[0], signal.SIGKILL)
        finally:
            os.kill(pids[1], signal.SIGCONT)
        with helpers.Client((helpers.HOST, group.link(1))) as pub:
            pub.pub("t", b"in worker 1")
        wait_until(lambda: group.pids()[0] != pids[0], START_TIMEOUT, "worker 0 started again")
        got = _messages(sub, 5.0)
    on_link = [m for m in got if m.body == b"on the link"]
    assert len(on_link) == 2, got  # the link's copy, and the journal's after the restart
    assert on_link[0].id == on_link[1].id
    assert [m.attempts for m in on_link] == [1, 2]
    assert [m.body for m in got].count(b"in worker 1") == 1, got
    assert "JOURNAL(t:c): recovered 1 in flight" in group.log_text()
