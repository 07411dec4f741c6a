"""kill -9 at a seeded moment of mixed traffic in a `--workers=2` group: every acknowledged
message one nsqd would keep comes back (docs/workers.md: "kill -9 of the whole group loses
nothing that one nsqd would keep"; a worker killed alone is started again by the supervisor and
its partition resumes).

The seeded traffic is tests/durability/test_chaos.py's (PUB, MPUB, DPUB, pipelined publishes
left unanswered, HTTP /pub and /mpub, a consumer that FINs most, REQs some and lets some time
out), with the publisher pinned to worker 0 and the consumer to worker 1, so what it consumes
came over the pull link, and HTTP on the shared port (either worker). Then a seeded kill: the
whole group (supervisor and workers, then started again), or one worker by its pid (the
supervisor starts it again); NSQD_GROUP_CHAOS_SEEDS=start:stop runs other seeds. What is owed
back is what one nsqd owes, counted as the one-process test counts it: with
--mem-queue-size=0 every acknowledged message the consumer had not received and that was not
deferred; with --durable-inflight --sync-every=1 every acknowledged one not FIN'd, and none
whose FIN was answered for comes back."""

from __future__ import annotations

import os
import random
import signal
import urllib.error
import urllib.request
from collections import Counter

import pytest

from tests.durability import helpers
from tests.durability.test_chaos import (
    CHANNEL,
    DURABLE,
    PLAIN,
    TOPIC,
    Traffic,
    acknowledged_owed,
    drain,
)
from tests.ops.conftest import START_TIMEOUT, wait_until

from .conftest import Group

KILLS = ("group", "worker 0", "worker 1")
_RANGE = os.environ.get("NSQD_GROUP_CHAOS_SEEDS")  # start:stop runs others, each kill in turn
CASES = (
    [(seed, KILLS[seed % 3]) for seed in range(*map(int, _RANGE.split(":")))]
    if _RANGE
    else [(7, "group"), (1234, "worker 0"), (99, "worker 1")]
)


class Pinned:
    """What Traffic and drain() use of a daemon, for a group: V2 clients pinned to the
    workers in `order` in turn (the first the publisher's, the second the consumer's), HTTP on
    the shared port."""

    def __init__(self, group: Group, order: list[int]) -> None:
        self.group, self.order = group, order
        self.clients = 0

    def client(self) -> helpers.Client:
        k = self.order[self.clients % len(self.order)]
        self.clients += 1
        return helpers.Client(("127.0.0.1", self.group.link(k)))

    def request(
        self, method: str, path: str, body: bytes | None = None, timeout: float = 5.0
    ) -> tuple[int, bytes]:
        url = f"http://127.0.0.1:{self.group.http}{path}"
        req = urllib.request.Request(url, data=body, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


def _kill(group: Group, what: str, flags: tuple[str, ...]) -> None:
    if what == "group":
        group.kill()
        group.start(*flags)
        return
    k = int(what.split()[1])
    before = group.pids()[k]
    os.kill(before, signal.SIGKILL)
    wait_until(lambda: group.pids()[k] != before, START_TIMEOUT, f"worker {k} started again")
    wait_until(lambda: group.link(k), START_TIMEOUT, f"worker {k}'s link")


def run(group: Group, flags: tuple[str, ...], seed: int, what: str) -> tuple[Traffic, Counter]:
    rng = random.Random(seed)
    group.start(*flags)
    daemon = Pinned(group, [0, 1])
    assert daemon.request("POST", f"/topic/create?topic={TOPIC}")[0] == 200
    assert daemon.request("POST", f"/channel/create?topic={TOPIC}&channel={CHANNEL}")[0] == 200
    traffic = Traffic(daemon, rng)  # type: ignore[arg-type]
    for _ in range(rng.randint(60, 120)):
        traffic.step()
    if "--durable-inflight" not in flags:
        traffic.quiesce()
    _kill(group, what, flags)
    traffic.pub.close()
    traffic.sub.close()
    durable = "--durable-inflight" in flags
    got = drain(Pinned(group, [rng.choice([0, 1])]), acknowledged_owed(traffic, durable=durable))  # type: ignore[arg-type]
    print(
        f"group seed {seed}, kill {what}: acknowledged {len(traffic.acked)}, received before "
        f"{sum(traffic.received.values())}, FIN'd {len(traffic.fin_answered)}, delivered after "
        f"{sum(got.values())}"
    )
    return traffic, got


@pytest.mark.parametrize(("seed", "what"), CASES)
def test_kill_9_in_a_group_loses_no_acknowledged_message(
    group: Group, seed: int, what: str
) -> None:
    traffic, got = run(group, PLAIN, seed, what)
    owed = acknowledged_owed(traffic, durable=False)
    lost = sorted(owed - set(got))
    assert len(owed) > 100, "too little traffic to test anything"
    assert not lost, f"seed {seed}: {len(lost)} acknowledged messages lost: {lost[:10]}"
    assert set(got) <= {b"m-%06d" % i for i in range(traffic.seq)}


@pytest.mark.parametrize(("seed", "what"), CASES)
def test_kill_9_in_a_group_with_durable_inflight_gives_back_everything_not_finished(
    group: Group, seed: int, what: str
) -> None:
    traffic, got = run(group, DURABLE, seed, what)
    owed = acknowledged_owed(traffic, durable=True)
    lost = sorted(owed - set(got))
    back = sorted(traffic.fin_answered & set(got))
    assert len(owed) > 100 and traffic.fin_answered, "too little traffic to test anything"
    assert not lost, f"seed {seed}: {len(lost)} acknowledged messages lost: {lost[:10]}"
    assert not back, f"seed {seed}: {len(back)} FIN'd (and answered for) came back: {back[:10]}"
