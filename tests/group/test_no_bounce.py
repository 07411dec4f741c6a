"""A message moved into a worker over a pull link stays there (--workers): it goes to that
worker's own consumers, never out again to a peer's link (pull.py, Channel.put_moved).

With consumers of one channel in both workers, worker 1 pulled a message of worker 0's and
handed it, in the same pass, to worker 0's own pull link among its ready consumers; worker 0
then took its message back under the same id before worker 1's FIN of the first copy had
arrived, and refused that FIN (`client does not own message`, `ID not in flight`: 85 refusals
in 4,000 messages, logged as errors in normal operation), with two copies of one id alive.
Here every message is published in worker 0 and worker 1's consumer has room for all it
pulls: 822-1,168 of 4,000 went back to worker 0 before, none after."""

from __future__ import annotations

import select
import time

from nsqd.group.identity import LINK_AGENT
from protocol.v2 import FrameType, decode_message
from tests.durability import helpers
from tests.ops.conftest import http_post, wait_until

from .conftest import Group

TOTAL = 4000
BATCH = 100
RDY = 2500  # worker 1's consumer has room for what its link moves: nothing queues there
REFUSED = ("does not own message", "not in flight")


def _link(group: Group, k: int) -> dict:
    """The peer's link among worker k's clients of t:c (its own stats)."""
    (topic,) = group.worker_stats(k, "&topic=t")["topics"]
    (channel,) = topic["channels"]
    links = [c for c in channel["clients"] if c["user_agent"] == LINK_AGENT]
    return links[0] if links else {"ready_count": 0}


def _link_ready(group: Group, k: int) -> bool:
    """Whether the peer's link asks worker k for messages of t:c."""
    return bool(_link(group, k)["ready_count"])


def test_a_moved_message_is_not_handed_back_to_a_peers_link(group: Group) -> None:
    group.start()
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?topic=t&channel=c")[0] == 200
    subs = [helpers.Client((helpers.HOST, group.link(k))) for k in (0, 1)]
    try:
        for sub in subs:
            sub.sub("t", "c", rdy=RDY)
        wait_until(lambda: all(_link_ready(group, k) for k in (0, 1)), 10, "both links")
        with helpers.Client((helpers.HOST, group.link(0))) as pub:  # every one in worker 0
            bodies = [b"%d" % i for i in range(TOTAL)]
            pub.mpub_many("t", [bodies[i : i + BATCH] for i in range(0, TOTAL, BATCH)])
        got: list[bytes] = []
        crossed = 0
        end = time.monotonic() + 30
        while len(got) < TOTAL and time.monotonic() < end:
            for j, sub in enumerate(subs):
                while sub.pending or select.select([sub.sock], [], [], 0)[0]:
                    frame = sub.read_frame(1.0)
                    assert frame.frame_type == FrameType.MESSAGE, frame
                    msg = decode_message(frame.data)
                    sub.fin(msg.id)
                    got.append(msg.body)
                    crossed += j  # consumed in worker 1: moved there from worker 0
            select.select([s.sock for s in subs], [], [], 0.05)
        assert sorted(got) == sorted(b"%d" % i for i in range(TOTAL))
    finally:
        for sub in subs:
            sub.close()
    time.sleep(0.3)  # the links' last FINs served
    # what worker 0 gave worker 1's link went to the consumer there, none of it back out to
    # worker 0's link (worker 1 had nothing of its own to give it)
    moved = [_link(group, k).get("message_count", 0) for k in (0, 1)]
    assert moved == [crossed, 0], f"moved out of worker 0, 1: {moved}; consumed in 1: {crossed}"
    log = group.log_text()
    refused = [line for line in log.splitlines() if any(r in line for r in REFUSED)]
    assert not refused, f"{len(refused)} FINs refused, e.g. {refused[:3]}"
