"""The blocking engine of BLPOP/BRPOP/BLMOVE/BRPOPLPUSH (seed 001 §4): FIFO waiters per key,
served after each command that gave a watched key elements, atomically (no other command runs
between the pop and the reply being fixed), the earliest waiter first; one push of several
elements serves several waiters. A waiter on a bridge key (channel:<t>:<c>) is also a channel
consumer (bridge.py) and is served by whichever comes first.

A waiter's move can be refused when its element arrives (its destination became another type,
or the bridge will not publish the element: empty, over --max-msg-size, a full queue): that
waiter alone gets the error LMOVE would have given and the element goes back where it was, for
the next waiter; the command that pushed it is answered as always (one client's blocked command
never closes another's connection). A move that can never be served (to a channel: key) is
refused before it waits (bridge.py `watch`).

A waiter waits for one type (`kind`): a list (BLPOP and its kin), a sorted set (BZPOPMIN,
BZPOPMAX, BZMPOP: zpop.py) or a stream (XREAD and XREADGROUP with BLOCK: stream_read.py). A
ready key serves the waiters of its value's type, FIFO, and leaves the others where they are
in its queue, as Redis 7.0's handleClientsBlockedOnKeys serves a key by its type (a BLPOP
waiting on a key that ZADD made stays blocked). A stream is not used up by a read: each of its
waiters is offered it in turn, and one whose ID nothing newer has passed stays (its `take`
answers None).

A waiter is removed from every queue when it is served, times out, or its connection closes."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from protocol.resp.codec import ReplyError

from ..log import log
from ..net.boundary import describe
from .keyspace import WRONGTYPE, Keyspace, WrongType
from .values import Value


class Waiter:
    """One blocked client: the database it waits in, its keys in the caller's order, how it
    pops (`left`) and what it does with the element (`deliver`: the encoded reply; a move
    pushes it on first, and raises ReplyError or WrongType, having pushed nothing, where it
    cannot). `moves_to` is a move's destination (b"" for a pop), for the check that refuses
    a move that can never be served before it waits. `take`, for a move onto a list: moves
    one element of a ready key itself (one record, Keyspace.move) and gives the reply, or
    raises WrongType having moved nothing; for a sorted-set pop (`kind` ZSet): pops from the
    ready key and gives the reply; for a stream read (`kind` Stream): the reply, or None
    while the stream has nothing newer than the waiter's ID (it keeps waiting)."""

    __slots__ = (
        "consumers", "deliver", "done", "keys", "kind", "ks", "left", "lost", "moves_to",
        "notify", "reply", "take",
    )  # fmt: skip

    def __init__(
        self,
        ks: Keyspace,
        keys: list[bytes],
        left: bool,
        deliver: Callable[[bytes, bytes], bytes],
        moves_to: bytes = b"",
        take: Callable[[bytes], bytes | None] | None = None,
        kind: type[Value] = deque,
    ) -> None:
        self.ks = ks
        self.kind = kind  # the type of value that serves it
        self.keys = keys
        self.left = left
        self.deliver = deliver
        self.moves_to = moves_to
        self.take = take
        self.done = False
        self.reply = b""
        self.notify: Callable[[], None] | None = None  # the reactor's wake-up for its client
        self.consumers: list = []  # bridge consumers to leave once done (bridge.py)
        # the answer when a ready key no longer holds its type (deleted, replaced): None,
        # it keeps waiting; XREADGROUP's -UNBLOCKED (stream_read.py)
        self.lost: bytes | None = None

    def attempt(self, key: bytes, elem: bytes) -> tuple[bytes, bool]:
        """`deliver`'s reply for `elem`, popped from `key`, and whether the element was taken.
        Not taken: the move was refused (the reply is its error, as LMOVE gives it) and the
        caller puts the element back where it was. The error is this waiter's alone: it is
        never raised into the command (another client's push, a publish) that served it."""
        return self.guarded(self.deliver, key, elem)

    def guarded(
        self, fn: Callable[..., bytes | None], key: bytes, *args: bytes
    ) -> tuple[bytes | None, bool]:
        """`fn(key, *args)`'s reply and True, or the error's reply and False."""
        try:
            return fn(key, *args), True
        except WrongType:
            return WRONGTYPE, False
        except ReplyError as exc:
            return exc.reply, False
        except Exception as exc:  # a bug: still this waiter's alone, and the element kept
            log.error(
                "RESP: blocked client served from %r: unexpected error - %s", key, describe(exc)
            )
            return ReplyError(f"ERR {describe(exc)}").reply, False

    def finish(self, reply: bytes) -> None:
        self.reply = reply
        self.done = True
        if self.notify is not None:
            self.notify()


