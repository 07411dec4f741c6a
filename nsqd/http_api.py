"""nsqd's HTTP API, served by nsqd.http_server (h11 on Trio) on --http-address and, with a
certificate, --https-address.

Handlers take a Request and return data or raise HTTPError; `render_v1` renders the result
as nsqd's V1 format: a string as a raw body, None as an empty 200, anything else as JSON, an
error as {"message":"..."}, always with `X-NSQ-Content-Type: nsq; version=1.0`. Routing
follows the httprouter nsqd uses: exact paths plus `/config/:opt`, 405 with an Allow header,
OPTIONS answered from the route table, a trailing slash or a wrong-case / unclean path
redirected (301 for GET, 307 otherwise), everything else 404 NOT_FOUND.

`API.handle(request)` returns `(status, headers, body)`. Each HTTP connection is its own task,
so a slow or broken HTTP client never holds up the TCP protocol."""

from __future__ import annotations

import gc
import json
import logging
import re
import socket
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import trio

from protocol.gostr import go_quote
from protocol.names import is_valid_name

from . import http_server, stats
from .diskqueue import DiskQueueError
from .http_server import BodyError
from .log import LEVELS, log
from .options import FLAGS
from .server import open_listeners
from .statsd import prefix_for

if TYPE_CHECKING:
    from .daemon import NSQD

Headers = list[tuple[bytes, bytes]]
Response = tuple[int, Headers, bytes]


class HTTPError(Exception):
    """An error response: status code and nsqd's message text."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class JSONBody(bytes):
    """Handler data that is already encoded JSON (e.g. `null` for an option's nil list)."""


# -- query strings and bodies ------------------------------------------------------------------

_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")
_BAD_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")


def _unescape(raw: bytes) -> str:
    if b"+" in raw:
        raw = raw.replace(b"+", b" ")
    if b"%" in raw:
        if _BAD_ESCAPE.search(raw):
            raise ValueError("invalid URL escape")
        raw = _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), raw)
    return raw.decode("utf-8", "surrogateescape")


def parse_query(qs: bytes) -> dict[str, list[str]]:
    """Go's url.ParseQuery: '&'-separated, '+' is a space, a bad escape or a ';' is an error."""
    values: dict[str, list[str]] = {}
    error = False
    for part in qs.split(b"&"):
        if b";" in part:
            error = True
            continue
        if not part:
            continue
        key, _, value = part.partition(b"=")
        try:
            k, v = _unescape(key), _unescape(value)
        except ValueError:
            error = True
            continue
        values.setdefault(k, []).append(v)
    if error:
        raise HTTPError(400, "INVALID_REQUEST")
    return values


class Request(http_server.Request):
    """A request as the handlers see it: the query parsed as Go does, the route's parameter."""

    __slots__ = ("_query", "params")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._query: dict[str, list[str]] | None = None
        self.params = ""

    def query(self) -> dict[str, list[str]]:
        if self._query is None:
            self._query = parse_query(self.query_string)
        return self._query

    def arg(self, name: str) -> str | None:
        """The first value of a query parameter, None if absent (nsqd's ReqParams.Get)."""
        values = self.query().get(name)
        return values[0] if values else None


# -- rendering ---------------------------------------------------------------------------------

_V1 = (b"X-Nsq-Content-Type", b"nsq; version=1.0")
_JSON = (b"Content-Type", b"application/json; charset=utf-8")
_TEXT = (b"Content-Type", b"text/plain; charset=utf-8")
_date_cache: list[Any] = [0, b""]


def http_date() -> bytes:
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[0] = now
        _date_cache[1] = formatdate(now, usegmt=True).encode()
    return _date_cache[1]


