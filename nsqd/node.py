"""What every part of the daemon may know about the node it runs in: its options, the limits
the V2 protocol enforces, its TLS context and the addresses it is bound to (known once the
listeners are open). Built by the daemon; passed down instead of the daemon itself."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.v2 import Limits

from .config.options import Options

if TYPE_CHECKING:
    import httpx


def limits_from(opts: Options) -> Limits:
    def ms(seconds: float) -> int:
        return round(seconds * 1000)

    return Limits(
        max_msg_size=opts.max_msg_size,
        max_body_size=opts.max_body_size,
        max_rdy_count=opts.max_rdy_count,
        max_req_timeout_ms=ms(opts.max_req_timeout),
        msg_timeout_ms=ms(opts.msg_timeout),
        max_msg_timeout_ms=ms(opts.max_msg_timeout),
        max_heartbeat_interval_ms=ms(opts.max_heartbeat_interval),
        max_output_buffer_size=opts.max_output_buffer_size,
        output_buffer_timeout_ms=ms(opts.output_buffer_timeout),
        min_output_buffer_timeout_ms=ms(opts.min_output_buffer_timeout),
        max_output_buffer_timeout_ms=ms(opts.max_output_buffer_timeout),
    )


@dataclass
class Node:
    options: Options
    tls_context: ssl.SSLContext | None = None
    limits: Limits = field(init=False)
    tcp_address: tuple[str, int] | None = None
    http_address: tuple[str, int] | None = None
    # the AUTH server's HTTP client: made by nsqd.auth.authd on first use, closed at stop
    auth_http: httpx.AsyncClient | None = None
    # AUTH secrets granted everything without asking an auth server: a group's links (the
    # workers' own secret, nsqd/group/identity.py); none alone
    trusted_secrets: frozenset[bytes] = frozenset()
    # the Redis front-end's list lengths for /metrics (--resp-address), or None without it
    resp_list_lengths: Callable[[], dict[str, int] | None] = lambda: None

    def __post_init__(self) -> None:
        self.limits = limits_from(self.options)

    @property
    def broadcast_tcp_port(self) -> int:
        return self.options.broadcast_tcp_port or (self.tcp_address[1] if self.tcp_address else 0)

    @property
    def broadcast_http_port(self) -> int:
        http = self.http_address
        return self.options.broadcast_http_port or (http[1] if http else 0)
