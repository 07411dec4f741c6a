"""Group commit: what the disk queues are given between `hold()` and the outermost `release()`
(one pass of a reactor's loop, one MPUB) is written with one `write()` per queue file at that
release. The publishers of the stretch are answered after it, so "written before OK" holds
with one system call for many messages, as a database's group commit.

Holding must begin and end in one synchronous stretch (no await in between): then no other
task ever sees a buffered record, and a reader of the queue flushes before it reads into one.
A write that fails is undone (the file truncated to its last whole record) and its reason
kept for the release to return, so whoever held can refuse what it has not yet answered.

A de-duplication key file (storage/dedupe.py) is written before the queues (`add_first`): its
record names where the messages it stands for end in their queue files (`write_ends`), so a
kill -9 between the two writes leaves a key whose messages the start finds missing and forgets,
not messages stored with their key forgotten (a retry stored them twice).

What must not leave before the stretch's records are on file (a delivery whose journal record
is buffered: --durable-inflight promises a delivered message back after a kill -9) is handed to
`later` and runs after the outermost release's write."""

from __future__ import annotations

from collections.abc import Callable

from ..engine.ports import Buffered, StoreError
from ..log import log

__all__ = ["GroupCommit"]


class GroupCommit:
    """One per store (a worker's partition). Never held, it writes nothing itself: each
    append goes to its file at once (a DiskQueue built without one gets this)."""

    __slots__ = (
        "_after",
        "_dirty",
        "_error",
        "_first",
        "_later",
        "appended",
        "deferring",
        "depth",
        "journaled",
        "through",
        "urgent",
    )

    def __init__(self) -> None:
        self.depth = 0  # nested holds; > 0: appends are buffered
        # the holder answers what is published now after its own release (the TCP reactor's
        # clients); any other publisher inside a hold has its records written before it answers
        self.deferring = False
        self.appended = 0  # records buffered so far (a holder compares it before and after)
        self.journaled = 0  # records buffered for the files written after the queues' (as that)
        self._dirty: list[Buffered] = []
        self._first: list[Buffered] = []  # written before every queue file (the dedupe keys)
        # journals: written after every queue file, so that a message a journal releases back
        # to a queue (a REQ, a timeout) is in that queue's file before the journal says so
        self._after: list[Buffered] = []
        self._later: list[Callable[[str | None], None]] = []
        self._error: str | None = None
        # a record whose command's answer must not leave before it is on file (a release
        # with --sync-every=1): the holder flushes before it answers
        self.urgent = False
        # held, the queues' appends are written at once all the same (the topic's pump): a
        # refused write raises at its record, whose writer keeps it and what follows it
        # (a buffered write fails at the release, for a whole chunk at once); reads, journals
        # and deliveries still wait for the release
        self.through = False

    def hold(self) -> None:
        self.depth += 1

    @property
    def buffered(self) -> bool:
        """Some record waits for the release's write (held only)."""
        return bool(self._first or self._dirty or self._after)

    def release(self) -> str | None:
        """End a hold; the outermost writes what was buffered and returns the first write
        failure since the hold began (None when everything is on its file). The outermost
        writes still held: what its flush stores (a pass's pending publishes, engine/pending.py)
        is buffered and written by the same flush, and a disk queue read by their hand-out
        writes its position after it (`later`), before a FIN can be read; flushed unheld, the
        read waited for the syncer (~100 ms) and a kill -9 after the FINs gave them back."""
        if self.depth > 1:
            self.depth -= 1
            return None
        try:
            self.flush()
        finally:
            self.depth = 0
        error, self._error = self._error, None
        later, self._later = self._later, []
        for fn in later:
            try:
                fn(error)
            except Exception as exc:  # one connection's write must not stop the others'
                log.error("after the group commit: %r failed - %s", fn, exc)
        return error

    def later(self, fn: Callable[[str | None], None]) -> None:
        """Run `fn(error)` after the outermost release has written what is buffered (held
        only); `error` is the release's (None: all of it is on file)."""
        self._later.append(fn)

    def enlist(self, queue: Buffered) -> None:
        """`queue` buffered its first record of this hold (or the broker its first pending
        publish: engine/pending.py, flushed ahead of the queues it appends to)."""
        self._dirty.append(queue)

    def add(self, owner: Buffered, answered: bool) -> None:
        """`owner` buffered a record (held only): its flush() writes it at the release;
        `answered`: a publisher's answer waits for it (counted in `appended`)."""
        if answered:
            self.appended += 1
        if owner not in self._dirty:
            self._dirty.append(owner)

    def add_first(self, owner: Buffered, answered: bool) -> None:
        """As `add`, for a file written before every queue's (the dedupe keys)."""
        if answered:
            self.appended += 1
        if owner not in self._first:
            self._first.append(owner)

    def write_ends(self) -> list[tuple[str, int, int]]:
        """Where each disk queue's buffered records end: (queue name, file number, position)."""
        return [end() for q in self._dirty if (end := getattr(q, "write_end", None))]

    def add_after(self, owner: Buffered, answered: bool) -> None:
        """As `add`, for a file written after every queue's (a journal)."""
        self.journaled += 1
        if answered:
            self.appended += 1
        if owner not in self._after:
            self._after.append(owner)

    def flush(self) -> str | None:
        """Write what is buffered now (the hold goes on), the queues first, then the journals;
        the first failure since the hold began, or None."""
        self.urgent = False
        if self._first:
            first, self._first = self._first, []
            self._write(first)
        while self._dirty:  # a pending publish's flush appends to the queues it reaches
            dirty, self._dirty = self._dirty, []
            for queue in dirty:  # (`_write`'s loop, inline: a call a pass saved)
                try:
                    queue.flush()
                except StoreError as exc:  # its records are not on file: the release's refusal
                    self.failed(str(exc))
        if self._after:
            after, self._after = self._after, []
            self._write(after)
        return self._error

    def _write(self, owners: list[Buffered]) -> None:
        """Each owner's buffered records to its file."""
        for owner in owners:
            try:
                owner.flush()
            except StoreError as exc:  # its records are not on file: the release's refusal
                self.failed(str(exc))

    def failed(self, reason: str) -> None:
        if self._error is None:
            self._error = reason
