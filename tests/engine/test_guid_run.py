"""GUIDFactory.next_run: the ids next_ids would give (16 hex digits, strictly increasing on one
factory, node id in bits 12-21), as an IdRun within one time unit, a list past it."""

from __future__ import annotations

import random
from itertools import pairwise

from nsqd.engine.guid import GUIDFactory, IdRun


def test_runs_and_lists_continue_one_increasing_sequence() -> None:
    rng = random.Random(5)
    factory = GUIDFactory(17)
    seen: list[bytes] = []
    kinds = set()
    for _ in range(1000):
        n = rng.choice([1, 2, 200, 1000, 5000])
        got = factory.next_run(n) if rng.random() < 0.8 else factory.next_ids(n)
        kinds.add(type(got))
        items = list(got)
        assert len(got) == n and len(items) == n
        a, b = rng.randrange(n + 1), rng.randrange(n + 1)
        assert got[a:b] == items[a:b] and got[-1] == items[-1] and got[0] == items[0]
        step = rng.choice([2, 3, -1, -2])
        assert got[b:a:step] == items[b:a:step] and got[::step] == items[::step]
        seen += items
    assert kinds == {IdRun, list}  # one-unit runs, and batches that spill into the next unit
    values = [int(i, 16) for i in seen]
    assert all(len(i) == 16 and i == i.lower() for i in seen)
    assert all(x < y for x, y in pairwise(values))
    assert {(v >> 12) & 0x3FF for v in values} == {17}
