"""The boundary around one connection's task: whatever a connection's bytes make it raise ends
that connection, is logged once, and never reaches the daemon's task tree (one client must not
be a remote off switch). Every front-end starts a connection's task through `guarded`."""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from ..log import log


async def guarded(label: object, run: Callable[..., Awaitable[Any]], *args: Any) -> None:
    """Run one connection's task; an error ends the connection (its own `finally` closes the
    socket) and is logged with the connection's label."""
    try:
        await run(*args)
    except Exception as exc:
        log.error("[%s] unexpected error - %s", label, describe(exc))


def describe(exc: BaseException) -> str:
    """One line for the log (nsqd's lines carry no traceback): the error and where it was
    raised, enough to find the bug. A group of one (a nursery's) is described by its error."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    frames = traceback.extract_tb(exc.__traceback__)
    at = ""
    if frames:
        at = f" at {'/'.join(frames[-1].filename.rsplit('/', 2)[-2:])}:{frames[-1].lineno}"
    return f"{type(exc).__name__}: {exc}{at}"
