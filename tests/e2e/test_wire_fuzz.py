"""A seeded differential fuzz of the V2 TCP protocol against the Go nsqd v1.3.0: the same
sequences of valid-framed commands (wire_fuzz_ops.py: IDENTIFY with odd fields, SUB, PUB, MPUB,
DPUB, RDY, FIN, REQ, TOUCH, NOP, CLS, AUTH, unknown commands, bad arities and values, on two
connections) go to both daemons, and every frame each returns must render alike
(wire_fuzz_run.py: responses and errors exactly, messages with id and timestamp masked, closes).

Fixed seeds keep it bounded (~16 s); NSQD_WIRE_FUZZ_SEEDS=start:stop runs others, and
`python -m tests.e2e.wire_fuzz_run --seeds 0:1000` many more."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import trio

from .wire_fuzz_ops import sequence
from .wire_fuzz_run import compare, run_both, start_pair

_RANGE = os.environ.get("NSQD_WIRE_FUZZ_SEEDS", "0:7")
SEEDS = range(*map(int, _RANGE.split(":")))
LENGTH = 40


@pytest.fixture(scope="module")
def pair() -> Iterator[dict[str, tuple[str, int]]]:
    started = start_pair()
    yield {t: d.addr for t, d in started.items()}
    dead = [f"{t}:\n{d.log_tail()}" for t, d in started.items() if not d.alive()]
    for d in started.values():
        d.stop()
    assert not dead, dead


def test_sequences_answer_alike(pair: dict[str, tuple[str, int]]) -> None:
    reports = []
    for seed in SEEDS:
        steps = sequence(seed, LENGTH)
        print(f"wire fuzz seed {seed} ({len(steps)} steps)")
        report = compare(seed, steps, trio.run(run_both, pair, steps))
        if report:
            reports.append(report)
    assert not reports, "\n\n".join(reports)
