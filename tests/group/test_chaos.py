"""kill -9 at a seeded moment of mixed traffic in a `--workers=2` group: nothing acknowledged
is lost (docs/workers.md: "kill -9 of one worker or of the whole group: what nsqd would keep").

tests/durability/test_chaos.py's seeded traffic, with its publishers pinned to both workers
(each step picks one; the shared HTTP port lands /pub and /mpub in either) and its consumer
pinned to worker 1, so what worker 0 takes crosses the pull link. After a seeded number of
steps one of three is killed with SIGKILL: the consumer's worker ("holder") or the whole group
(supervisor and every worker), the consumer quiesced first as in the one-nsqd test; or worker
0 ("peer") in the middle of the traffic, which goes on once the supervisor started it again.
Then consumers in both workers drain the channel (reading whichever has a frame, their own
msg_timeout long: what they hold never times out, so a message counted twice was two copies in
the daemons). What is owed is what one nsqd would keep:
with --mem-queue-size=0, every acknowledged message that no consumer had received and that was
not deferred (held in memory; for "peer", where the consumer's worker lives, every one not
FIN'd but what worker 0 held deferred); with --durable-inflight --sync-every=1, every
acknowledged one not FIN'd, and none whose FIN was answered for comes back; a message comes
twice only where it was moved across the pull link at the kill (docs/workers.md, What
survives): one of worker 0's (its id), published before the kill, twice at most, under one
id. The seed is in the
test's name (the traffic is seeded, the daemons' timing is not: a replay is close, not
exact)."""

from __future__ import annotations

import os
import random
import select
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable

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
    fin_received,
)
from tests.ops.conftest import START_TIMEOUT, wait_until

from .conftest import Group

CONSUMER = 1  # the traffic's consumer's worker: worker 0's messages cross the pull link
CASES = (("peer", 7), ("holder", 1234), ("group", 11))  # (what is killed, seed)


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
    with its own pipeline of unanswered publishes; what was DPUB'd is kept per worker."""

    def __init__(self, group: Group, rng: random.Random) -> None:
        self.daemon = daemon = Pinned(group, CONSUMER)
        super().__init__(daemon, rng)  # type: ignore[arg-type]
        self.pubs = [daemon.client(0), self.pub]
        self.pipelines: list[list[list[bytes]]] = [[], self.unanswered]
        self.deferred_in: list[set[bytes]] = [set(), set()]

    def step(self) -> None:
        k = self.rng.randrange(2)
        self.pub, self.unanswered = self.pubs[k], self.pipelines[k]
        first = self.seq
        super().step()
        self.deferred_in[k] |= {b"m-%06d" % i for i in range(first, self.seq)} & self.deferred

    def reconnect(self, k: int) -> None:
        """A new connection to worker k (started again): the old one's unanswered publishes
        were never acknowledged, and what it had deferred in memory is gone."""
        self.pubs[k].close()
        self.pubs[k] = self.daemon.client(k)
        self.pipelines[k] = []
        self.deferred_in[k] = set()

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


Ids = defaultdict[bytes, set[bytes]]  # body -> the ids it came under
DRAIN_TIMEOUT_MS = 60_000  # the drain's msg_timeout: what it holds never times out meanwhile


def drain(group: Group, wanted: set[bytes]) -> tuple[Counter[bytes], Ids]:
    """FIN what consumers in both workers get until `wanted` all came (deferred ones within
    their delays), then a quiet second for what should not have come; a FIN refused is
    allowed (a copy of a message delivered again under its id: at least once, as in nsqd).
    Each reads as soon as it has a frame: a wait of 20 ms on an idle one before looking at
    the other read ~50 messages a second, and one left unread past --msg-timeout=1s came
    again (80-93 messages counted twice in 4 of 7 runs of peer seeds 7 and 11, none in 28 runs
    of the three kills after). Their msg_timeout is the drain's."""
    got: Counter[bytes] = Counter()
    ids: Ids = defaultdict(set)
    conns = [helpers.Client((helpers.HOST, group.link(k))) for k in (0, 1)]
    try:
        for conn in conns:
            conn.identify(msg_timeout=DRAIN_TIMEOUT_MS)
            conn.sub(TOPIC, CHANNEL, rdy=200)
        end = time.monotonic() + 30
        idle = time.monotonic() + 5  # nothing for that long: the rest is lost
        while time.monotonic() < min(end, idle):
            for conn in _readable(conns, 0.05):
                frame = conn.read_frame(1.0)
                if frame.frame_type == FrameType.MESSAGE:
                    msg = decode_message(frame.data)
                    ids[msg.body].add(msg.id)
                if fin_received(conn, frame, got):
                    idle = time.monotonic() + 5
            if wanted <= set(got):
                end = min(end, time.monotonic() + 1.0)
    finally:
        for conn in conns:
            conn.close()
    return got, ids


def _readable(conns: list[helpers.Client], timeout: float) -> list[helpers.Client]:
    """The connections with a frame decoded or bytes to read (waiting up to `timeout`)."""
    ready = [conn for conn in conns if conn.pending]
    if ready:
        return ready
    socks = select.select([conn.sock for conn in conns], [], [], timeout)[0]
    return [conn for conn in conns if conn.sock in socks]


