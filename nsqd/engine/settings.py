"""The engine's settings: the few options topics and channels read when they are created
(nsqd reads them the same way; none of them changes at run time)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import trio


@dataclass(frozen=True)
class Settings:
    mem_queue_size: int = 10000
    node_id: int = 0
    msg_timeout: float = 60.0  # seconds
    max_msg_timeout: float = 900.0
    max_channel_consumers: int = 0  # 0: no limit
    e2e_window: float = 600.0  # seconds
    e2e_percentiles: list[float] = field(default_factory=list)
    # the bounds queue attributes must respect (policies/attributes.py)
    max_msg_size: int = 1048576
    max_req_timeout: float = 3600.0
    # the engine's clock port: monotonic seconds for deadlines (trio's, which the scanner and
    # the daemon's timers read too; a test may give its own)
    clock: Callable[[], float] = trio.current_time