def render_v1(status: int, data: Any) -> tuple[Headers, bytes]:
    """http_api.RespondV1: headers (Go's order) and body."""
    if status != 200:
        body = stats.go_json({"message": str(data)})
        return [_JSON, _V1, (b"Date", http_date()), (b"Content-Length", b"%d" % len(body))], body
    if isinstance(data, JSONBody):
        return [_JSON, _V1, (b"Date", http_date()), (b"Content-Length", b"%d" % len(data))], data
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if data is None or isinstance(data, bytes):
        body = data or b""
        headers = [_V1, (b"Date", http_date()), (b"Content-Length", b"%d" % len(body))]
        if body:
            headers.append(_TEXT)  # net/http's content sniffing of a text body
        return headers, body
    body = stats.go_json(data)
    return [_JSON, _V1, (b"Date", http_date()), (b"Content-Length", b"%d" % len(body))], body


V1, PLAIN, RAW = "v1", "plain", "raw"  # how a route's result is rendered
_OK_HEADERS_TAIL = [(b"Content-Length", b"2"), _TEXT]


def respond_ok() -> Response:
    """The /pub and /mpub success: a raw `OK`."""
    return 200, [_V1, (b"Date", http_date()), *_OK_HEADERS_TAIL], b"OK"


# -- options for /config -------------------------------------------------------------------------

_NOT_IN_GO_OPTIONS = {"config", "version", "verbose", "worker_id"}
_TLS_REQUIRED = {"false": 0, "tcp-https": 1, "true": 2}
_TLS_VERSIONS = {"ssl3.0": 0x0300, "tls1.0": 0x0301, "tls1.1": 0x0302, "tls1.2": 0x0303}
_TLS_VERSIONS["tls1.3"] = 0x0304
_LOG_LEVEL_NUMBERS = {"debug": 1, "info": 2, "warn": 3, "error": 4, "fatal": 5}
_FLAGS_BY_CFG = {f.cfg_key: f for f in FLAGS if f.cfg_key not in _NOT_IN_GO_OPTIONS}


def _raw_headers(content_type: bytes, body: bytes) -> Headers:
    return [
        (b"Content-Type", content_type),
        (b"X-Content-Type-Options", b"nosniff"),
        (b"Date", http_date()),
        (b"Content-Length", b"%d" % len(body)),
    ]


def config_value(daemon: NSQD, name: str) -> Any:
    """getOptByCfgName: the option's value as nsqd's Go Options struct holds it."""
    flag = _FLAGS_BY_CFG.get(name)
    if flag is None:
        raise HTTPError(400, "INVALID_OPTION")
    opts = daemon.options
    value = opts.values[flag.attr]
    if name == "log_level":
        return _LOG_LEVEL_NUMBERS[str(value).lower()]
    if name == "tls_required":
        return _TLS_REQUIRED.get(value, 0)
    if name == "tls_min_version":
        return _TLS_VERSIONS.get(str(value).lower(), 0)
    if name == "statsd_prefix" and value:
        return prefix_for(daemon)  # %s expanded as nsqd does at startup
    if name == "broadcast_tcp_port":  # nsqd fills in the bound ports at startup
        return daemon.broadcast_tcp_port
    if name == "broadcast_http_port":
        return daemon.broadcast_http_port
    if flag.kind == "duration":
        return round(value * 1e9)
    if flag.kind == "floats":
        return [stats.go_float(v) for v in value]
    if flag.kind == "list" and value is None:
        return JSONBody(b"null")
    return value


def _http_address(daemon: NSQD) -> tuple[str, int] | None:
    return getattr(daemon, "http_address", None)


# -- handlers ------------------------------------------------------------------------------------


