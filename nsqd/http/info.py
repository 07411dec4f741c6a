"""nsqd's endpoints that report and inspect: GET /ping, /info and /stats, and the /debug ones
(/debug/setblockrate, /debug/freememory, /debug/pprof/*: Go's profiler does not exist here);
and ours, GET /metrics: the figures of /stats for Prometheus (metrics.prometheus)."""

from __future__ import annotations

import gc
import re
import socket
import sys
from typing import TYPE_CHECKING, Any

from protocol.v2.gostr import go_quote

from ..gocompat.strconv import parse_int64
from ..metrics import render, snapshot
from ..metrics.memory import memory_stats
from ..version import VERSION
from .v1 import (
    HTTPError,
    Request,
    Response,
    parse_query_pairs,
    raw_headers,
    read_params,
    render_v1,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..engine.broker import Broker
    from ..node import Node

_BOOL_PARAMS = {"true": True, "1": True, "false": False, "0": False}


class InfoHandlers:
    """/ping, /info, /stats and /debug/*."""

    def __init__(self, node: Node, broker: Broker) -> None:
        self.node = node
        self.broker = broker

    async def ping(self, req: Request) -> str:
        health = self.broker.health
        if health != "OK":
            raise HTTPError(500, health)
        return health

    async def info(self, req: Request) -> dict[str, Any]:
        d = self.node
        opts = d.options
        http = d.http_address
        try:
            hostname = socket.gethostname()
        except OSError as exc:
            raise HTTPError(500, str(exc)) from exc
        return {
            "version": VERSION,
            "broadcast_address": opts.broadcast_address,
            "hostname": hostname,
            "http_port": http[1] if http else 0,
            "tcp_port": d.tcp_address[1] if d.tcp_address else 0,
            "start_time": self.broker.start_time,
            "max_heartbeat_interval": round(opts.max_heartbeat_interval * 1e9),
            "max_output_buffer_size": opts.max_output_buffer_size,
            "max_output_buffer_timeout": round(opts.max_output_buffer_timeout * 1e9),
            "max_deflate_level": opts.max_deflate_level,
        }

    async def stats(self, req: Request) -> Any:
        await read_params(req)
        query, topics, producers, memory = self._snapshot(req.query())
        if query("format") == "json":
            return snapshot.stats_json(self.broker, topics, producers, memory)
        return render.stats_text(self.broker, topics, producers, memory)

    async def metrics(self, req: Request) -> Response:
        """GET /metrics, with /stats' filters (topic, channel, include_clients, include_mem);
        served raw (Prometheus' content type), errors in nsqd's V1 form."""
        try:
            await read_params(req)
            query = req.query()
        except HTTPError as err:
            return err.status, *render_v1(err.status, err.message)
        from ..metrics import prometheus  # on the first GET /metrics, not at every start

        _, topics, producers, memory = self._snapshot(query)
        counted = prometheus.counts(self.broker, topics, self.node.resp_list_lengths())
        body = prometheus.metrics_text(self.broker, topics, producers, memory, counted)
        return 200, raw_headers(prometheus.CONTENT_TYPE, body), body

    def _snapshot(self, query: dict[str, list[str]]) -> tuple[Callable[[str], str], Any, Any, Any]:
        """/stats' and /metrics' filters applied: the first value of each query parameter, the
        topics and producers snapshot, and the memory figures (None with include_mem=false)."""

        def first(name: str) -> str:
            values = query.get(name)
            return values[0] if values else ""

        include_clients = _BOOL_PARAMS.get(first("include_clients"), True)
        include_mem = _BOOL_PARAMS.get(first("include_mem"), True)
        topics, producers = snapshot.snapshot(
            self.broker, first("topic"), first("channel"), include_clients
        )
        return first, topics, producers, memory_stats() if include_mem else None

    # -- /debug ------------------------------------------------------------------------------

    async def set_block_rate(self, req: Request) -> None:
        """Go's block profiler rate: nothing to set here; nsqd's answer on success is a 500.
        `rate` is Request.FormValue's: a form body's first, else the query's, each from the
        pairs that parse (FormValue drops the error of one that does not)."""
        body = await req.read(1 << 20)
        values = parse_query_pairs(req.query_string)[0]
        media_type = (req.header(b"content-type") or b"").split(b";")[0].strip().lower()
        if media_type == b"application/x-www-form-urlencoded":
            form = parse_query_pairs(body)[0]
            values = {**values, **form} if "rate" in form else values
        text = (values.get("rate") or [""])[0]
        if parse_int64(text) is None:
            reason = (
                "value out of range" if re.fullmatch(r"[+-]?[0-9]+", text) else "invalid syntax"
            )
            quoted = go_quote(text.encode("utf-8", "surrogateescape"))
            raise HTTPError(400, f"invalid block rate : strconv.Atoi: parsing {quoted}: {reason}")

    async def free_memory(self, req: Request) -> None:
        gc.collect()

    async def pprof_index(self, req: Request) -> Response:
        body = (
            b"<html>\n<head>\n<title>/debug/pprof/</title>\n</head>\n<body>\n/debug/pprof/<br>\n"
            b"<p>Go's runtime profiles do not exist in this Python nsqd; only "
            b'<a href="cmdline">cmdline</a> is served.</p>\n</body>\n</html>\n'
        )
        return 200, raw_headers(b"text/html; charset=utf-8", body), body

    async def pprof_cmdline(self, req: Request) -> Response:
        body = "\x00".join(sys.orig_argv).encode("utf-8", "surrogateescape")
        return 200, raw_headers(b"text/plain; charset=utf-8", body), body

    async def pprof_unavailable(self, req: Request) -> Response:
        return 404, *render_v1(404, "NOT_FOUND")
