"""A topic a worker makes while the group's unpause is on its way takes the unpause
(--workers; new_topics.py): the newest pause change wins, not any peer's pause.

The race, played in a fixed order: the test sends the unpause as the group's fan-out does
(each worker asked alone, with the peer header, on its private HTTP listener), to some workers
first and to one late peer (a slow one, which answers a question that came after the unpause
was sent, still paused) last, and makes the topic in worker 1 in between. With any peer's
pause winning, worker 1 settled paused and stayed so while the group said unpaused: its
consumers never got what was published there."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.ops.conftest import http_post, wait_until

from .conftest import Group

WAIT = 5.0


def _paused(group: Group, k: int, topic: str) -> bool | None:
    """Worker k's paused flag of `topic` (None: it has no such topic)."""
    topics = group.worker_stats(k, f"&topic={topic}")["topics"] or ()
    return next((t["paused"] for t in topics if t["topic_name"] == topic), None)


@pytest.mark.parametrize(
    ("count", "early", "late"),
    [
        # worker 2 made the unpause (and told worker 1, which lacked the topic: a 404 there);
        # worker 0 gets it after it answered worker 1's question
        (3, [2, 1], [0]),
        # the same, worker 1 made the unpause (a 404 there), worker 0 late: only worker 1's
        # own word is newer than worker 0's pause
        (2, [1], [0]),
        # worker 1's word gone (it came over a few seconds before the topic was made here):
        # worker 2's answer, unpaused since after worker 0's pause, is the newest
        (3, [2], [0, 1]),
    ],
    ids=["three-workers", "origin-lacked-it", "newest-peer"],
)
def test_a_topic_made_during_an_unpause_takes_the_unpause(
    workdir: Path, count: int, early: list[int], late: list[int]
) -> None:
    group = Group(workdir, count).start()
    try:
        url = f"http://127.0.0.1:{group.http}"
        for k in range(count):  # the topic in every worker but 1 (published there alone)
            if k != 1:
                assert group.post(k, "topic/create?topic=t") == 200
        assert http_post(f"{url}/topic/pause?topic=t")[0] == 200
        others = [k for k in range(count) if k != 1]
        wait_until(lambda: all(_paused(group, k, "t") for k in others), WAIT, "the pause")
        for k in early:  # the unpause reaches these first; worker 1 lacks the topic
            assert group.post(k, "topic/unpause?topic=t") == (404 if k == 1 else 200)
        with group.pin(1) as sub:
            sub.sub("t", "c")  # made in worker 1 now: it asks its peers whether it is paused
            sub.rdy(1)
            with group.pin(1) as pub:
                pub.pub("t", b"published in worker 1")
            sub.sock.settimeout(0.1)

            def delivered_or_paused() -> tuple[int, bytes] | bool | None:
                try:
                    return sub.frame()
                except TimeoutError:
                    return _paused(group, 1, "t")

            settled = wait_until(delivered_or_paused, WAIT, "worker 1's topic settled")
            assert settled is not True, "worker 1 settled paused: the group's unpause is lost there"
            assert settled[0] == 2 and settled[1][26:] == b"published in worker 1", settled
        for k in late:  # the late peers serve the unpause only now
            assert group.post(k, "topic/unpause?topic=t") == 200
        assert [_paused(group, k, "t") for k in range(count)] == [False] * count
    finally:
        status = group.stop()
        assert status in (None, 0, -15), group.log_text()[-3000:]


def test_a_pause_no_worker_could_make_is_no_word_on_a_topic_made_after_it(
    workdir: Path,
) -> None:
    """A pause of a topic no worker has is nsqd's 404 and pauses nothing; the topic made a
    moment later in both workers at once (each asking the other, each holding its copy) is a
    new one, unpaused. Both kept the refused pause as their newest word, and a peer holding
    its copy answered "not paused, no time": the word won in each, and both stayed paused
    (the group HTTP fuzz's seed 5 found it)."""
    group = Group(workdir).start()
    try:
        url = f"http://127.0.0.1:{group.http}"
        assert http_post(f"{url}/topic/pause?topic=t")[0] == 404
        assert http_post(f"{url}/topic/create?topic=t")[0] == 200  # made in each worker
        with group.pin(1) as pub:
            pub.pub("t", b"x")
        time.sleep(0.3)  # each worker's question answered (a few ms)
        assert [_paused(group, k, "t") for k in range(2)] == [False, False]
    finally:
        status = group.stop()
        assert status in (None, 0, -15), group.log_text()[-3000:]
