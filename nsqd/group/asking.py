"""Asking the peers: one request to a peer, or the same to every peer at once, over the
worker's kept connections to their private HTTP listeners (kept.py).

A peer has ASK_TIMEOUT to answer and one that does not is logged and left out, but for a
`patient` request (a change that must be made everywhere before the group answers: a delete,
an empty, fanout.PATIENT): that one is waited for until the peer answers or its connection
breaks or is refused, the wait past ASK_TIMEOUT logged, and its end."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ..log import log
from .kept import ASK_ERRORS, KeptConnections, Unreachable

if TYPE_CHECKING:
    from .missed import Peer

ASK_TIMEOUT = 2.0  # seconds a peer has to answer; a peer that does not is left out


class Asker:
    def __init__(
        self, peers: Callable[[], list[tuple[str, int]]], connections: KeptConnections
    ) -> None:
        self._peers = peers  # the peers' private HTTP addresses, as known now
        self.connections = connections  # the worker's

    def index_of(self, address: tuple[str, int]) -> int | None:
        """The worker index of the peer at `address`, for log lines (None: not known)."""
        return None

    def peers(self) -> list[tuple[str, int]]:
        return self._peers()

    async def ask(
        self,
        address: tuple[str, int],
        method: str,
        target: bytes,
        headers: bytes = b"",
        body: bytes = b"",
        *,
        patient: bool = False,
    ) -> tuple[int, bytes]:
        """One request to a peer on a kept connection: (status, body), or one of ASK_ERRORS;
        `patient`: a PATIENT change's, whose wait past ASK_TIMEOUT is logged."""
        if patient:
            return await self._waited(address, method, target, body, headers, again=False)
        status, _, text = await self.connections.request(address, method, target, body, headers)
        return status, text

    async def _waited(
        self,
        address: tuple[str, int],
        method: str,
        target: bytes,
        body: bytes,
        headers: bytes,
        *,
        again: bool,
    ) -> tuple[int, bytes]:
        """A request waited for until the peer answers or its connection breaks (one of
        ASK_ERRORS), with no time limit; a wait past ASK_TIMEOUT is logged, and its end."""
        got: list[tuple[int, list[tuple[bytes, bytes]], bytes] | Exception] = []
        done = trio.Event()

        async def request() -> None:
            try:
                got.append(
                    await self.connections.request(
                        address, method, target, body, headers, again=again
                    )
                )
            except ASK_ERRORS as exc:
                got.append(exc)
            done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(request)
            with trio.move_on_after(ASK_TIMEOUT):
                await done.wait()
            if not done.is_set():
                began = trio.current_time() - ASK_TIMEOUT
                who = self._who(address)
                log.warning(
                    "group: waiting for %s to answer %s %s (%.0fs so far; one that answers "
                    "no /ping for --worker-timeout is killed, and makes it at its next start)",
                    who,
                    method,
                    target.decode(errors="replace"),
                    ASK_TIMEOUT,
                )
                await done.wait()
                ended = "answered" if isinstance(got[0], tuple) else "was lost to"
                waited = trio.current_time() - began
                what = f"{method} {target.decode(errors='replace')}"
                log.info("group: %s %s %s after %.1fs", who, ended, what, waited)
        if isinstance(got[0], Exception):
            raise got[0]
        status, _, text = got[0]
        return status, text

    def _who(self, address: tuple[str, int]) -> str:
        """A peer in a log line: its worker index where its link file still names it."""
        index = self.index_of(address)
        where = f"{address[0]}:{address[1]}"
        return f"worker {index} ({where})" if index is not None else f"peer {where}"

    async def ask_all(
        self,
        method: str,
        target: bytes,
        body: bytes = b"",
        *,
        headers: bytes = b"",
        again: bool | None = None,
        patient: bool = False,
        answered: set[Peer] | None = None,
        unreachable: set[Peer] | None = None,
    ) -> list[tuple[int, bytes]]:
        """Every peer's (status, body), asked at once on kept connections; a peer that does not
        answer within ASK_TIMEOUT is logged and left out, unless `patient` (a PATIENT change):
        then it is waited for until it answers or its connection breaks (_waited).
        `again`: whether the request may be made twice (KeptConnections.request), a GET's by
        default: a kept connection the peer closed as it was sent then costs a new one, not the
        peer's part of the answer. `headers`: more header lines (KeptConnections.request).
        `answered`, `unreachable`: given, they get the address of each peer that answered,
        and of each whose private HTTP refused the connection (nothing listens there)."""
        if again is None:
            again = method == "GET"
        answers: list[tuple[int, bytes]] = []
        peers = self._peers()
        await self.connections.keep_only(peers)

        async def one(address: tuple[str, int]) -> None:
            try:
                if patient:
                    status, text = await self._waited(
                        address, method, target, body, headers, again=again
                    )
                else:
                    with trio.fail_after(ASK_TIMEOUT):
                        status, _, text = await self.connections.request(
                            address, method, target, body, headers, again=again
                        )
                answers.append((status, text))
                if answered is not None:
                    answered.add(address)
            except Unreachable as exc:
                if unreachable is not None:
                    unreachable.add(address)
                log.warning("group: peer %s:%d did not answer %s - %s", *address, target, exc)
            except ASK_ERRORS as exc:
                log.warning("group: peer %s:%d did not answer %s - %s", *address, target, exc)

        async with trio.open_nursery() as nursery:
            for address in peers:
                nursery.start_soon(one, address)
        return answers
