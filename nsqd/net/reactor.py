"""The daemon's one epoll reactor, shared by its front-ends (nsqd/tcp/reactor.py,
nsqd/http/reactor.py, nsqd/resp/reactor.py): one task (`Loop.run`) owns an epoll set of
connection sockets, trio waits on the epoll fd itself, and each pass reads and answers every
ready connection synchronously; a heap of per-connection deadlines (timeouts, heartbeats,
blocking commands); a short adaptive spin before sleeping. The sleep has no deadline of its own:
an eventfd in the set (the bell) ends it, rung by `wake` and by a task that sleeps until the
first deadline (the alarm).

A front-end is an `EpollReactor`: it puts its connections in the loop's set (`watch`) and says
what a connection's readiness or deadline means (`_ready`, `_expire`, `_fail`, `_shutdown`, and
`_passing`/`_passed` around each pass). The daemon gives its three one `Loop`; a front-end made
without one (a server on its own, in tests) runs a loop of its own. A front-end's `run` is its
lifetime in the loop: when it ends (`close`, or its nursery cancelled) its connections are
ended.

A connection here is any object of the `Watched` interface: its plain socket and `due`, the
time of its one live timer entry (math.inf for none). Entries are never removed from the heap
one by one: an entry whose time is not its connection's `due` any more was superseded and is
skipped (and dropped when such entries outnumber the connections)."""

from __future__ import annotations

import heapq
import math
import os
import select
import weakref
from collections.abc import Callable
from itertools import count
from time import perf_counter
from typing import Any, Protocol

import trio

from ..log import log
from .boundary import describe
from .transport import SocketTransport

_IN = select.EPOLLIN
_OUT = select.EPOLLOUT
SPIN_MAX_S = 100e-6
SPIN_MIN_S = 2e-6
SPIN_PAYS_S = 1e-3  # a wait shorter than this: spinning would have served it sooner
# passes back to back give trio a turn at least this often, and at every pass while trio
# had work this recently
TRIO_TURNS_S = 1e-3


_yield = os.sched_yield  # in the spin: the core to whoever waits for it


def trio_probe() -> tuple[Callable[[], bool], Callable[[], None]]:
    """Whether trio has work besides the loop (a task in its run queue, I/O ready in its epoll
    set), cheap enough to ask between busy passes (~0.3 us: one epoll_wait of a set that
    holds trio's epoll fd; a checkpoint costs ~4 us of trio's scheduler), and what closes it.
    Reads trio's run queue and epoll object, which are not public: where they are not found,
    the answer is always yes (a checkpoint every pass, as without it)."""
    try:
        runner = trio._core._run.GLOBAL_RUN_CONTEXT.runner
        runq = runner.runq
        trio_epfd = runner.io_manager._epoll.fileno()
    except AttributeError:
        return _always, _nothing
    probe = select.epoll()
    probe.register(trio_epfd, _IN)
    poll = probe.poll

    def waiting() -> bool:
        return bool(runq) or bool(poll(0))

    return waiting, probe.close


def _always() -> bool:
    return True


def _nothing() -> None:
    pass


class Watched(Protocol):
    """What the reactor needs of a connection (its public interface to the loop)."""

    socket: SocketTransport  # read and written by the front-end, watched by the loop
    due: float  # its live timer entry's time, math.inf for none (the loop's to write)


