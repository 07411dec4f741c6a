"""The consumers' refills in the TCP reactor's passes (nsqd/tcp/reactor.py): a consumer whose
credit changed (its RDY or FINs made room, its output drained below HIGH_WATER) is refilled a
share at a time, so that one consumer's hand-out from a long backlog does not hold up the other
connections' commands. While no other kind of connection waits to be read the hand-out goes on
at once in larger shares; else what is left goes on in the passes after, each of which reads
every ready connection too.

A mixin of the reactor (`Reactor(Output, Refills, Parking)`): its calls are the reactor's own
methods, so the pass that refills a consumer (`_serve`, `_write`) pays no extra call level for
it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine.api import Subscription
from ..log import log
from ..net.boundary import describe
from ..net.reactor import EpollReactor, Loop

if TYPE_CHECKING:
    from .connection import Client

# A consumer's refill hands out this many messages at a time; while a publisher (or another
# front-end's connection) is ready to be read, what is left goes on in the passes after
# (`_refills`), each of which reads every ready connection too. Refilled at once, a consumer
# at RDY 2500 on a disk backlog held each pass ~6 ms, and the publishers waited for it: an MPUB
# 200 writer beside bench_reader got 25-50k msgs/s to the reader's 290k; with shares of 128,
# 158-177k to 190-209k (the Go nsqd ~205k each), of 256 87-105k, of 64 215k to 115k.
# 64 since 12-05 (2 cores, bench_writer MPUB 200 beside bench_reader at nsqd's defaults, a
# disk backlog): the clients share the second core, so what the reader is handed sets how much CPU
# the writer's client gets; at 128 325k written to 547k read, the Go nsqd ~390-420k to
# 425-490k; at 64 417-441k to 448-507k, and more in all, a written message costing the
# daemon less than a read one; at 32 557k to 274k.
REFILL_BUDGET = 64
# where nobody else waits the refill goes on at once, in larger shares (each share's look for
# a waiting publisher, and the hand-out's own setup, cost a lone bench_reader ~10% at 128)
REFILL_ALONE = 1024


class Refills(EpollReactor):
    def __init__(self, loop: Loop | None = None) -> None:
        super().__init__(loop)
        self._refills: list[Subscription] = []  # channels whose hand-out stopped at its budget

    def _refill(self) -> None:
        """Go on with the hand-outs that stopped at their budget: a share each at least, and
        another pass at once while some are left (the reactor's `_passing` calls it while
        `_refills` holds some)."""
        owed, self._refills = self._refills, []
        for channel in owed:
            try:
                if channel.dispatch_more(REFILL_BUDGET):
                    self._go_on(channel)
            except Exception as exc:  # its consumers' next FIN or RDY tries again
                log.error("refilling %s failed - %s", channel, describe(exc))

    def _top_up(self, client: Client) -> None:
        """A consumer's credit changed: refill it, a share now and the rest as `_go_on` says."""
        channel = client.channel
        if channel is not None and channel.refresh(client, REFILL_BUDGET):
            self._go_on(channel)

    def _go_on(self, channel: Subscription) -> None:
        """A hand-out stopped at its budget: on with it while no other kind of connection
        waits to be read, else in the next pass."""
        while not self._publisher_waits():
            if not channel.dispatch_more(REFILL_ALONE):
                return
        if channel not in self._refills:
            self._refills.append(channel)
            self.wake()

    def _publisher_waits(self) -> bool:
        """A connection that consumes nothing here (a publisher, another front-end's) is
        ready to be read (one epoll_wait that waits for nothing: ~1 us a share)."""
        conns = self.loop.conns
        for fd, _ in self.loop.ep.poll(0):
            entry = conns.get(fd)
            if entry is not None and (entry[1] is not self or entry[0].channel is None):
                return True
        return False
