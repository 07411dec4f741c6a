"""What the engine calls out through: small interfaces its front-ends and stores implement.

The engine (topics, channels, their queues and in-flight sets) imports none of the code behind
these. A TCP connection, an HTTP lease or a RESP connection is a `Consumer` to a channel; the
disk queue is an `Overflow`; nsqd.dat and nsqlookupd registration are `Hooks` listeners."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from typing import Any, Protocol, TypeVar

from .message import Message

T = TypeVar("T")


class StoreError(Exception):
    """A store behind the engine failed to write or read (a disk queue error): the text is
    what nsqd says after "PUB failed " and what /ping reports."""


UNBOUNDED = 1 << 62  # a byte limit that limits nothing


class Overflow(Protocol):
    """Where a queue puts what does not fit in memory (a disk queue, or nothing)."""

    # some message it holds has its own TTL (/pub?ttl=): the engine must check expiry
    has_expiries: bool

    def put(self, msg: Message) -> None: ...
    def put_run(self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int) -> None:
        """New messages of one publish (queue.Run's: attempts 0, no TTL), in order, without a
        record each; a refusal leaves the ones before it stored."""
        ...

    def put_many(self, msgs: Iterable[Message]) -> None:
        """put() for each, in order, in as few writes as it can (a clean stop's memory)."""
        ...

    def get(self) -> Message | None: ...
    def get_many(self, n: int, max_bytes: int = UNBOUNDED) -> list[Message]:
        """Up to n messages, oldest first, none more once their bodies hold `max_bytes` (at
        least one); fewer only then or when it is empty."""
        ...

    def peek(self, n: int) -> list[Message]:
        """The next n messages get() would give, left where they are."""
        ...

    def peek_chunks(self, n: int, chunk: int) -> Iterator[list[Message]]:
        """peek(n) in parts of up to `chunk` messages, each read when it is asked for (a
        long peek lets the loop turn between parts); what was taken meanwhile is not given."""
        ...

    def __len__(self) -> int: ...
    def clear(self) -> None: ...
    def close(self) -> None: ...
    def delete(self) -> None: ...


# (queue name: "topic" or "topic:channel", ephemeral) -> its overflow store
OverflowFactory = Callable[[str, bool], Overflow]


class Buffered(Protocol):
    """What a group commit flushes: its buffered part is stored by `flush()`."""

    def flush(self) -> None: ...


class WriteBatch(Protocol):
    """The stores' group commit (storage/commit.py): between `hold()` and the outermost
    `release()`, what the disk queues are given is buffered and then written with one write
    per file. Hold and release in one synchronous stretch, and answer after the release."""

    appended: int  # records buffered so far: a holder compares it before and after a client
    journaled: int  # of them, those for files written after the queues' (in-flight journals)
    deferring: bool  # the publisher now answers after the outermost release, not at once
    depth: int  # nested holds; 0: nothing is buffered
    through: bool  # held, the queues' appends are written at once (a refusal raises at once)
    buffered: bool  # some record waits for the release's write

    def hold(self) -> None: ...
    def release(self) -> str | None:
        """None, or why a buffered write failed (those records are not stored)."""
        ...

    def flush(self) -> str | None:
        """Write what is buffered now; the hold goes on. None, or the first write failure
        since the hold began."""
        ...

    def later(self, fn: Callable[[str | None], None]) -> None:
        """While held: run `fn(error)` after the outermost release's write (a delivery that
        must not leave before its journal record, an answer that confirms a record); `error`
        is what `release` returned."""
        ...

    def enlist(self, buffered: Buffered) -> None:
        """While held: `buffered.flush()` runs at the next flush (a disk queue's buffered
        records; the broker's pending publishes, engine/pending.py); it may raise StoreError."""
        ...


def held(commit: WriteBatch, fn: Callable[..., T], *args: Any) -> tuple[T, str | None]:
    """`fn(*args)` inside one hold of the group commit, and why the release's write failed
    (None: what it buffered is on file). An exception from `fn` ends the hold as it goes."""
    commit.hold()
    try:
        result = fn(*args)
    except BaseException:
        commit.release()
        raise
    return result, commit.release()


class NoBatch:
    """No store behind the queues: nothing is ever buffered."""

    __slots__ = ("appended", "buffered", "deferring", "depth", "journaled", "through")

    def __init__(self) -> None:
        self.appended = 0
        self.journaled = 0
        self.buffered = False
        self.deferring = False
        self.depth = 0
        self.through = False

    def hold(self) -> None:
        pass

    def release(self) -> None:
        return None

    def flush(self) -> None:
        return None

    def later(self, fn: Callable[[str | None], None]) -> None:
        fn(None)  # never held

    def enlist(self, buffered: Buffered) -> None:
        buffered.flush()  # never held: nothing waits


class Peer(Protocol):
    """A connected client of any front-end, as /stats lists it."""

    id: int
    pub_counts: dict[str, int]

    def stats(self, topic_filter: str = "") -> dict[str, Any]: ...
    def close(self) -> None: ...


class Consumer(Protocol):
    """One subscriber of a channel. The channel owns the in-flight bookkeeping (attempts,
    owner, deadline, the in-flight set); the consumer keeps its own counters and credit and is
    told what happened through these calls."""

    id: int
    msg_timeout: float  # seconds a delivered message stays in flight before it times out
    sample_rate: int  # 0, or 1-99: the percentage of messages it wants (IDENTIFY)
    msg_timeout_explicit: bool  # it chose msg_timeout; else a channel's attribute applies

    def credit(self) -> int:
        """How many more messages it may be sent right now."""
        ...

    def sample(self, msgs: list[Message]) -> list[Message]:
        """The messages it keeps of `msgs` (asked only when sample_rate is set); the rest
        are consumed and dropped, as in nsqd."""
        ...

    def send(self, msgs: list[Message]) -> None:
        """`msgs` are now in flight to it: write them out (inside a held group commit, after
        its release: the channel's journal record of them may be buffered until then)."""
        ...

    def finished(self, n: int) -> None: ...
    def requeued(self) -> None: ...
    def timed_out(self) -> None: ...

    def emptied(self) -> None:
        """The channel dropped everything in flight (an empty): nothing is owed any more."""
        ...

    def close(self) -> None: ...

    def stats(self, topic_filter: str = "") -> dict[str, Any]:
        """Its /stats entry (nsqd's ClientV2Stats keys)."""
        ...


class Subscription(Protocol):
    """A TCP consumer's channel as `Broker.subscribe` gives it: the delivery hot path, called
    directly (FIN / REQ / TOUCH by id with the consumer as owner, `refresh` when its credit
    changes). The errors are nsqd's (E_FIN_FAILED ...), for the connection to send as they are."""

    backlog: Sized  # what waits for a consumer (truthy when there is any)

    def finish(self, consumer: Consumer, msg_ids: list[bytes]) -> list[Any]:
        """FIN each id; the NSQErrors of those that failed (not fatal), in order."""
        ...

    def requeue(self, consumer: Consumer, msg_id: bytes, delay_ms: int) -> None: ...
    def touch(self, consumer: Consumer, msg_id: bytes, timeout: float | None = None) -> None: ...
    def refresh(self, consumer: Consumer, budget: int = UNBOUNDED) -> bool:
        """Its credit changed: hand out what waits, `budget` messages at most; True when it
        stopped there with more left, for `dispatch_more` (in a later pass)."""
        ...

    def dispatch_more(self, budget: int) -> bool: ...
    def remove_consumer(self, consumer: Consumer) -> None: ...


class Journal(Protocol):
    """Where a channel keeps its in-flight and deferred messages durable (--durable-inflight;
    storage/journal.py). The channel calls it from its named points only (hand-out, FIN, REQ,
    timeout, deferred release, empty, close, delete); a channel without one has `NO_JOURNAL`.
    Queued messages are not its business: their queue keeps them."""

    durable: bool  # deferred messages survive a clean stop here (not in the disk queue)

    def held(self, msgs: list[Message], at_once: bool = False) -> None:
        """Delivered: in flight now (body, timestamp and attempts as sent). Inside a held
        group commit it may be buffered until the release (a consumer's send waits for it);
        `at_once`: written before this returns (a lease, answered right after)."""
        ...

    def deferred(self, msgs: list[Message], due_ms: int) -> None:
        """Deferred until `due_ms` (unix ms): DPUB, /pub?defer=, REQ with a delay. Written
        before this returns, or inside a held group commit counted in its `appended` and
        written by its release (a DPUB is acknowledged after that)."""
        ...

    def released(self, ids: list[bytes]) -> None:
        """No longer in flight or deferred (FIN'd, back in the queue, dropped)."""
        ...

    def attach(self, live: Callable[[], tuple[list[Message], list[tuple[Message, int]]]]) -> None:
        """Where the journal reads the channel's live set when it compacts itself."""
        ...

    def recover(self) -> tuple[list[Message], list[tuple[Message, int]]]:
        """What the last run left: (in flight, [(deferred, due unix ms)])."""
        ...

    def clear(self) -> None: ...

    def close(self, deferred: list[tuple[Message, int]]) -> None:
        """Clean stop: only `deferred` survives (in-flight messages went back to the queue)."""
        ...

    def delete(self) -> None: ...


class NoJournal:
    """A channel without --durable-inflight, or an ephemeral one: nothing is kept, and on a
    clean stop deferred messages go to the queue's store as in nsqd."""

    __slots__ = ()
    durable = False

    def held(self, msgs: list[Message], at_once: bool = False) -> None:
        pass

    def deferred(self, msgs: list[Message], due_ms: int) -> None:
        pass

    def released(self, ids: list[bytes]) -> None:
        pass

    def attach(self, live: Callable[[], tuple[list[Message], list[tuple[Message, int]]]]) -> None:
        pass

    def recover(self) -> tuple[list[Message], list[tuple[Message, int]]]:
        return [], []

    def clear(self) -> None:
        pass

    def close(self, deferred: list[tuple[Message, int]]) -> None:
        pass

    def delete(self) -> None:
        pass


NO_JOURNAL = NoJournal()


def no_journal(name: str) -> Journal:
    """The JournalFactory without --durable-inflight."""
    return NO_JOURNAL


# (queue name "topic:channel") -> its journal (ephemeral channels get NO_JOURNAL)
JournalFactory = Callable[[str], Journal]
