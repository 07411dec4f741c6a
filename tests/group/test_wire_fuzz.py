"""The seeded V2 TCP differential fuzz of tests/e2e/test_wire_fuzz.py against a group: the same
command sequences go to ours started with `--workers=2` and to the Go nsqd v1.3.0, and every
frame each connection gets must render alike (docs/workers.md: one address behaves as one
nsqd). Connection `a` is pinned to worker 0 and `b` to worker 1 (each worker's private V2 link,
from worker-K.link), so what one publishes and the other consumes crosses a pull link, and a
FIN, REQ or TOUCH of a message that came over the link acts where it is held.

The one-process fuzz's window (wire_fuzz_run.IDLE_S: no frame for 50 ms after a step) also
covers a delivery that crosses workers (a few ms, docs/workers.md). What differs by design is
which message comes first (docs/workers.md: "order across partitions": a consumer gets its own
worker's messages and its peer's as the pull link brings them, one nsqd in publish order), so
a delivery is compared by its attempts alone, and the messages of one step in either order:
the count of deliveries, their attempts, every answer (a FIN, REQ or TOUCH of a held message
included: ids masked), every error and close must match. Seeds 0-239 run: 3 differ, each by
that order alone (57, 211, 234: a consumer with one slot free after a REQ with no delay gets
the REQ'd message, attempts 2, from its own worker where the Go nsqd gives the message a peer
partition holds, attempts 1, which came first into its one queue).

NSQD_GROUP_WIRE_FUZZ_SEEDS=start:stop runs other seeds."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from conformance import daemons
from tests.e2e.wire_fuzz_ops import FLAGS, sequence
from tests.e2e.wire_fuzz_run import Run, _Conn, compare

from .conftest import Group

_RANGE = os.environ.get("NSQD_GROUP_WIRE_FUZZ_SEEDS", "0:6")
SEEDS = range(*map(int, _RANGE.split(":")))
LENGTH = 40
WORKER_OF = {"a": 0, "b": 1}  # each fuzz connection's worker


class PinnedRun(Run):
    """A Run whose connections each open to their own worker's private link."""

    def __init__(self, links: dict[str, tuple[str, int]]) -> None:
        super().__init__(links["a"])
        self.links = links

    async def _open(self, nursery: trio.Nursery, name: str) -> _Conn:
        self.addr = self.links[name]
        return await super()._open(nursery, name)


class Unordered(Run):
    """Renders a run with each delivery's id and body masked and the deliveries of one
    connection in one step sorted: which message comes first is the partitions' choice."""

    def rendered(self) -> list[str]:
        lines = [_ID.sub("$id", _BODY.sub("", line)) for line in super().rendered()]
        return sorted(lines, key=lambda line: _order(lines, line))


class PinnedUnordered(PinnedRun, Unordered):
    pass


_BODY = re.compile(r" ts=ok body=.*$")
_ID = re.compile(r"\$id\d+")


def _order(lines: list[str], line: str) -> tuple[int, str]:
    """A line's place: where its connection's step begins, then its text for a message (so a
    step's messages sort among themselves) and its place for anything else."""
    head = line.split(": ", 1)[0]
    first = next(i for i, other in enumerate(lines) if other.split(": ", 1)[0] == head)
    return (first, line if ": message " in line else f"{lines.index(line):08d}")


async def _run_both(ref: tuple[str, int], links: dict[str, tuple[str, int]], steps) -> dict:
    runs = {"reference": Unordered(ref), "ours": PinnedUnordered(links)}
    async with trio.open_nursery() as nursery:
        for r in runs.values():
            nursery.start_soon(r.run, steps)
    return runs


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Group, daemons.Daemon]]:
    group = Group(Path(tmp_path_factory.mktemp("group-wire-fuzz"))).start(*FLAGS)
    ref = daemons.start("reference", FLAGS)
    try:
        yield group, ref
    finally:
        log = group.log_text()
        alive = ref.alive()
        ref.stop()
        status = group.stop()
    assert alive and status in (0, -signal.SIGTERM), f"exit {status}:\n{log[-3000:]}"


def test_sequences_answer_alike_across_workers(pair: tuple[Group, daemons.Daemon]) -> None:
    group, ref = pair
    links = {name: ("127.0.0.1", group.link(k)) for name, k in WORKER_OF.items()}
    reports = []
    for seed in SEEDS:
        steps = sequence(seed, LENGTH)
        print(f"group wire fuzz seed {seed} ({len(steps)} steps)")
        report = compare(seed, steps, trio.run(_run_both, ref.addr, links, steps))
        if report:
            reports.append(report)
    assert not reports, "\n\n".join(reports)
