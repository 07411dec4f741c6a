"""The parking of a Redis client in the reactor's passes (nsqd/resp/reactor.py): a blocking
command (BLPOP and its kin) that finds nothing parks its client on its waiter (blocking.py,
and bridge.py for a channel: key), and a reply deferred for a group's peers (a bridge pop,
commands.Deferred) parks it while a task asks them. A parked client stays in the
epoll set, so a close is seen at once and what it pipelines is kept for later; the waiter's
notify (called by the command or the bridge publish that served it) puts it back in the run
list and wakes the loop, and the loop's deadline heap answers a timeout (a client's `due` is
its parked command's); CLIENT UNBLOCK answers it at once, as Redis does. Resumed, its answer
goes with the pass's replies and its next commands run.

A mixin of the reactor (`Reactor(Parking)`): its calls are the reactor's own methods, so a
command that blocks (`_process`) pays no extra call level."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ..log import log
from ..net.boundary import describe
from ..net.reactor import EpollReactor
from .commands import Block, Deferred, ReplyError
from .keyspace import WRONGTYPE, WrongType

if TYPE_CHECKING:
    from .reactor import Client
    from .server import Frontend


class Parking(EpollReactor):
    # the reactor's, used here
    fe: Frontend
    runnable: list[Client]  # resumed, or with commands left over
    to_send: list[Client]
    _process: Callable[[Client], None]

    def _expire(self, client: Client, now: float) -> None:
        """A parked command's timeout (a served one set `due` back to math.inf)."""
        blk = client.block
        if blk is not None and not blk.waiter.done:
            client.timed_out = True
            self.runnable.append(client)

    def _park(self, client: Client, blk: Block) -> bytes | None:
        """Register the waiter; its answer when served at once, None when parked."""
        fe, waiter = self.fe, blk.waiter
        if type(blk) is Deferred:
            client.block = blk
            client.timed_out = False
            waiter.notify = lambda: self._wake(client)
            fe.spawn(self._ask, client, blk)
            return None
        fe.blocking.add(waiter)
        try:
            fe.bridge.watch(waiter, client.remote)
        except ReplyError as exc:
            fe.blocking.remove(waiter)
            fe.bridge.unwatch(waiter)
            return exc.reply
        if waiter.done:
            fe.blocking.remove(waiter)
            fe.bridge.unwatch(waiter)
            return waiter.reply
        client.block = blk
        client.timed_out = False
        waiter.notify = lambda: self._wake(client)
        if blk.timeout > 0:
            self.schedule(client, trio.current_time() + blk.timeout)
        return None

    def _unpark(self, client: Client) -> None:
        blk = client.block
        assert blk is not None
        client.block = None
        self.fe.blocking.remove(blk.waiter)
        self.fe.bridge.unwatch(blk.waiter)
        blk.waiter.notify = None
        client.due = math.inf  # its timeout's entry, if any, is spent

    def _wake(self, client: Client) -> None:
        """A waiter was served (by a command here, or a publish from another task)."""
        self.runnable.append(client)
        self.wake()

    def unblock(self, client_id: int, reply: bytes | None) -> bool:
        """CLIENT UNBLOCK: a parked client is answered now (its command's timeout reply, or
        `reply`) and leaves every queue, as Redis's unblockClient: a push later in the same
        EXEC is not served to it, a message published to it comes after the answer, a second
        UNBLOCK answers 0; False when it is not parked. Woken, it runs what it pipelined."""
        client = self.fe.connections.get(client_id)
        if client is None or client.block is None or client.block.waiter.done:
            return False
        if type(client.block) is Deferred:  # not a blocking command: what it asked is taken
            return False
        blk = client.block
        self._unpark(client)
        self._answer(client, blk.on_timeout if reply is None else reply)
        self._wake(client)
        return True

    async def _ask(self, client: Client, deferred: Deferred) -> None:
        """A deferred reply's task: its answer, then the client is woken (if still here)."""
        try:
            reply = await deferred.ask()
        except WrongType:
            reply = WRONGTYPE
        except ReplyError as exc:
            reply = exc.reply
        except Exception as exc:  # one client must never take the others down
            log.error("RESP: [%s] unexpected error - %s", client.remote, describe(exc))
            reply = ReplyError(f"ERR {describe(exc)}").reply
        if self.fe.ks.ready:
            # a move's push (LMOVE from a channel key, taken from a peer) made its destination
            # ready: its waiters are served now, not when this client resumes, which a client
            # that closed meanwhile never does (the element would wait for another command)
            self.fe.serve_ready()
        deferred.waiter.finish(reply)

    def _resume(self, client: Client) -> None:
        blk = client.block
        if blk is not None:
            waiter = blk.waiter
            if not waiter.done and not client.timed_out:
                return
            self._unpark(client)
            if self.fe.ks.ready:
                self.fe.serve_ready()  # a move served from a channel pushed a list
            # (served, a blocking pop hands its element over even in a pass whose log write
            # fails: flags.HANDS_OVER)
            self._answer(client, waiter.reply if waiter.done else blk.on_timeout)
        if not (client.out or client.close_after_send or client.paused):
            self._process(client)

    def _answer(self, client: Client, reply: bytes) -> None:
        """A parked command's answer, sent with this pass's replies."""
        client.replies.append(reply)
        if not client.queued:
            client.queued = True
            self.to_send.append(client)
