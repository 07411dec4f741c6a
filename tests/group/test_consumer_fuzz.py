"""A seeded fuzz of consumers of one channel in several workers of a group (`--workers=2`, some
seeds 3), checked against invariants rather than frames: where a message is delivered is the
group's choice, not Go's, so tests/group/test_wire_fuzz.py cannot cover consumers in several
workers at once (tests/group/fuzz_driver.py says what the steps do).

Along the way, at every delivery and every answer:
- a message comes under one id; its attempts only grow, and a message that comes again came
  after its REQ's delay or its timeout (a moved message keeps its attempts), never after a
  FIN of it succeeded; a DPUB'd one not before its delay; its first delivery has attempts 1
  (unless a consumer left since its publish: what was sent to it may have gone unread);
- a FIN succeeds once per message; a FIN, REQ or TOUCH of a message the consumer holds (in
  flight to it, its timeout not near) is never refused;
- a consumer is sent nothing while it holds its RDY's worth in flight (RDY 0: nothing), once
  a marker confirmed that RDY, and nothing once a marker confirmed the channel's pause.
At the end, after a drain where every consumer FINs everything: every published message was
FIN'd, the group's /stats show depth, in_flight and deferred 0 and message_count the number
published, and no worker logged a refused FIN of a link, an unexpected error or a traceback.

What NSQ does by design is allowed: a message comes again after its timeout, and a FIN or REQ
of it after that may be refused; a REQ'd message comes before older ones; under
--mem-queue-size=0 a DPUB that met a paused topic comes at the unpause, its delay lost (the
topic's disk queue keeps none; Go nsqd 1.3.0 the same).

NSQD_CONSUMER_FUZZ_SEEDS=start:stop (or 3,17) runs other seeds, each with 2 workers, and 3 for
every third seed; NSQD_CONSUMER_FUZZ_SECONDS the traffic's length (default 6)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ops.conftest import http_json, http_post

from .conftest import Group
from .fuzz_driver import CHANNEL, MSG_TIMEOUT, TOPIC, Fuzz

_GIVEN = os.environ.get("NSQD_CONSUMER_FUZZ_SEEDS", "1,3,4")  # every flag set, 3 workers
SEEDS = range(*map(int, _GIVEN.split(":"))) if ":" in _GIVEN else list(map(int, _GIVEN.split(",")))
SECONDS = float(os.environ.get("NSQD_CONSUMER_FUZZ_SECONDS", "6"))
MAX_STEPS = 2000
DRAIN = 20.0  # s: the drain's limit (a timeout, a REQ's and a DPUB's delay, on a busy host)
LOGGED = ("does not own message", "not in flight", "Traceback", "unexpected error")


# a seed's flags besides --msg-timeout: every message through the disk queues (a moved one
# written in the pulling worker before its FIN), in-flight and deferred state journaled
FLAGS = ((), ("--mem-queue-size=0",), ("--durable-inflight",))


def workers_for(seed: int) -> int:
    return 3 if seed % 3 == 0 else 2


def flags_for(seed: int) -> tuple[str, ...]:
    return FLAGS[seed // 2 % len(FLAGS)]


@pytest.fixture(params=SEEDS, ids=lambda s: f"seed{s}-w{workers_for(s)}{''.join(flags_for(s))}")
def sized(request: pytest.FixtureRequest, workdir: Path) -> Iterator[tuple[Group, int]]:
    """A group of the seed's size, stopped cleanly at the end (as conftest's `group`)."""
    group = Group(workdir, workers_for(request.param))
    yield group, request.param
    status = group.stop()
    assert status in (None, 0, -signal.SIGTERM), group.log_text()[-3000:]


def _stats(group: Group) -> tuple[dict, dict]:
    stats = http_json(f"http://127.0.0.1:{group.http}/stats?format=json&topic={TOPIC}")
    (topic,) = stats["topics"]
    (channel,) = topic["channels"]
    return topic, channel


def _settled(group: Group, published: int) -> list[str]:
    """The group's /stats once its channel is empty (a few tries: a worker's figures lag by
    the link's last FINs), as what differs from an empty channel that took `published`."""
    for _ in range(30):
        topic, channel = _stats(group)
        wrong = [
            f"{name} {value}"
            for name, value in (
                ("depth", channel["depth"]),
                ("in_flight", channel["in_flight_count"]),
                ("deferred", channel["deferred_count"]),
                ("message_count", channel["message_count"] - published),
                ("topic message_count", topic["message_count"] - published),
                ("topic depth", topic["depth"]),
            )
            if value
        ]
        if not wrong:
            return []
        time.sleep(0.1)
    return wrong


def test_consumers_in_several_workers_keep_the_invariants(sized: tuple[Group, int]) -> None:
    group, seed = sized
    group.start(f"--msg-timeout={int(MSG_TIMEOUT * 1000)}ms", *flags_for(seed))
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic={TOPIC}")[0] == 200
    assert http_post(f"{base}/channel/create?topic={TOPIC}&channel={CHANNEL}")[0] == 200
    fuzz = Fuzz(group, seed, group.count, "--mem-queue-size=0" in flags_for(seed))
    fuzz.node = int(http_json(f"{base}/config/id"))
    try:
        for k in fuzz.rng.sample(range(group.count), 2):  # at least two workers
            fuzz.connect(k)
        for _ in range(fuzz.rng.randint(0, 2)):
            fuzz.connect(fuzz.rng.randrange(group.count))
        fuzz.run(SECONDS, MAX_STEPS)
        fuzz.drain(DRAIN)
        unfinished = fuzz.unfinished()
        if unfinished:
            fuzz.violation(f"{len(unfinished)} never FIN'd, e.g. {unfinished[:5]}")
        wrong = _settled(group, len(fuzz.published))
        if wrong:
            fuzz.violation(f"/stats at the end: {', '.join(wrong)}")
    finally:
        fuzz.close()
    logged = [line for line in group.log_text().splitlines() if any(s in line for s in LOGGED)]
    if logged:
        fuzz.violation(f"{len(logged)} lines logged, e.g. {logged[:3]}")
    print(f"seed {seed}: published {len(fuzz.published)}, {dict(sorted(fuzz.counts.items()))}")
    assert not fuzz.errors, fuzz.report()
    assert len(fuzz.published) > 50, "too little traffic to test anything"
