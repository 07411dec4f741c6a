"""The newest pause word wins in every worker (--workers): when each topic's and channel's
pause last changed here, and the stamp a pause or unpause carries from where it was asked.

One nsqd serves a pause and an unpause of one queue, asked at once by two admins, one after
the other: the queue ends as the later one left it. A group serves each where it was asked,
then asks it of every peer; two opposite words asked at once in two workers crossed on the
way, each worker served its own first and its peer's last, and the group stayed split: paused
in one worker, unpaused in the other, for good (25 of 40 such pairs on the 2-core VM).

So a word is stamped where a client asked it (CLOCK_MONOTONIC: one clock for every worker of
a host), the stamp goes with the fan-out (SINCE_HEADER), and a worker serves a peer's word
only if it is newer than the last change of that queue here: an older one is answered as
served (it was, and was then overruled: one nsqd's answer to the earlier request) and changes
nothing. The times are in memory only: a restarted worker knows none, and serves any word.

Creates and deletes carry their stamp too, for one case: a create asked of a worker while a
peer was stalled is answered without it (2 s, ASK_TIMEOUT), and a delete of the same queue
asked after that answer waits for the peer (fanout.PATIENT); woken, the peer may serve the
delete first and the create last, which made the queue again there alone (a channel filling
with messages nobody reads). A peer's create older than the last delete of its topic or
channel here (Deletions) was overtaken by it and is answered as served, making nothing."""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from ..engine.channel import Channel
    from ..engine.topic import Topic
    from ..http.v1 import Request

    Queue = Topic | Channel

SINCE_HEADER = b"x-trio-nsqd-group-since"
# the stamp of the pause word served now (None: not a word from a client or a peer: a pause a
# new topic takes, the catch-up's), which the queue's change time takes
WORD: ContextVar[float | None] = ContextVar("group_pause_word", default=None)
WORDS = frozenset(f"/{k}/{a}" for k in ("topic", "channel") for a in ("pause", "unpause"))
CREATES = frozenset(("/topic/create", "/channel/create"))
DELETES = frozenset(("/topic/delete", "/channel/delete"))
STAMPED = WORDS | CREATES | DELETES  # the admin requests whose fan-out carries a stamp
DELETIONS_KEPT = 4096  # the latest deletions remembered (a late create comes seconds late)


class PauseClock:
    def __init__(self) -> None:
        self._since: WeakKeyDictionary[Queue, float] = WeakKeyDictionary()

    def since(self, queue: Queue) -> float:
        """When the queue's pause last changed here (0.0: not since it was made or loaded)."""
        return self._since.get(queue, 0.0)

    def changed(self, queue: Queue) -> float:
        """The queue was paused or unpaused here: by the word served now, or now."""
        when = self._since[queue] = WORD.get() or time.monotonic()
        return when

    def settled(self, queue: Queue, since: float) -> None:
        """A new topic took the word `since` from its peers (new_topics.py)."""
        self._since[queue] = since

    def stale(self, queue: Queue | None, word: float) -> bool:
        """Whether a peer's word is older than the queue's last change here (no queue: a 404)."""
        return queue is not None and word < self._since.get(queue, 0.0)


class Deletions:
    """When each topic and channel was last deleted here: the stamp of the request that
    deleted it (where a client asked it)."""

    def __init__(self) -> None:
        self._at: dict[tuple[str, str | None], float] = {}

    def deleted(self, topic: str, channel: str | None, stamp: float) -> None:
        at = self._at
        at.pop((topic, channel), None)  # the latest last: the oldest go first
        at[topic, channel] = stamp
        if len(at) > DELETIONS_KEPT:
            del at[next(iter(at))]

    def overtaken(self, topic: str, channel: str | None, stamp: float) -> bool:
        """Whether a create stamped `stamp` is older than the last deletion of its topic, or
        of its channel, here."""
        at = self._at
        if stamp < at.get((topic, None), 0.0):
            return True
        return channel is not None and stamp < at.get((topic, channel), 0.0)


def stamp_of(req: Request) -> float:
    """A stamped change's stamp: the one a peer's fan-out carries (its origin's), else now."""
    if req.peer:
        try:
            return float(req.header(SINCE_HEADER) or b"")
        except ValueError:  # none: a new topic's pause asked of its peers, a missed change
            pass
    return time.monotonic()


def header(stamp: float) -> bytes:
    """The fan-out's header line carrying a word's stamp (repr: the float exactly)."""
    return SINCE_HEADER + b": " + repr(stamp).encode() + b"\r\n"