class Loop:
    """The epoll set, the deadline heap and the task that serves them."""

    def __init__(self) -> None:
        self.ep = select.epoll()
        self.conns: dict[int, tuple[Any, EpollReactor]] = {}  # fd -> (connection, front-end)
        self.timers: list[tuple[float, int, Any, EpollReactor]] = []
        self.frontends: list[EpollReactor] = []
        # the hooks of the front-ends that have them, told of each pass's start and end (the
        # others' are not called: two calls a pass saved)
        self._passing: tuple[Callable[[], None], ...] = ()
        self._passed: tuple[Callable[[], None], ...] = ()
        self._clock: Callable[[], float] = trio.current_time  # trio's clock, read directly in run
        self._seq = count()
        self._scope = trio.CancelScope()
        self.now = 0.0  # trio's clock at the start of the pass
        self._spin_budget = SPIN_MAX_S
        # The loop sleeps in trio on its epoll fd with no deadline of its own (a cancel scope
        # per sleep cost ~4 us): its bell (an eventfd in the set) ends the sleep, rung by
        # `wake` and by the alarm task, which sleeps until the first deadline.
        self._bell = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.ep.register(self._bell, _IN)
        self._close_bell = weakref.finalize(self, os.close, self._bell)  # a loop never run too
        self._rung = False  # the bell was rung and not yet heard
        self._alarm = trio.CancelScope()  # the alarm task's sleep, until `_alarm_at`
        self._alarm_at = math.inf

    def join(self, frontend: EpollReactor) -> None:
        self.frontends.append(frontend)
        self._hooks()

    def leave(self, frontend: EpollReactor) -> None:
        self.frontends.remove(frontend)
        self._hooks()

    def _hooks(self) -> None:
        frontends = self.frontends
        self._passing = tuple(f._passing for f in frontends if _overrides(f, "_passing"))
        self._passed = tuple(f._passed for f in frontends if _overrides(f, "_passed"))

    def schedule(self, conn: Watched, frontend: EpollReactor, due: float) -> None:
        if due < conn.due:
            conn.due = due
            self.compact_if_stale()
            heapq.heappush(self.timers, (due, next(self._seq), conn, frontend))
            if due < self._alarm_at:
                self._arm(due)

    def compact_if_stale(self) -> None:
        """Drop the timer entries that will only be skipped, once they outnumber the live
        ones (a deadline met early, a connection gone): each holds its connection, and a
        closed or handed-over one (its buffers, its codec state) must not live on until its
        entry's time (seconds of connections under churn). In place: a pass may be popping."""
        timers = self.timers
        if len(timers) > 64 + 2 * len(self.conns):
            timers[:] = [t for t in timers if t[0] == t[2].due]
            heapq.heapify(timers)

    def wake(self) -> None:
        """Run a pass soon (work for a `_passed` that came from another task)."""
        if not self._rung:
            self._rung = True
            os.eventfd_write(self._bell, 1)

    def _arm(self, due: float) -> None:
        self._alarm_at = due
        self._alarm.deadline = due

    async def _alarm_task(self) -> None:
        """Ring the bell when the first deadline comes (then the pass that takes the due
        timers arms it for the next)."""
        while True:
            with self._alarm:
                await trio.sleep_forever()
            self._alarm = trio.CancelScope()
            self._alarm_at = math.inf
            self.wake()

    def close(self) -> None:
        self._scope.cancel()

    async def run(self) -> None:
        waiting, close_probe = trio_probe()
        self._clock = trio.lowlevel.current_clock().current_time  # trio.current_time's own
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._alarm_task)
                    await self._serve(waiting)
        finally:
            for frontend in list(self.frontends):
                frontend._shutdown()
            self.ep.close()
            self._close_bell()
            close_probe()

    async def _serve(self, trio_waiting: Callable[[], bool]) -> None:
        """Pass after pass: sleep while no connection is ready, spin after a pass that
        served some.

        Passes back to back skip trio's checkpoint (~4 us of its scheduler, ~10% of a
        worker's CPU serving one request at a time) while trio is idle: nothing in its run
        queue or its epoll set now nor in the last millisecond, and its last turn less than a
        millisecond ago (its timers, the cancellation that stops the loop). Where trio has
        work, as where connections have tasks of their own (TLS, AUTH) or a pull link runs,
        every pass gives it a turn as before: skipping there cost the latency row 15-25 us at
        p50 (when consumers still had tasks of their own), unexplained. A task
        woken in the same scheduler round as the loop is in trio's batch, not its run queue:
        the pass after a sleep gives trio a turn (a spin finds most requests: this is rare
        where the skip matters), and the turn each millisecond bounds any other's wait."""
        wait = trio.lowlevel.wait_readable
        checkpoint = trio.lowlevel.checkpoint
        epfd = self.ep.fileno()
        events: list[tuple[int, int]] = []
        turn = busy = 0.0  # trio's last turn; when it last had work
        while True:
            if events:
                now = perf_counter()
                if trio_waiting():
                    busy = now
                if now - turn >= TRIO_TURNS_S or now - busy < TRIO_TURNS_S:
                    await checkpoint()
                    turn = now
            else:
                slept = perf_counter()
                await wait(epfd)
                turn = 0.0  # a task woken in this round waits in trio's batch: its turn next
                events = self.ep.poll(0)
                # spin again after requests that came back soon after a spin gave up; less
                # and less for connections that are quiet for longer
                if perf_counter() - slept < SPIN_PAYS_S:
                    self._spin_budget = SPIN_MAX_S
                else:
                    self._spin_budget = max(self._spin_budget / 2, SPIN_MIN_S)
            self._pass(events)
            events = self._spin() if events else events

    def _spin(self) -> list[tuple[int, int]]:
        """Poll without sleeping for up to a hundred microseconds after a pass that served
        requests, as Go's scheduler spins before it parks in epoll: a client in a request loop
        sends again within that time, and finding it awake saves two wake-ups per round trip
        (ours and, on a VM, the vCPU's). The budget shrinks while requests come back only
        long after a spin gave up (quiet clients cost almost nothing).

        Each empty poll yields the core (sched_yield): a client or a peer worker waiting to
        run on it runs now, not after the spin. Where nothing waits the spin goes on at once.
        Without it two workers on two cores spun side by side and starved the clients whose
        requests they were waiting for (bench_writer batch 1, --workers=2, 4 alternated runs:
        26-40k -> 38-42k msgs/s; latency p50 138-252 -> 110-262 us, p99 398-882 -> 233-579;
        one process: latency p99 336-446 -> 220-348 us, round trips unchanged)."""
        poll = self.ep.poll
        end = perf_counter() + self._spin_budget
        while True:
            events = poll(0)
            if events or perf_counter() >= end:
                return events
            _yield()

    def _pass(self, events: list[tuple[int, int]]) -> None:
        self.now = now = self._clock()
        if self._rung:  # heard (the bell's event, if among these, is skipped below)
            self._rung = False
            os.eventfd_read(self._bell)
        conns = self.conns
        passed = self._passed  # each front-end told of the pass's start is told of its end
        for passing in self._passing:
            passing()
        try:
            for fd, mask in events:
                entry = conns.get(fd)
                if entry is None:
                    continue
                conn, frontend = entry
                try:
                    frontend._ready(conn, mask)
                except Exception as exc:  # one connection must never take the others down
                    log.error("[%s] unexpected error - %s", conn, describe(exc))
                    frontend._fail(conn)
            timers = self.timers
            while timers and timers[0][0] <= now:
                due, _, conn, frontend = heapq.heappop(timers)
                if due == conn.due:  # else an entry superseded by an earlier one
                    conn.due = math.inf  # this entry is spent
                    try:
                        frontend._expire(conn, now)
                    except Exception as exc:  # a heartbeat's write, say: that connection ends
                        log.error("[%s] unexpected error - %s", conn, describe(exc))
                        frontend._fail(conn)
            first = timers[0][0] if timers else math.inf
            if first != self._alarm_at:
                self._arm(first)
        finally:
            for done in passed:
                done()


