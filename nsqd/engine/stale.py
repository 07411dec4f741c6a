"""Stale copies after a crash (--durable-inflight): a channel's journal brings back the
messages that were in flight or deferred at a kill -9, and its disk queue may bring some of
them back as well.

go-diskqueue saves its read position with its fsync (every --sync-every reads and writes, or
--sync-timeout), so after a kill -9 it reads again the messages read since the last save. nsqd
delivers those again (at least once). With the journal, the ones it holds would come twice
under the same id: the first FIN or REQ takes the id, the other answers E_FIN_FAILED, and the
client has two copies in flight. `StaleFilter` wraps the channel's disk queue from its
recovery on: among the messages that were on disk at the start (a stale copy can only be one
of them), it drops those whose id the journal recovered. Past that many reads it puts the disk
queue back in its place and costs nothing more; a message requeued meanwhile goes behind
them, so its own copy is never taken for a stale one.

The topic's disk queue saves its read position the same way, so a topic whose backlog was
being pumped into its channels at the kill pumps some of it again. A topic's queue holds no
requeued message and each message once, so for the pump (`PumpFilter`, the channel's `stale`)
an id the journal recovered is a stale copy wherever it comes, and it is dropped once; the set
is let go when the topic's backlog is drained. Elsewhere `NO_STALE` passes everything."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from ..log import log
from .message import Message
from .ports import UNBOUNDED
from .queue import Backlog


class StaleFilter:
    """An Overflow in front of `backlog`'s own for the first `len(overflow)` reads."""

    __slots__ = ("_backlog", "_ids", "_inner", "_left", "_name", "dropped")

    def __init__(self, name: str, backlog: Backlog, ids: set[bytes]) -> None:
        self._name = name
        self._backlog = backlog
        self._inner = backlog.overflow
        self._ids = ids
        self._left = len(self._inner)  # reads that may still give a stale copy
        self.dropped = 0

    @classmethod
    def install(cls, name: str, backlog: Backlog, ids: set[bytes]) -> None:
        """Before the journal's messages go back to the queue (behind what is on disk)."""
        if ids and len(backlog.overflow):
            backlog.overflow = cls(name, backlog, ids)

    @property
    def has_expiries(self) -> bool:
        return self._inner.has_expiries

    def _done(self) -> None:
        self._backlog.overflow = self._inner
        self._ids = set()
        self._left = 0
        if self.dropped:
            log.info(
                "CHANNEL(%s): %d stale disk copies of journaled messages dropped",
                self._name,
                self.dropped,
            )

    # -- reads: filtered ----------------------------------------------------------------------

    def get(self) -> Message | None:
        msgs = self.get_many(1)
        return msgs[0] if msgs else None

    def get_many(self, n: int, max_bytes: int = UNBOUNDED) -> list[Message]:
        inner, ids = self._inner, self._ids
        out: list[Message] = []
        left_bytes = max_bytes
        while len(out) < n and left_bytes > 0 and self._left > 0:
            got = inner.get_many(min(n - len(out), self._left), left_bytes)
            if not got:
                break
            self._left -= len(got)
            for msg in got:
                if msg.id in ids:  # (kept: a REQ may have put a second stale copy behind it)
                    self.dropped += 1
                else:
                    out.append(msg)
                    left_bytes -= len(msg.body)
        if self._left <= 0:
            self._done()
            if len(out) < n and left_bytes > 0:
                out += inner.get_many(n - len(out), left_bytes)
        return out

    def peek(self, n: int) -> list[Message]:
        ahead = self._inner.peek(n + min(len(self._ids), self._left))
        fresh = [m for i, m in enumerate(ahead) if i >= self._left or m.id not in self._ids]
        return fresh[:n]

    def peek_chunks(self, n: int, chunk: int) -> Iterator[list[Message]]:
        """In one part (this filter lasts only until the disk's first messages are read)."""
        yield self.peek(n)

    # -- the rest: the disk queue's own ---------------------------------------------------------

    def put(self, msg: Message) -> None:
        self._inner.put(msg)

    def put_run(self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int) -> None:
        self._inner.put_run(ids, bodies, ts)

    def put_many(self, msgs: Iterable[Message]) -> None:
        self._inner.put_many(msgs)

    def __len__(self) -> int:
        return len(self._inner)

    def clear(self) -> None:
        self._inner.clear()
        self._done()

    def close(self) -> None:
        self._inner.close()

    def delete(self) -> None:
        self._inner.delete()


class PumpFilter:
    """A channel's view of its topic's pump after a recovery: the journal's ids, each dropped
    the one time the pump brings it."""

    __slots__ = ("_ids",)

    def __init__(self, ids: set[bytes]) -> None:
        self._ids = ids

    def fresh(self, msgs: list[Message]) -> list[Message]:
        ids = self._ids
        if not ids:
            return msgs
        out = []
        for msg in msgs:
            if msg.id in ids:
                ids.discard(msg.id)
            else:
                out.append(msg)
        return out


class NoStale:
    __slots__ = ()

    def fresh(self, msgs: list[Message]) -> list[Message]:
        return msgs


NO_STALE = NoStale()
