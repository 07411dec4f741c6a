"""Server limits the protocol layer validates against (nsqd's flags, in ms and bytes)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class Limits:
    max_msg_size: int = 1048576
    max_body_size: int = 5242880
    max_rdy_count: int = 2500
    max_req_timeout_ms: int = 3_600_000
    msg_timeout_ms: int = 60_000
    max_msg_timeout_ms: int = 900_000
    heartbeat_interval_ms: int = 30_000  # nsqd's fixed client timeout (60s) / 2
    max_heartbeat_interval_ms: int = 60_000
    output_buffer_size: int = 16384
    max_output_buffer_size: int = 65536
    output_buffer_timeout_ms: int = 250
    min_output_buffer_timeout_ms: int = 25
    max_output_buffer_timeout_ms: int = 30_000
    max_line_length: int = 16384  # nsqd's bufio read buffer: a longer command line closes
