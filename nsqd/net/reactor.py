"""The generic part of a reactor (nsqd/tcp/reactor.py, nsqd/http/reactor.py): one task owns an
epoll set of connection sockets, trio waits on the epoll fd itself, and each pass reads and
answers every ready connection synchronously; a heap of per-connection deadlines (timeouts,
heartbeats); a short adaptive spin before sleeping. What a connection's readiness or deadline
means is the subclass's (`_ready`, `_expire`, `_fail`, `_shutdown`).

A connection here is any object with a `due` attribute: the time of its one live timer entry
(math.inf for none). Entries are never removed from the heap: an entry whose time is not its
connection's `due` any more was superseded and is skipped."""

from __future__ import annotations

import heapq
import math
import select
from itertools import count
from time import perf_counter
from typing import Any

import trio

from ..log import log
from .boundary import describe

_IN = select.EPOLLIN
SPIN_MAX_S = 100e-6
SPIN_MIN_S = 2e-6
SPIN_PAYS_S = 1e-3  # a wait shorter than this: spinning would have served it sooner


class EpollReactor:
    """The loop; subclasses say what a ready socket and an expired deadline do."""

    def __init__(self) -> None:
        self.ep = select.epoll()
        self.conns: dict[int, Any] = {}  # fd -> connection
        self.timers: list[tuple[float, int, Any]] = []
        self._seq = count()
        self._scope = trio.CancelScope()
        self.now = 0.0  # trio's clock at the start of the pass
        self._spin_budget = SPIN_MAX_S
        self._sleep: trio.CancelScope | None = None  # the loop's wait, while it waits

    # -- the set -------------------------------------------------------------------------

    def watch(self, fd: int, conn: Any) -> None:
        self.conns[fd] = conn
        self.ep.register(fd, _IN)

    def unwatch(self, fd: int, conn: Any) -> bool:
        """Take `conn` out of the set; False if it was not in it."""
        if self.conns.get(fd) is not conn:
            return False
        del self.conns[fd]
        conn.due = math.inf
        try:
            self.ep.unregister(fd)
        except (OSError, ValueError):
            pass
        if len(self.timers) > 64 + 2 * len(self.conns):
            self._compact()
        return True

    def _compact(self) -> None:
        """Drop the entries that will only be skipped: each holds its connection, and a closed
        or handed-over one (its buffers, its codec state) must not live on until its entry's
        time (seconds of connections under churn). In place: the loop may be popping it."""
        timers = self.timers
        timers[:] = [t for t in timers if t[0] == t[2].due]
        heapq.heapify(timers)

    def schedule(self, conn: Any, due: float) -> None:
        """Call `_expire(conn)` at `due`, unless an earlier call is already scheduled."""
        if due < conn.due:
            conn.due = due
            heapq.heappush(self.timers, (due, next(self._seq), conn))
            sleep = self._sleep
            if sleep is not None and due < sleep.deadline:
                sleep.deadline = due  # scheduled from another task while the loop sleeps

    def close(self) -> None:
        self._scope.cancel()

    # -- what subclasses define ----------------------------------------------------------

    def _ready(self, conn: Any, fd: int) -> None:
        raise NotImplementedError

    def _expire(self, conn: Any, now: float) -> None:
        """`conn`'s deadline passed (its `due` is already math.inf again)."""
        raise NotImplementedError

    def _fail(self, conn: Any) -> None:
        """An unexpected error while serving `conn`: end it."""
        raise NotImplementedError

    def _shutdown(self) -> None:
        """The loop ends: end every connection still here."""
        raise NotImplementedError

    # -- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        wait = trio.lowlevel.wait_readable
        epfd = self.ep.fileno()
        try:
            with self._scope:
                events: list[tuple[int, int]] = []
                while True:
                    if events:
                        await trio.lowlevel.checkpoint()
                    else:
                        slept = perf_counter()
                        with trio.move_on_at(
                            self.timers[0][0] if self.timers else math.inf
                        ) as self._sleep:
                            await wait(epfd)
                        self._sleep = None
                        events = self.ep.poll(0)
                        # spin again after requests that came back soon after a spin gave
                        # up; less and less for connections that are quiet for longer
                        if perf_counter() - slept < SPIN_PAYS_S:
                            self._spin_budget = SPIN_MAX_S
                        else:
                            self._spin_budget = max(self._spin_budget / 2, SPIN_MIN_S)
                    self._pass(events)
                    events = self._spin() if events else events
        finally:
            self._shutdown()
            self.ep.close()

    def _spin(self) -> list[tuple[int, int]]:
        """Poll without sleeping for up to a hundred microseconds after a pass that served
        requests, as Go's scheduler spins before it parks in epoll: a client in a request loop
        sends again within that time, and finding it awake saves two wake-ups per round trip
        (ours and, on a VM, the vCPU's). The budget shrinks while requests come back only
        long after a spin gave up (quiet clients cost almost nothing)."""
        poll = self.ep.poll
        end = perf_counter() + self._spin_budget
        while True:
            events = poll(0)
            if events or perf_counter() >= end:
                return events

    def _pass(self, events: list[tuple[int, int]]) -> None:
        self.now = now = trio.current_time()
        conns = self.conns
        for fd, _ in events:
            conn = conns.get(fd)
            if conn is None:
                continue
            try:
                self._ready(conn, fd)
            except Exception as exc:  # one connection must never take the others down
                log.error("[%s] unexpected error - %s", conn, describe(exc))
                self._fail(conn)
        timers = self.timers
        while timers and timers[0][0] <= now:
            due, _, conn = heapq.heappop(timers)
            if due == conn.due:  # else an entry superseded by an earlier one
                conn.due = math.inf  # this entry is spent
                try:
                    self._expire(conn, now)
                except Exception as exc:  # a heartbeat's write, say: that connection ends
                    log.error("[%s] unexpected error - %s", conn, describe(exc))
                    self._fail(conn)