def _overrides(frontend: EpollReactor, hook: str) -> bool:
    """Whether `frontend`'s class has a `hook` of its own (not EpollReactor's no-op)."""
    return getattr(type(frontend), hook) is not getattr(EpollReactor, hook)


class EpollReactor:
    """A front-end's part of the loop; subclasses say what a ready socket and an expired
    deadline do."""

    def __init__(self, loop: Loop | None = None) -> None:
        self._owns_loop = loop is None
        self.loop = Loop() if loop is None else loop
        self.loop.join(self)
        self.conns: dict[int, Any] = {}  # fd -> this front-end's connection
        self._scope = trio.CancelScope()

    # -- the set -------------------------------------------------------------------------

    def watch(self, conn: Watched) -> None:
        fd = conn.socket.fd
        loop = self.loop
        self.conns[fd] = conn
        loop.conns[fd] = (conn, self)
        loop.ep.register(fd, _IN)

    def unwatch(self, conn: Watched) -> bool:
        """Take `conn` out of the set; False if it was not in it."""
        fd = conn.socket.fd
        if self.conns.get(fd) is not conn:
            return False
        del self.conns[fd]
        loop = self.loop
        del loop.conns[fd]
        conn.due = math.inf
        try:
            loop.ep.unregister(fd)
        except (OSError, ValueError):
            pass
        loop.compact_if_stale()
        return True

    def watching(self, conn: Watched) -> bool:
        return self.conns.get(conn.socket.fd) is conn

    def want_output(self, conn: Watched, on: bool) -> None:
        """Also report `conn` ready when its socket takes output again (or stop)."""
        self.loop.ep.modify(conn.socket.fd, _IN | _OUT if on else _IN)

    def only_output(self, conn: Watched) -> None:
        """Report `conn` only when its socket takes output again, or fails: what it sends
        meanwhile waits in the kernel's buffers (bounded: its writer blocks) instead of being
        read into ours. `want_output(conn, False)` reads it again."""
        self.loop.ep.modify(conn.socket.fd, _OUT)

    def schedule(self, conn: Watched, due: float) -> None:
        """Call `_expire(conn)` at `due`, unless an earlier call is already scheduled."""
        self.loop.schedule(conn, self, due)

    def wake(self) -> None:
        """Run a pass soon (work for `_passed` that came from another task)."""
        self.loop.wake()

    # -- its lifetime ----------------------------------------------------------------------

    async def run(self) -> None:
        """Serve this front-end's connections until `close()` or cancellation (the loop too,
        when it is this front-end's own); then end them."""
        try:
            with self._scope:
                if self._owns_loop:
                    await self.loop.run()
                else:
                    await trio.sleep_forever()
        finally:
            self._shutdown()
            self.loop.leave(self)

    def close(self) -> None:
        self._scope.cancel()

    # -- what subclasses define ----------------------------------------------------------

    def _ready(self, conn: Any, events: int) -> None:
        """`conn`'s socket is readable (or writable, if asked for: `events` says which)."""
        raise NotImplementedError

    def _expire(self, conn: Any, now: float) -> None:
        """`conn`'s deadline passed (its `due` is already math.inf again)."""
        raise NotImplementedError

    def _fail(self, conn: Any) -> None:
        """An unexpected error while serving `conn`: end it."""
        raise NotImplementedError

    def _shutdown(self) -> None:
        """This front-end leaves the loop (or the loop ends): end every connection here."""
        raise NotImplementedError

    def _passing(self) -> None:
        """Before each pass's connections and deadlines (nothing by default)."""

    def _passed(self) -> None:
        """After each pass's connections and deadlines (nothing by default)."""