def put_back(ks: Keyspace, key: bytes, elem: bytes, left: bool, when: int | None) -> None:
    """A popped element whose move was refused, back at the end of `key` it came from; `when`
    is the key's expiry before the pop: a last element took the key with it, so its TTL comes
    back too (Redis, which checks before it pops, never deleted it)."""
    ks.push(key, [elem], left)
    if when is not None and key not in ks.expires:
        ks.set_expire(key, when)


class Blocking:
    """The waiters of every database: each keyspace's `watched` holds its key -> queue."""

    def __init__(self, ready: list[tuple[Keyspace, bytes]]) -> None:
        self.ready = ready  # shared with the keyspaces, which append to it

    def add(self, waiter: Waiter) -> None:
        queues: dict[bytes, deque[Waiter]] = waiter.ks.watched  # type: ignore[assignment]
        # a list waiter on a bridge key is the channel's consumer instead (bridge.py); to
        # other types these names are plain keys
        bridged = (b"channel:", b"topic:") if waiter.kind is deque else ()
        for key in dict.fromkeys(waiter.keys):
            if not key.startswith(bridged):
                queues.setdefault(key, deque()).append(waiter)

    def remove(self, waiter: Waiter) -> None:
        queues: dict[bytes, deque[Waiter]] = waiter.ks.watched  # type: ignore[assignment]
        for key in dict.fromkeys(waiter.keys):
            queue = queues.get(key)
            if queue is None:
                continue
            try:
                queue.remove(waiter)
            except ValueError:
                pass
            if not queue:
                del queues[key]

    def serve_ready(self) -> None:
        """Serve the waiters of every key that got elements, FIFO per key, until the key is
        empty or has no waiter of its type; a move's push may make another key ready, served
        in turn."""
        ready_now = self.ready
        while ready_now:
            ready = ready_now[:]
            ready_now.clear()  # the same list object: the keyspaces keep appending to it
            for ks, key in dict.fromkeys(ready):
                queues: dict[bytes, deque[Waiter]] = ks.watched  # type: ignore[assignment]
                queue = queues.get(key)
                if queue:
                    self._serve_key(ks, key, queue)

    def _serve_key(self, ks: Keyspace, key: bytes, queue: deque[Waiter]) -> None:
        # a snapshot: a served waiter leaves the queue (and every other one) as it goes
        for waiter in list(queue):
            value = ks.data.get(key)
            if waiter.done:
                continue
            if not isinstance(value, waiter.kind):  # another type's waiter keeps its place,
                if waiter.lost is not None:  # but a group's consumer, whose stream went
                    self.remove(waiter)
                    waiter.finish(waiter.lost)
                continue
            if waiter.take is not None:  # a move onto a list (refused, it moves nothing), a
                # sorted-set pop, a stream read (None: nothing newer than its ID, it stays)
                reply = waiter.guarded(waiter.take, key)[0]
                if reply is not None:
                    self.remove(waiter)
                    waiter.finish(reply)
                continue
            self.remove(waiter)
            when = ks.expires.get(key)
            elem = ks.pop(key, 1, waiter.left)[0]
            reply, taken = waiter.attempt(key, elem)
            if not taken:  # back where it was, for the next waiter
                put_back(ks, key, elem, waiter.left, when)
            waiter.finish(reply)
