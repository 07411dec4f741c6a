"""kill -9 at a seeded moment of mixed traffic in a `--workers=2` group: nothing acknowledged
is lost (docs/workers.md: "kill -9 of one worker or of the whole group: what nsqd would keep").

tests/durability/test_chaos.py's seeded traffic, with its publishers pinned to both workers
(each step picks one; the shared HTTP port lands /pub and /mpub in either) and its consumer
pinned to worker 1, so what worker 0 takes crosses the pull link. After a seeded number of
steps either one worker (seeded) is killed by its pid and the supervisor starts it again, or
the whole group (supervisor and every worker) is killed and started again; then consumers in
both workers drain the channel. What is owed is counted as the one-nsqd test counts it: with
--mem-queue-size=0 every acknowledged message that no consumer had received and that was not
deferred (held in memory); with --durable-inflight --sync-every=1 every acknowledged one not
FIN'd, and none whose FIN was answered for comes back. The seed is in the test's name."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter

import pytest

from protocol.v2 import FrameType, decode_message
from tests.durability import helpers
from tests.durability.test_chaos import (
    CHANNEL,
    DURABLE,
    PLAIN,
    TOPIC,
    Traffic,
    acknowledged_owed,
)
from tests.ops.conftest import START_TIMEOUT, wait_until

from .conftest import Group

CONSUMER = 1  # the traffic's consumer's worker: worker 0's messages cross the pull link
SEEDS = (("worker", 7), ("group", 7), ("worker", 1234), ("group", 1234))


class Pinned:
    """The Daemon face Traffic uses: V2 connections pinned to one worker, HTTP on the group's
    shared port (either worker answers)."""

    def __init__(self, group: Group, k: int) -> None:
        self.group, self.k = group, k
        self.http_port = group.http

    def client(self, k: int | None = None) -> helpers.Client:
        return helpers.Client((helpers.HOST, self.group.link(self.k if k is None else k)))

    request = helpers.Daemon.request  # uses self.http_port alone


class GroupTraffic(Traffic):
    """Traffic whose publishes go to a seeded worker at each step, each worker's connection
    with its own pipeline of unanswered publishes."""

    def __init__(self, group: Group, rng: random.Random) -> None:
        daemon = Pinned(group, CONSUMER)
        super().__init__(daemon, rng)  # type: ignore[arg-type]
        self.pubs = [daemon.client(0), self.pub]
        self.pipelines: list[list[list[bytes]]] = [[], self.unanswered]

    def step(self) -> None:
        k = self.rng.randrange(2)
        self.pub, self.unanswered = self.pubs[k], self.pipelines[k]
        super().step()

    def close(self) -> None:
        for conn in (*self.pubs, self.sub):
            conn.close()


def kill_one(group: Group, k: int) -> None:
    """SIGKILL worker k and wait until the supervisor started it again and it listens."""
    before, listened = group.pids()[k], group.listened(k)
    os.kill(before, signal.SIGKILL)
    wait_until(lambda: group.pids()[k] != before, START_TIMEOUT, f"worker {k} started again")
    wait_until(lambda: group.listened(k) > listened, START_TIMEOUT, f"worker {k} listening")
    wait_until(lambda: group.link(k), START_TIMEOUT, f"worker {k}'s link")
    assert f"worker {k} exited (signal 9)" in group.log_text()


def drain(group: Group, wanted: set[bytes]) -> Counter[bytes]:
    """FIN what consumers in both workers get until `wanted` all came (deferred ones within
    their delays), then a quiet second for what should not have come; a FIN refused is
    allowed (a message read again after the kill, under the id of a copy delivered too: at
    least once, as in nsqd)."""
    got: Counter[bytes] = Counter()
    conns = [helpers.Client((helpers.HOST, group.link(k))) for k in (0, 1)]
    try:
        for conn in conns:
            conn.sub(TOPIC, CHANNEL, rdy=200)
        end = time.monotonic() + 30
        idle = time.monotonic() + 5  # nothing for that long: the rest is lost
        while time.monotonic() < min(end, idle):
            for conn in conns:
                try:
                    frame = conn.read_frame(0.02)
                except TimeoutError:
                    continue
                if frame.frame_type == FrameType.MESSAGE:
                    msg = decode_message(frame.data)
                    got[msg.body] += 1
                    conn.fin(msg.id)
                    idle = time.monotonic() + 5
                else:
                    assert b"E_FIN_FAILED" in frame.data, frame
            if wanted <= set(got):
                end = min(end, time.monotonic() + 1.0)
    finally:
        for conn in conns:
            conn.close()
    return got


def run(group: Group, flags: tuple[str, ...], what: str, seed: int) -> tuple[Traffic, Counter]:
    rng = random.Random(seed)
    group.start(*flags)
    base = f"/topic/create?topic={TOPIC}"
    pinned = Pinned(group, 0)
    assert pinned.request("POST", base)[0] == 200
    assert pinned.request("POST", f"/channel/create?topic={TOPIC}&channel={CHANNEL}")[0] == 200
    traffic = GroupTraffic(group, rng)
    for _ in range(rng.randint(60, 120)):
        traffic.step()
    durable = "--durable-inflight" in flags
    if not durable:
        traffic.quiesce()
    if what == "worker":
        kill_one(group, rng.randrange(2))
    else:
        group.kill()
        group.start(*flags)
    traffic.close()
    wanted = acknowledged_owed(traffic, durable=durable)
    got = drain(group, wanted)
    print(
        f"{what} seed {seed}: acknowledged {len(traffic.acked)}, received before the kill "
        f"{sum(traffic.received.values())}, FIN'd {len(traffic.fin_answered)}, owed "
        f"{len(wanted)}, delivered after {sum(got.values())}"
    )
    return traffic, got


@pytest.mark.parametrize(("what", "seed"), SEEDS)
def test_kill_9_in_a_group_loses_no_acknowledged_message(
    group: Group, what: str, seed: int
) -> None:
    traffic, got = run(group, PLAIN, what, seed)
    owed = acknowledged_owed(traffic, durable=False)
    lost = sorted(owed - set(got))
    assert len(owed) > 100, "too little traffic to test anything"
    assert not lost, f"{what} seed {seed}: {len(lost)} acknowledged messages lost: {lost[:10]}"
    assert set(got) <= {b"m-%06d" % i for i in range(traffic.seq)}


@pytest.mark.parametrize(("what", "seed"), SEEDS)
def test_kill_9_in_a_group_with_durable_inflight_gives_back_everything_not_finished(
    group: Group, what: str, seed: int
) -> None:
    traffic, got = run(group, DURABLE, what, seed)
    owed = acknowledged_owed(traffic, durable=True)
    lost = sorted(owed - set(got))
    back = sorted(traffic.fin_answered & set(got))
    assert len(owed) > 100 and traffic.fin_answered, "too little traffic to test anything"
    assert not lost, f"{what} seed {seed}: {len(lost)} acknowledged messages lost: {lost[:10]}"
    assert not back, f"{what} seed {seed}: {len(back)} FIN'd (answered for) came back: {back[:10]}"