class API:
    """The route table and nsqd's handlers; `handle` answers one request."""

    def __init__(self, daemon: NSQD) -> None:
        self.daemon = daemon
        opts = daemon.options
        self.max_msg_size: int = opts.max_msg_size
        self.max_body_size: int = opts.max_body_size
        self.max_req_timeout_ns = round(opts.max_req_timeout * 1e9)
        self.tls_required = opts.tls_required == "true"
        self.https_port = 0  # the bound --https-address port, for TLS_REQUIRED
        # path -> method -> (handler, logged, rendering: V1, PLAIN or RAW)
        H = Callable[[Request], Awaitable[Any]]
        self.routes: dict[str, dict[str, tuple[H, bool, str]]] = {
            "/ping": {"GET": (self.ping, True, PLAIN)},
            "/info": {"GET": (self.info, True, V1)},
            "/stats": {"GET": (self.stats, True, V1)},
            "/pub": {"POST": (self.pub, False, V1)},
            "/mpub": {"POST": (self.mpub, False, V1)},
            "/debug/setblockrate": {"PUT": (self.set_block_rate, True, PLAIN)},
            "/debug/freememory": {"POST": (self.free_memory, True, PLAIN)},
            "/debug/pprof/": {"GET": (self.pprof_index, False, RAW)},
            "/debug/pprof/cmdline": {"GET": (self.pprof_cmdline, False, RAW)},
            "/debug/pprof/symbol": {
                "GET": (self.pprof_unavailable, False, RAW),
                "POST": (self.pprof_unavailable, False, RAW),
            },
        }
        for name in ("profile", "heap", "goroutine", "block", "threadcreate"):
            self.routes[f"/debug/pprof/{name}"] = {"GET": (self.pprof_unavailable, False, RAW)}
        for kind, actions in (
            ("topic", ("create", "delete", "empty", "pause", "unpause")),
            ("channel", ("create", "delete", "empty", "pause", "unpause")),
        ):
            for action in actions:
                handler = getattr(self, f"{kind}_{action}")
                self.routes[f"/{kind}/{action}"] = {"POST": (handler, True, V1)}
        self.param_routes: dict[str, dict[str, tuple[H, bool, str]]] = {
            "/config/": {"GET": (self.config, True, V1), "PUT": (self.config, True, V1)},
        }
        self.methods = sorted(
            {m for table in (self.routes, self.param_routes) for r in table.values() for m in r}
        )
        self.lower_paths = {p.lower(): p for p in self.routes}

    # -- entry --------------------------------------------------------------------------------

    async def handle(self, req: Request) -> Response:
        # the benchmarked path first
        if req.path == "/pub" and req.method == "POST" and (req.tls or not self.tls_required):
            try:
                await self.pub(req)
            except HTTPError as err:
                return err.status, *render_v1(err.status, err.message)
            except BodyError:
                return 500, *render_v1(500, "INTERNAL_ERROR")
            except Exception:
                log.exception("HTTP: error in POST /pub")
                return 500, *render_v1(500, "INTERNAL_ERROR")
            return respond_ok()
        try:
            return await self._dispatch(req)
        except BodyError:  # nsqd answers a body it cannot read with a 500
            return 500, *render_v1(500, "INTERNAL_ERROR")
        except Exception:
            log.exception("HTTP: error in %s %s", req.method, req.path)
            return 500, *render_v1(500, "INTERNAL_ERROR")

    async def _dispatch(self, req: Request) -> Response:
        if self.tls_required and not req.tls:
            return self._tls_required()
        method = req.method
        path = req.path
        route, params = self._match(path, method)
        if route is not None:
            handler, logged, rendering = route
            req.params = params
            return await self._run(handler, req, logged, rendering)
        if path == "*":
            if method == "OPTIONS":
                return 200, [(b"Content-Length", b"0"), (b"Date", http_date())], b""
            allow = ", ".join(sorted({*self.methods, "OPTIONS"})).encode()
            return self._error(req, 405, "METHOD_NOT_ALLOWED", allow)
        if method in self.methods and method != "CONNECT" and path != "/":
            location = self._redirect_path(path, method)
            if location is not None:
                return self._redirect(req, method, location)
        allowed = self._allowed(path, method)
        if method == "OPTIONS":
            if allowed:
                headers = [(b"Allow", allowed), (b"Date", http_date()), (b"Content-Length", b"0")]
                return 200, headers, b""
        elif allowed:
            return self._error(req, 405, "METHOD_NOT_ALLOWED", allowed)
        return self._error(req, 404, "NOT_FOUND")

    def _match(self, path: str, method: str) -> tuple[Any, str]:
        methods = self.routes.get(path)
        if methods is not None:
            return methods.get(method), ""
        if path.startswith("/config/"):
            opt = path[8:]
            if opt and "/" not in opt:
                return self.param_routes["/config/"].get(method), opt
        return None, ""

    def _has_route(self, path: str, method: str) -> bool:
        return self._match(path, method)[0] is not None

    def _allowed(self, path: str, method: str) -> bytes:
        allowed = [m for m in self.methods if m != method and self._has_route(path, m)]
        if not allowed:
            return b""
        return ", ".join(sorted({*allowed, "OPTIONS"})).encode()

    def _redirect_path(self, path: str, method: str) -> str | None:
        # the trailing slash first, then a cleaned, case-insensitive match
        if len(path) > 1 and path.endswith("/") and self._has_route(path[:-1], method):
            return path[:-1]
        if not path.endswith("/") and self._has_route(path + "/", method):
            return path + "/"
        clean = clean_path(path)
        lower = clean.lower()
        candidates = [lower]
        if len(lower) > 1 and lower.endswith("/"):
            candidates.append(lower[:-1])
        else:
            candidates.append(lower + "/")
        for candidate in candidates:
            fixed = self.lower_paths.get(candidate)
            if fixed is not None and self._has_route(fixed, method):
                return fixed
        if lower.startswith("/config/"):
            opt = clean[8:]
            if opt.endswith("/"):
                opt = opt[:-1]
            if opt and "/" not in opt and self._has_route("/config/" + opt, method):
                return "/config/" + opt
        return None

    def _redirect(self, req: Request, method: str, path: str) -> Response:
        location = quote(path, safe="/$&+,:;=@")
        if req.query_string:
            location += "?" + req.query_string.decode("latin-1")
        status = 301 if method == "GET" else 307
        headers: Headers = []
        body = b""
        if method in ("GET", "HEAD"):
            headers.append((b"Content-Type", b"text/html; charset=utf-8"))
        headers.append((b"Location", location.encode("latin-1")))
        if method == "GET":
            text = "Moved Permanently" if status == 301 else "Temporary Redirect"
            body = f'<a href="{_html_escape(location)}">{text}</a>.\n\n'.encode()
        headers += [(b"Date", http_date()), (b"Content-Length", b"%d" % len(body))]
        return status, headers, body

    def _error(self, req: Request, status: int, message: str, allow: bytes = b"") -> Response:
        start = time.perf_counter_ns()
        headers, body = render_v1(status, message)
        if allow:
            headers.insert(0, (b"Allow", allow))
        _log_request(req, status, start)
        return status, headers, body

    def _tls_required(self) -> Response:
        body = b'{"message": "TLS_REQUIRED", "https_port": %d}' % self.https_port
        headers = [_JSON, _V1, (b"Date", http_date()), (b"Content-Length", b"%d" % len(body))]
        return 403, headers, body

    async def _run(
        self,
        handler: Callable[[Request], Awaitable[Any]],
        req: Request,
        logged: bool,
        rendering: str,
    ) -> Response:
        start = time.perf_counter_ns()
        status = 200
        try:
            data = await handler(req)
        except HTTPError as err:
            status, data = err.status, err.message
        if rendering == RAW:
            return data
        if rendering == PLAIN:  # http_api.PlainText: the text as is, no nsq header
            if data is None:  # nsqd's wrapper panics on an empty result (the debug endpoints)
                log.error("panic in HTTP handler - unknown response type <nil>")
                status, data, rendering = 500, "INTERNAL_ERROR", V1
            else:
                body = data.encode() if isinstance(data, str) else data
                headers = [(b"Date", http_date()), (b"Content-Length", b"%d" % len(body)), _TEXT]
                if logged:
                    _log_request(req, status, start)
                return status, headers, body
        if logged:
            _log_request(req, status, start)
        return status, *render_v1(status, data)

    # -- endpoints ---------------------------------------------------------------------------

    async def ping(self, req: Request) -> str:
        health = stats.health(self.daemon)
        if health != "OK":
            raise HTTPError(500, health)
        return health

    async def info(self, req: Request) -> dict[str, Any]:
        d = self.daemon
        opts = d.options
        http = _http_address(d)
        try:
            hostname = socket.gethostname()
        except OSError as exc:
            raise HTTPError(500, str(exc)) from exc
        return {
            "version": stats.VERSION,
            "broadcast_address": opts.broadcast_address,
            "hostname": hostname,
            "http_port": http[1] if http else 0,
            "tcp_port": d.tcp_address[1] if d.tcp_address else 0,
            "start_time": d.start_time,
            "max_heartbeat_interval": round(opts.max_heartbeat_interval * 1e9),
            "max_output_buffer_size": opts.max_output_buffer_size,
            "max_output_buffer_timeout": round(opts.max_output_buffer_timeout * 1e9),
            "max_deflate_level": opts.max_deflate_level,
        }

    def _topic_from_query(self, req: Request) -> tuple[str, dict[str, list[str]]]:
        """getTopicFromQuery: the topic name, validated (the caller creates the topic)."""
        query = req.query()
        names = query.get("topic")
        if names is None:
            raise HTTPError(400, "MISSING_ARG_TOPIC")
        if not is_valid_name(names[0].encode("utf-8", "surrogateescape")):
            raise HTTPError(400, "INVALID_TOPIC")
        return names[0], query

    async def pub(self, req: Request) -> str:
        max_size = self.max_msg_size
        length = req.content_length()
        if length is not None and length > max_size:
            raise HTTPError(413, "MSG_TOO_BIG")
        body = await req.read(max_size + 1)
        if len(body) > max_size:
            raise HTTPError(413, "MSG_TOO_BIG")
        if not body:
            raise HTTPError(400, "MSG_EMPTY")
        qs = req.query_string
        if qs.startswith(b"topic=") and not qs.translate(None, _PLAIN_QUERY_BYTES):
            name = qs[6:].decode()  # the common case: just ?topic=<valid name>
            if not is_valid_name(qs[6:]):
                raise HTTPError(400, "INVALID_TOPIC")
            try:
                self.daemon.get_topic(name).publish([body])
            except DiskQueueError as exc:
                raise self._publish_failed(exc) from exc
            return "OK"
        name, query = self._topic_from_query(req)
        defer = query.get("defer")
        delay_ms = 0
        if defer is not None:
            delay_ms = _parse_int64(defer[0])
            if delay_ms is None:
                raise HTTPError(400, "INVALID_DEFER")
            delay_ns = _wrap_int64(delay_ms * 1_000_000)
            if delay_ns < 0 or delay_ns > self.max_req_timeout_ns:
                raise HTTPError(400, "INVALID_DEFER")
        try:
            topic = self.daemon.get_topic(name)
            if delay_ms > 0:
                topic.publish_deferred(body, delay_ms)
            else:
                topic.publish([body])
        except DiskQueueError as exc:
            raise self._publish_failed(exc) from exc
        return "OK"

    def _publish_failed(self, exc: Exception) -> HTTPError:
        # nsqd answers any enqueue failure with 503 EXITING; /ping and /stats report it
        self.daemon.storage.last_error = str(exc)
        return HTTPError(503, "EXITING")

    async def mpub(self, req: Request) -> str:
        length = req.content_length()
        if length is not None and length > self.max_body_size:
            raise HTTPError(413, "BODY_TOO_BIG")
        name, query = self._topic_from_query(req)
        topic = self.daemon.get_topic(name)
        binary = query.get("binary")
        binary_mode = False
        if binary is not None:
            value = binary[0]
            if value in _GO_TRUE:
                binary_mode = True
            elif value not in _GO_FALSE:
                binary_mode = True
                log.warning("deprecated value '%s' used for /mpub binary param", value)
        if binary_mode:
            bodies = await self._read_binary_mpub(req)
        else:
            bodies = await self._read_text_mpub(req)
        if bodies:
            try:
                topic.publish(bodies)
            except DiskQueueError as exc:
                raise self._publish_failed(exc) from exc
        return "OK"

    async def _read_text_mpub(self, req: Request) -> list[bytes]:
        read_max = self.max_body_size + 1
        body = await req.read(read_max)
        blocks = body.split(b"\n")
        if body.endswith(b"\n"):
            blocks.pop()  # no block after the last newline
        over = len(body) == read_max
        max_msg = self.max_msg_size
        if not over and (not blocks or max(map(len, blocks)) <= max_msg):
            return [b for b in blocks if b]
        last = len(blocks) - 1
        for i, block in enumerate(blocks):
            if over and i == last:
                raise HTTPError(413, "BODY_TOO_BIG")
            if len(block) > max_msg:
                raise HTTPError(413, "MSG_TOO_BIG")
        return [b for b in blocks if b]  # pragma: no cover - the loop always raises

    async def _read_binary_mpub(self, req: Request) -> list[bytes]:
        head = await _read_exact(req, 4)
        if head is None:
            raise HTTPError(413, "BAD_BODY")
        count = int.from_bytes(head, "big", signed=True)
        max_messages = int((self.max_body_size - 4) / 5)
        if count <= 0 or count > max_messages:
            raise HTTPError(413, "BAD_BODY")
        bodies = []
        for _ in range(count):
            head = await _read_exact(req, 4)
            if head is None:
                raise HTTPError(413, "BAD_MESSAGE")
            size = int.from_bytes(head, "big", signed=True)
            if size <= 0 or size > self.max_msg_size:
                raise HTTPError(413, "BAD_MESSAGE")
            body = await _read_exact(req, size)
            if body is None:
                raise HTTPError(413, "BAD_MESSAGE")
            bodies.append(body)
        return bodies

    async def stats(self, req: Request) -> Any:
        await _read_params(req)
        query = req.query()

        def first(name: str) -> str:
            values = query.get(name)
            return values[0] if values else ""

        include_clients = _BOOL_PARAMS.get(first("include_clients"), True)
        include_mem = _BOOL_PARAMS.get(first("include_mem"), True)
        topics, producers = stats.snapshot(
            self.daemon, first("topic"), first("channel"), include_clients
        )
        memory = stats.memory_stats() if include_mem else None
        if first("format") == "json":
            return stats.stats_json(self.daemon, topics, producers, memory)
        return stats.stats_text(self.daemon, topics, producers, memory)

    # -- topics ------------------------------------------------------------------------------

    async def _existing_topic_arg(self, req: Request, validate: bool) -> Any:
        await _read_params(req)
        name = req.arg("topic")
        if name is None:
            raise HTTPError(400, "MISSING_ARG_TOPIC")
        if validate and not is_valid_name(name.encode("utf-8", "surrogateescape")):
            raise HTTPError(400, "INVALID_TOPIC")
        topic = self.daemon.topics.get(name)
        if topic is None:
            raise HTTPError(404, "TOPIC_NOT_FOUND")
        return topic

    async def topic_create(self, req: Request) -> None:
        name, _ = self._topic_from_query(req)
        self.daemon.get_topic(name)

    async def topic_delete(self, req: Request) -> None:
        topic = await self._existing_topic_arg(req, validate=False)
        self.daemon.delete_topic(topic.name)

    async def topic_empty(self, req: Request) -> None:
        topic = await self._existing_topic_arg(req, validate=True)
        try:
            topic.empty()
        except DiskQueueError as exc:
            log.error("TOPIC(%s): failed to empty - %s", topic.name, exc)
            raise HTTPError(500, "INTERNAL_ERROR") from exc

    async def topic_pause(self, req: Request) -> None:
        topic = await self._existing_topic_arg(req, validate=False)
        topic.pause()
        self.daemon.storage.metadata_changed()  # nsqd.dat keeps the paused flag

    async def topic_unpause(self, req: Request) -> None:
        topic = await self._existing_topic_arg(req, validate=False)
        topic.unpause()
        self.daemon.storage.metadata_changed()

    # -- channels ----------------------------------------------------------------------------

    async def _topic_channel_args(self, req: Request) -> tuple[Any, str]:
        """getExistingTopicFromQuery: (existing topic, validated channel name)."""
        await _read_params(req)
        topic_name = req.arg("topic")
        if topic_name is None:
            raise HTTPError(400, "MISSING_ARG_TOPIC")
        if not is_valid_name(topic_name.encode("utf-8", "surrogateescape")):
            raise HTTPError(400, "INVALID_ARG_TOPIC")
        channel_name = req.arg("channel")
        if channel_name is None:
            raise HTTPError(400, "MISSING_ARG_CHANNEL")
        if not is_valid_name(channel_name.encode("utf-8", "surrogateescape")):
            raise HTTPError(400, "INVALID_ARG_CHANNEL")
        topic = self.daemon.topics.get(topic_name)
        if topic is None:
            raise HTTPError(404, "TOPIC_NOT_FOUND")
        return topic, channel_name

    async def _existing_channel(self, req: Request) -> Any:
        topic, name = await self._topic_channel_args(req)
        channel = topic.channels.get(name)
        if channel is None:
            raise HTTPError(404, "CHANNEL_NOT_FOUND")
        return channel

    async def channel_create(self, req: Request) -> None:
        topic, name = await self._topic_channel_args(req)
        topic.get_channel(name)

    async def channel_delete(self, req: Request) -> None:
        topic, name = await self._topic_channel_args(req)
        if name not in topic.channels:
            raise HTTPError(404, "CHANNEL_NOT_FOUND")
        topic.delete_channel(name)

    async def channel_empty(self, req: Request) -> None:
        channel = await self._existing_channel(req)
        try:
            channel.empty()
        except DiskQueueError as exc:
            log.error("%r: failed to empty - %s", channel, exc)
            raise HTTPError(500, "INTERNAL_ERROR") from exc

    async def channel_pause(self, req: Request) -> None:
        (await self._existing_channel(req)).pause()
        self.daemon.storage.metadata_changed()

    async def channel_unpause(self, req: Request) -> None:
        (await self._existing_channel(req)).unpause()
        self.daemon.storage.metadata_changed()

    # -- /debug ------------------------------------------------------------------------------

    async def set_block_rate(self, req: Request) -> None:
        """Go's block profiler rate: nothing to set here; nsqd's answer on success is a 500."""
        body = await req.read(1 << 20)
        values = req.query()
        for name, value in req.headers:
            if name == b"content-type" and value.startswith(b"application/x-www-form-urlencoded"):
                form = parse_query(body)
                values = {**values, **form} if "rate" in form else values
        text = (values.get("rate") or [""])[0]
        if _parse_int64(text) is None:
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
        return 200, _raw_headers(b"text/html; charset=utf-8", body), body

    async def pprof_cmdline(self, req: Request) -> Response:
        body = "\x00".join(sys.orig_argv).encode("utf-8", "surrogateescape")
        return 200, _raw_headers(b"text/plain; charset=utf-8", body), body

    async def pprof_unavailable(self, req: Request) -> Response:
        return 404, *render_v1(404, "NOT_FOUND")

    # -- /config/:opt ------------------------------------------------------------------------

    async def config(self, req: Request) -> Any:
        name = req.params
        if req.method == "PUT":
            read_max = self.max_msg_size + 1
            body = await req.read(read_max)
            if len(body) == read_max or not body:
                raise HTTPError(413, "INVALID_VALUE")
            opts = self.daemon.options
            if name == "nsqlookupd_tcp_addresses":
                try:
                    value = json.loads(body.decode("utf-8", "replace"))
                except ValueError:
                    raise HTTPError(400, "INVALID_VALUE") from None
                if value is not None and not (
                    isinstance(value, list) and all(isinstance(v, str) for v in value)
                ):
                    raise HTTPError(400, "INVALID_VALUE")
                opts.values["lookupd_tcp_address"] = value
                self.daemon.lookupd.set_addresses(value or [])  # reconciled at once, as nsqd
            elif name == "log_level":
                level = body.decode("utf-8", "replace").lower()
                if level not in LEVELS:
                    raise HTTPError(400, "INVALID_VALUE")
                opts.values["log_level"] = level
                log.setLevel(LEVELS[level])
            else:
                raise HTTPError(400, "INVALID_OPTION")
        return config_value(self.daemon, name)


