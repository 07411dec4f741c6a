"""A reactor pass's single-message publishes, stored together: group commit one step earlier.

The TCP and HTTP reactors answer their publishers after the pass's group commit (the held
answers of storage/commit.py). A PUB (or an MPUB of one message: bench_writer's, a client
library's Publish of one) made there need not be stored at once either: its body waits here,
and the pass's bodies for a topic are stored as one publish when the commit is flushed (its
release, an MPUB's own write, a connection's end): one id run, one clock read, one queue record
and one hand-out to the channels for the pass's messages instead of one each (without
sockets, 20 PUBs of a pass cost 0.33 µs each in the broker, 1.43 published one by one). Each is
still stored before its OK leaves, in the order the pass ran the commands.

Only what nothing can refuse waits (the broker decides: a topic with no policy, no TTL, no
de-duplication key). Any other publish to a topic with bodies waiting flushes the commit first,
so a connection's PUB then MPUB stay in that order. A batch refused when it is stored (the store
failed, or a policy was set in the same pass) fails the commit: the pass's held publishers are
refused (E_PUB_FAILED; HTTP's connection closed unanswered), as for a failed write, and nothing
of that batch is stored."""

from __future__ import annotations

from collections.abc import Callable

from ..log import log
from .policies.policy import MessageTooBig, QueueFull
from .ports import StoreError, WriteBatch

# store(topic name, its bodies): the broker's publish of a topic's batch
Store = Callable[[str, list[bytes]], None]


class PendingPublishes:
    """The bodies waiting for the commit's flush, by topic, in the order they came. It joins
    the commit's buffered set with its first body of a pass, ahead of the queues its flush
    appends to."""

    __slots__ = ("_store", "by_topic")

    def __init__(self, store: Store) -> None:
        self.by_topic: dict[str, list[bytes]] = {}
        self._store = store

    def add(self, topic: str, body: bytes, commit: WriteBatch) -> None:
        """`body` waits for the commit's flush (held and deferring only); its publisher's
        answer waits too (`appended`)."""
        bodies = self.by_topic.get(topic)
        if bodies is None:
            if not self.by_topic:
                commit.enlist(self)
            bodies = self.by_topic[topic] = []
        bodies.append(body)
        commit.appended += 1

    def flush(self) -> None:
        """Store every topic's batch; StoreError (the first failure) when one was refused."""
        by_topic, self.by_topic = self.by_topic, {}
        store = self._store
        failure: StoreError | None = None
        for topic, bodies in by_topic.items():
            try:
                store(topic, bodies)
            except Exception as exc:  # the others are stored all the same
                failure = failure or _failure(topic, bodies, exc)
        if failure is not None:
            raise failure


def _failure(topic: str, bodies: list[bytes], exc: Exception) -> StoreError:
    """What a topic's batch that was refused fails the commit with."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, (QueueFull, MessageTooBig)):  # a policy set since: the commit's failure
        failure = StoreError(str(exc))
    else:
        # a fault of ours, met at the pass's end: its publishers are refused and the loop
        # goes on (published one by one, it would have ended one connection)
        log.exception("TOPIC(%s): storing %d pending messages failed", topic, len(bodies))
        failure = StoreError(f"internal error - {exc!r}")
    failure.__cause__ = exc
    return failure
