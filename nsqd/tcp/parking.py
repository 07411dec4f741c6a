"""The parking of a TCP connection whose SUB waits for its channel (nsqd/tcp/reactor.py): a SUB
of a channel that a group's peer workers are still making (the engine's `Making`) takes its
connection out of the reactor's epoll set, neither read nor timed, until they have; then the
SUB runs again in the reactor's next pass, its OK after the answers that came before it and
followed by what the client sent meanwhile (still in the kernel's buffers, read then).

A mixin of the reactor (`Reactor(Output, Refills, Parking)`): it runs the SUB again with the
reactor's own `_serve`, as a ready connection's commands are run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.v2 import Sub

from ..engine.api import Making
from ..log import log
from ..net.boundary import describe
from ..net.reactor import EpollReactor, Loop

if TYPE_CHECKING:
    from .connection import Client


class Parking(EpollReactor):
    # the reactor's, used here
    _spawn: Callable[..., Any]
    _write: Callable[[Client], None]
    _schedule: Callable[[Client], None]
    _serve: Callable[[Client, Sub], None]
    drop: Callable[[Client], None]

    def __init__(self, loop: Loop | None = None) -> None:
        super().__init__(loop)
        # the SUB each parked connection runs again once its channel is made
        self._parked: dict[Client, Sub] = {}
        self._made: list[Client] = []  # parked whose channel is made: resumed next pass

    def _park(self, client: Client, cmd: Sub, making: Making) -> None:
        """A SUB of a channel still being made in the peer workers: its connection is not
        read (nor timed) until the channel is made; then the SUB runs again and its OK goes,
        followed by what the client sent meanwhile. Answers before the SUB go now."""
        self._write(client)
        if client.reactor is not self or not self.unwatch(client):
            return
        self._parked[client] = cmd
        self._spawn(self._await_made, client, making)

    def _unpark(self, client: Client) -> bool:
        """Forget `client` if it is parked (it is dropped); False if it was not."""
        return self._parked.pop(client, None) is not None

    async def _await_made(self, client: Client, making: Making) -> None:
        await making.made()
        if client in self._parked:  # not dropped meanwhile
            self._made.append(client)
            self.wake()

    def _resume(self) -> None:
        """Run again the SUBs whose channel is made (the reactor's `_passing` calls it while
        `_made` holds some)."""
        made, self._made = self._made, []
        for client in made:
            cmd = self._parked.pop(client, None)
            if cmd is None:
                continue
            self.watch(client)
            if client._sending:  # its socket was full: the rest goes when it takes output
                self.want_output(client, True)
            self._schedule(client)
            try:
                self._serve(client, cmd)
            except Exception as exc:  # as the loop's pass does for a ready connection
                log.error("[%s] unexpected error - %s", client, describe(exc))
                self.drop(client)
