"""Two admins asking opposite pause words of one queue at once, each of a different worker,
leave the group as one nsqd would: every worker paused, or every worker unpaused
(--workers; pause_clock.py: the newest word wins in every worker).

Each worker served its own word first and the peer's fan-out last, so the words crossed and
the group stayed split (25 of 40 such pairs on the 2-core VM before the words were stamped).
Each pair is asked of the two workers' private HTTP listeners without the peer header (a
client's request there answers for the group, as the shared port does; the test picks the
worker), released together by a barrier."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.ops.conftest import wait_until

from .conftest import Group

PAIRS = 12  # one split was enough to fail before: ~60% of pairs split
WAIT = 5.0


def _paused(group: Group, k: int, channel: str | None) -> bool | None:
    """Worker k's paused flag of topic t (or of its channel)."""
    for topic in group.worker_stats(k, "&topic=t")["topics"] or ():
        if channel is None:
            return topic["paused"]
        return next((c["paused"] for c in topic["channels"] if c["channel_name"] == channel), None)
    return None


@pytest.mark.parametrize("channel", [None, "c"], ids=["topic", "channel"])
def test_opposite_words_at_once_leave_the_group_as_one(workdir: Path, channel: str | None) -> None:
    group = Group(workdir, 2).start()
    try:
        kind, query = ("topic", "topic=t") if channel is None else ("channel", "topic=t&channel=c")
        assert group.post(0, "topic/create?topic=t", peer=False) == 200
        if channel is not None:
            assert group.post(0, f"channel/create?{query}", peer=False) == 200
        wait_until(lambda: all(_paused(group, k, channel) is False for k in (0, 1)), WAIT, "made")
        for i in range(PAIRS):
            words = ["pause", "unpause"][:: 1 if i % 2 else -1]
            barrier = threading.Barrier(2)
            statuses: list[int] = []

            def ask(
                k: int, word: str, barrier: threading.Barrier = barrier, statuses: list = statuses
            ) -> None:
                barrier.wait(WAIT)
                statuses.append(group.post(k, f"{kind}/{word}?{query}", peer=False))

            askers = [threading.Thread(target=ask, args=(k, w)) for k, w in enumerate(words)]
            for t in askers:
                t.start()
            for t in askers:
                t.join(2 * WAIT)
            assert statuses == [200, 200]
            flags = [_paused(group, k, channel) for k in (0, 1)]
            assert flags[0] == flags[1], f"pair {i} ({words}): worker 0, 1 paused: {flags}"
    finally:
        group.stop()