def twice_only_across_the_link(got: Counter, ids: Ids, before_kill: int, node0: int) -> None:
    """--durable-inflight: every message came under one id, and one that came twice was
    worker 0's (its id's node), published before the kill, moved across the link at it."""
    every = [i for seen in ids.values() for i in seen]
    assert all(len(seen) == 1 for seen in ids.values()), "a message came under two ids"
    assert len(set(every)) == len(every), "two messages came under one id"
    twice = sorted(body for body, n in got.items() if n > 1)
    assert all(got[body] == 2 for body in twice), f"more than twice: {twice[:10]}"
    after = [body for body in twice if int(body[2:]) >= before_kill]
    assert not after, f"{len(after)} published after the kill came twice: {after[:10]}"
    owners = {body: (int(next(iter(ids[body])), 16) >> 12) & 0x3FF for body in twice}
    peers = [body for body, node in owners.items() if node != node0]
    assert not peers, f"{len(peers)} of worker 1's messages came twice: {peers[:10]}"


def run(group: Group, flags: tuple[str, ...], what: str, seed: int) -> tuple[set[bytes], Counter]:
    """The seeded traffic, the kill, the drain: what was owed, and what came."""
    rng = random.Random(seed)
    group.start(*flags)
    pinned = Pinned(group, 0)
    assert pinned.request("POST", f"/topic/create?topic={TOPIC}")[0] == 200
    assert pinned.request("POST", f"/channel/create?topic={TOPIC}&channel={CHANNEL}")[0] == 200
    status, node = pinned.request("GET", "/config/id")  # worker k's ids carry node + k
    assert status == 200
    traffic = GroupTraffic(group, rng)
    for _ in range(rng.randint(60, 120)):
        traffic.step()
    durable = "--durable-inflight" in flags
    kill = KILLS[what]
    before_kill = traffic.seq
    owed = kill(group, traffic, flags)
    traffic.close()
    wanted = owed()
    got, ids = drain(group, wanted)
    print(
        f"{kill.__name__} seed {seed}: acknowledged {len(traffic.acked)}, received before the kill "
        f"{sum(traffic.received.values())}, FIN'd {len(traffic.fin_answered)}, owed "
        f"{len(wanted)}, delivered after {sum(got.values())}"
    )
    assert set(got) <= {b"m-%06d" % i for i in range(traffic.seq)}
    if durable:
        back = sorted(traffic.fin_answered & set(got))
        assert traffic.fin_answered, "too little traffic to test anything"
        assert not back, f"{len(back)} FIN'd (answered for) came back: {back[:10]}"
        twice_only_across_the_link(got, ids, before_kill, int(node))
    return wanted, got


Owed = Callable[[], set[bytes]]


def kill_holder(group: Group, traffic: GroupTraffic, flags: tuple[str, ...]) -> Owed:
    """The consumer's worker (or the whole group) killed: what one nsqd would keep is owed
    (the consumer quiesced first without --durable-inflight, as in the one-nsqd test)."""
    durable = "--durable-inflight" in flags
    if not durable:
        traffic.quiesce()
    return lambda: acknowledged_owed(traffic, durable=durable)


def kill_peer(group: Group, traffic: GroupTraffic, flags: tuple[str, ...]) -> Owed:
    """Worker 0, the consumer's peer, killed mid-traffic (no quiesce), and the traffic goes on
    after its restart (the pull link connects again): the consumer's worker lives, so every
    acknowledged message not FIN'd is owed, received ones included (moved into worker 1 before
    delivery), but what worker 0 had deferred in memory without --durable-inflight."""
    lost = set() if "--durable-inflight" in flags else set(traffic.deferred_in[0])
    kill_one(group, 0)
    traffic.reconnect(0)
    for _ in range(traffic.rng.randint(20, 60)):
        traffic.step()
    return lambda: {b for b in traffic.acked if b not in traffic.fin_sent} - lost


def kill_group(group: Group, traffic: GroupTraffic, flags: tuple[str, ...]) -> Owed:
    owed = kill_holder(group, traffic, flags)
    group.kill()
    group.start(*flags)
    return owed


def kill_consumers_worker(group: Group, traffic: GroupTraffic, flags: tuple[str, ...]) -> Owed:
    owed = kill_holder(group, traffic, flags)
    kill_one(group, CONSUMER)
    return owed


KILLS: dict[str, Callable[[Group, GroupTraffic, tuple[str, ...]], Owed]] = {
    "peer": kill_peer,  # worker 0, its messages pulled by the consumer's worker
    "holder": kill_consumers_worker,  # worker 1, the consumer's
    "group": kill_group,  # the supervisor and every worker
}


@pytest.mark.parametrize(("what", "seed"), CASES)
def test_kill_9_in_a_group_loses_no_acknowledged_message(
    group: Group, what: str, seed: int
) -> None:
    _none_lost(*run(group, PLAIN, what, seed), what, seed)


@pytest.mark.parametrize(("what", "seed"), CASES)
def test_kill_9_in_a_group_with_durable_inflight_gives_back_everything_not_finished(
    group: Group, what: str, seed: int
) -> None:
    _none_lost(*run(group, DURABLE, what, seed), what, seed)


def _none_lost(owed: set[bytes], got: Counter, what: str, seed: int) -> None:
    lost = sorted(owed - set(got))
    assert len(owed) > 100, "too little traffic to test anything"
    assert not lost, f"{what} seed {seed}: {len(lost)} acknowledged messages lost: {lost[:10]}"
