"""The door into the engine: the value types and the one refusal every front-end sees.

Front-ends (TCP, HTTP, RESP) call the `Broker` and the `ChannelHandle` it gives
(`Broker.existing_channel`), and see what they answer: `Refused`, which carries each front-end's
words for the same refusal (nsqd's E_* code and text, HTTP status and text, a Redis -ERR), and
`Delivery` / `Outcome` values instead of the engine's message records and in-flight sets. The
refusal kinds are a table, not a branch per front-end. The ports a front-end implements or holds
(`Consumer`, `Subscription`, the stores' group commit `WriteBatch` and `held`) and the
`Message` record a consumer is sent are named here too: front-ends import this module, `broker`
and `handle` of the engine, nothing else (the import-linter contract in pyproject.toml)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import NamedTuple, overload

from protocol.v2.errors import ErrorCode, NSQError
from protocol.v2.message import append_message_frames

from .message import Message  # a record handed to a Consumer: read it, the channel owns it
from .policies.attributes import ChannelAttributes, TopicAttributes
from .ports import Consumer, NoBatch, Subscription, WriteBatch, held

__all__ = [
    "STATES",
    "ChannelAttributes",
    "ChannelFigures",
    "Consumer",
    "Deliveries",
    "Delivery",
    "Failure",
    "Making",
    "Message",
    "NoBatch",
    "Outcome",
    "Refused",
    "Subscription",
    "TopicAttributes",
    "WriteBatch",
    "held",
]

STATES = ("queued", "in_flight", "deferred")  # what a peek can look at
# a message's own TTL at most (100 years): its expiry, in ns since 1970, is stored as an
# int64 (storage/expiries.py); a /pub?ttl= of 9e12 ms passed that, and the next clean stop
# failed to write the memory queues to disk (found by fuzzing)
MAX_TTL_MS = 100 * 365 * 86_400_000


class _Words(NamedTuple):
    """What each front-end answers to one kind of refusal ({verb}: PUB, MPUB, DPUB)."""

    status: int  # HTTP
    message: str | None  # HTTP's message; None: the refusal's own code (INVALID_VALUE, ...)
    detail: bool  # HTTP shows the reason as "detail"
    redis: str  # after "ERR "
    nsq_code: str  # nsqd's E_* code
    nsq_text: str
    fatal: bool  # nsqd closes the connection after it


_FAILED = "E_{verb}_FAILED"
_WORDS: dict[str, _Words] = {
    # a store failure: nsqd answers 503 EXITING and closes a TCP publisher; /ping says why
    "store": _Words(
        503, "EXITING", False, "publish failed {reason}", _FAILED, "{verb} failed {reason}", True
    ),
    # a bound with overflow=reject (policies; not nsqd's): the publisher may retry as it is
    "full": _Words(
        503, "QUEUE_FULL", True, "publish failed {reason}", _FAILED, "{verb} failed {reason}", False
    ),
    # the topic's max_msg_size, answered as nsqd answers its own --max-msg-size (and closes)
    "too_big": _Words(
        413, "MSG_TOO_BIG", False, "{reason}", "E_BAD_MESSAGE", "{verb} {reason}", True
    ),
    # an attribute's name or value (HTTP's /topic/config, /channel/config)
    "invalid": _Words(400, None, True, "{reason}", "E_INVALID", "{verb} {reason}", True),
    # TOPIC_NOT_FOUND / CHANNEL_NOT_FOUND
    "not_found": _Words(404, None, False, "{reason}", "E_INVALID", "{verb} {reason}", True),
    # a store failed outside a publish (an empty)
    "internal": _Words(
        500, "INTERNAL_ERROR", False, "{reason}", "E_INVALID", "{verb} {reason}", True
    ),
}


class Making(Exception):
    """A SUB of a channel that a listener is still making elsewhere too (a group's workers
    make a new channel in every peer): the front-end waits for `made()`, then runs the SUB
    again, so that its OK leaves once every message published after it reaches the channel,
    as in one nsqd. Nothing was subscribed."""

    def __init__(self, made: Callable[[], Awaitable[None]]) -> None:
        super().__init__("the channel is being made")
        self.made = made


class Refused(Exception):
    """A request the engine refuses, whoever asked: `kind` is a key of _WORDS, str() the
    reason (the store's error, which queue is full and its bound...)."""

    def __init__(
        self, kind: str, reason: str, code: str = "", size: int = 0, limit: int = 0
    ) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.code = code  # HTTP's message where _WORDS has none (INVALID_VALUE, ...)
        self.size = size  # too_big: the body's size and the limit it passed
        self.limit = limit

    @classmethod
    def too_big(cls, size: int, limit: int) -> Refused:
        return cls("too_big", f"message too big {size} > {limit}", size=size, limit=limit)

    def nsq(self, verb: str) -> NSQError:
        """nsqd's error frame for a PUB / MPUB / DPUB."""
        w = _WORDS[self.kind]
        code = ErrorCode[w.nsq_code.format(verb=verb)]
        return NSQError(code, w.nsq_text.format(verb=verb, reason=self.reason), fatal=w.fatal)

    @property
    def http_status(self) -> int:
        return _WORDS[self.kind].status

    @property
    def http_message(self) -> str:
        return _WORDS[self.kind].message or self.code

    @property
    def http_detail(self) -> dict[str, str] | None:
        """The keys an HTTP answer carries beside "message" (None: just the message)."""
        return {"detail": self.reason} if _WORDS[self.kind].detail else None

    @property
    def redis(self) -> str:
        """The -ERR text a Redis client gets (the connection stays open)."""
        return "ERR " + _WORDS[self.kind].redis.format(reason=self.reason)


class Delivery(NamedTuple):
    """A message as a front-end shows it: peeked, received or popped."""

    id: bytes  # 16 ASCII hex bytes
    timestamp: int  # ns at publish
    attempts: int
    body: bytes
    due: int | None  # unix ms it times out or is released (in flight, deferred); else None
    expires: int  # unix ms its TTL ends; 0 when none applies


class Deliveries(Sequence[Delivery]):
    """Messages handed to a front-end (peeked, received, popped), oldest first: a `Delivery`
    value for each one read, or nsqd's message frames back to back (`frames`) in one pass with
    no value per message (a Spark task receives tens of thousands at a time). Made by the
    engine; what it holds is the engine's, and is not read until asked."""

    __slots__ = ("_due", "_msgs", "_ttl_ns")

    def __init__(self, msgs: list[Message], due: list[int | None] | int | None, ttl_ns: int):
        self._msgs = msgs
        self._due = due  # one for all, or one per message
        self._ttl_ns = ttl_ns  # the channel's TTL (0: none); a message may carry its own

    def __len__(self) -> int:
        return len(self._msgs)

    @overload
    def __getitem__(self, i: int) -> Delivery: ...
    @overload
    def __getitem__(self, i: slice) -> list[Delivery]: ...
    def __getitem__(self, i: int | slice) -> Delivery | list[Delivery]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        m = self._msgs[i]
        due = self._due[i] if isinstance(self._due, list) else self._due
        ttl = self._ttl_ns
        expiry = [e for e in (m.expires, ttl and m.timestamp + ttl) if e]
        expires = min(expiry) // 1_000_000 if expiry else 0
        return Delivery(m.id, m.timestamp, m.attempts, m.body, due, expires)

    def __iter__(self) -> Iterator[Delivery]:
        return map(self.__getitem__, range(len(self._msgs)))

    def frames(self, start: int = 0, end: int | None = None) -> bytes:
        """nsqd's message frames (protocol.v2.message's layout), back to back, of messages
        start..end: one pack per message for its head with its id, each body copied once, by
        the join."""
        parts: list[bytes] = []
        msgs = self._msgs
        append_message_frames(parts, msgs if start == 0 and end is None else msgs[start:end])
        return b"".join(parts)

    @property
    def nbytes(self) -> int:
        """The bodies' bytes."""
        return sum(len(m.body) for m in self._msgs)


class Failure(NamedTuple):
    """One id a FIN / REQ / TOUCH could not act on, in nsqd's words."""

    id: bytes
    code: str  # E_FIN_FAILED, E_REQ_FAILED, E_TOUCH_FAILED
    reason: str  # "FIN <id> failed ID not in flight", "... client does not own message"

    def __str__(self) -> str:
        return f"{self.code} {self.reason}"


class Outcome(NamedTuple):
    """FIN / REQ / TOUCH of several ids: how many took effect, and each failed id (each
    distinct id once, in the order given within its holder) with nsqd's reason."""

    done: int
    failed: list[Failure]


class ChannelFigures(NamedTuple):
    """What /channel/config shows of a channel beside its attributes (RSMQ's figures)."""

    depth: int
    in_flight: int
    deferred: int
    message_count: int
    delivery_count: int
    created_at: int  # unix ms
    modified_at: int
    dead_letter_count: int
    expired_count: int
    dropped_count: int
