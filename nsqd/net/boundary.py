"""The boundary around one connection's task: whatever a connection's bytes make it raise ends
that connection, is logged once, and never reaches the daemon's task tree (one client must not
be a remote off switch). Every front-end starts a connection's task through `guarded`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..log import log


async def guarded(label: object, run: Callable[..., Awaitable[Any]], *args: Any) -> None:
    """Run one connection's task; an error ends the connection (its own `finally` closes the
    socket) and is logged with the connection's label."""
    try:
        await run(*args)
    except Exception:
        log.exception("[%s] unexpected error", label)