_PLAIN_QUERY_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-#="
_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_BOOL_PARAMS = {"true": True, "1": True, "false": False, "0": False}
_INT64 = re.compile(r"[+-]?[0-9]+\Z")


async def _read_params(req: Request) -> None:
    """http_api.NewReqParams reads the whole body: one it cannot read is INVALID_REQUEST."""
    try:
        await req.drain()
    except BodyError:
        raise HTTPError(400, "INVALID_REQUEST") from None


async def _read_exact(req: Request, n: int) -> bytes | None:
    """readMPUBBinary's reads: a body that cannot be read counts as one that ends early."""
    try:
        return await req.read_exact(n)
    except BodyError:
        return None


def _parse_int64(text: str) -> int | None:
    """strconv.ParseInt(s, 10, 64)."""
    if not _INT64.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _wrap_int64(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


def _html_escape(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&#34;")
        .replace("'", "&#39;")
    )


def clean_path(path: str) -> str:
    """httprouter.CleanPath: path.Clean that keeps a trailing slash."""
    if not path:
        return "/"
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    clean = "/" + "/".join(out)
    if path.endswith("/") and clean != "/":
        clean += "/"
    return clean


def _log_request(req: Request, status: int, start_ns: int) -> None:
    """http_api.Log: `200 GET /stats?format=json (127.0.0.1:51234) 65.643µs`."""
    if not log.isEnabledFor(logging.INFO):
        return
    elapsed = time.perf_counter_ns() - start_ns
    uri = req.raw_path.decode("latin-1")
    if req.query_string:
        uri += "?" + req.query_string.decode("latin-1")
    log.info(
        "%d %s %s (%s:%d) %s",
        status,
        req.method,
        uri,
        req.client[0],
        req.client[1],
        stats.go_duration(elapsed),
    )


# -- the server ----------------------------------------------------------------------------------


class HTTPServer:
    """nsqd's HTTP and HTTPS listeners: `bind` (in NSQD.run, before the task tree starts),
    `serve` in the root nursery, `close` on shutdown. HTTPS is served on --https-address when
    the daemon has a TLS context (--tls-cert and --tls-key), as nsqd does."""

    def __init__(self, daemon: NSQD) -> None:
        self.daemon = daemon
        self.api = API(daemon)
        self.address: tuple[str, int] | None = None
        self.https_address: tuple[str, int] | None = None
        self._listeners: list[tuple[trio.SocketListener, ssl.SSLContext | None]] = []
        opts = daemon.options
        self.server = http_server.Server(
            self.api.handle,
            request_class=Request,
            require_client_cert=opts.tls_client_auth_policy == "require",
        )
        stats.track_gc_pauses()

    async def bind(self) -> tuple[str, int]:
        """Listen on --http-address, and --https-address with TLS (nsqd's error text if that
        fails); the bound HTTP address."""
        opts = self.daemon.options
        listeners = await open_listeners(opts.http_address)
        self.address = listeners[0].socket.getsockname()[:2]
        self._listeners = [(listener, None) for listener in listeners]
        context = self.daemon.tls_context
        if context is not None and opts.https_address:
            secure = await open_listeners(opts.https_address)
            self.https_address = secure[0].socket.getsockname()[:2]
            self.api.https_port = self.https_address[1]
            self._listeners += [(listener, context) for listener in secure]
        return self.address

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self.https_address is not None:
            log.info("HTTPS: listening on %s:%d", *self.https_address)
        await self.server.serve(self._listeners, task_status=task_status)

    def close(self) -> None:
        """Stop accepting; requests under way get a moment to finish."""
        if self.address is not None and not self.server.closing:
            log.info("HTTP: closing %s:%d", *self.address)
            if self.https_address is not None:
                log.info("HTTPS: closing %s:%d", *self.https_address)
        self.server.close()
