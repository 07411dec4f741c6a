"""The supervisor's watch on its workers (--worker-timeout). A worker that is alive but serves
nobody (its loop stuck in a fault's endless loop, a SIGSTOP) keeps its share of the shared
ports' new connections, which then wait for ever, and its peers' questions wait for it; dying
would have been better, since a dead worker is started again. So the supervisor asks each worker
that is serving for `/ping` on its private HTTP listener every PING_EVERY seconds, and kills
(SIGKILL: a stuck loop takes no SIGTERM) one that answered nothing for --worker-timeout; the
group then starts it again, and its partition's disk queues and journals resume as after any
kill -9. Any answer counts, an unhealthy one's 500 too: that worker's loop runs.

Not watched: a worker not yet serving (loading its data, which may take long), a group that is
stopping (a worker flushing its memory to disk answers late, and must not be killed for it),
and a group without an HTTP address (no private HTTP listener to ask)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ..log import log
from .identity import link_address
from .kept import ASK_ERRORS, KeptConnections

if TYPE_CHECKING:
    from .supervisor import Worker

PING_EVERY = 1.0  # seconds between two asks of one worker
ASK_LIMIT = 5.0  # seconds one ask may take (less when --worker-timeout is shorter)


async def watch(worker: Worker, silence: float, stopping: Callable[[], bool]) -> None:
    """Kill `worker` when it has answered no /ping for `silence` seconds while serving."""
    watched = None  # the process the watch is on (a new start is a new one)
    last = 0.0  # when it last answered (or began to serve)
    limit = min(ASK_LIMIT, silence)
    connections = KeptConnections()  # a peer's ask, answered by that worker alone
    while not stopping():
        await trio.sleep(PING_EVERY)
        proc = worker.proc
        address = link_address(worker.link_file, 1)
        now = trio.current_time()
        if proc is None or not worker.serving or proc.poll() is not None or address is None:
            watched = None
            continue
        if proc is not watched:
            watched, last = proc, now
        if await _answers(connections, address, limit):
            last = trio.current_time()
        elif trio.current_time() - last >= silence and not stopping() and proc.poll() is None:
            log.error(
                "group: worker %d (pid %d) answered no /ping for %.1fs: killing it, to be "
                "started again",
                worker.index,
                proc.pid,
                trio.current_time() - last,
            )
            proc.kill()
            watched = None


async def _answers(connections: KeptConnections, address: tuple[str, int], limit: float) -> bool:
    """Whether the worker answered /ping at all within `limit` (any status: its loop ran)."""
    with trio.move_on_after(limit):
        try:
            await connections.request(address, "GET", b"/ping")
        except ASK_ERRORS:
            return False
        return True
    return False
