"""nsqd's HTTP API, served by http.server (on Trio, its parser behind http.parser) on
--http-address and, with a certificate, --https-address.

The handlers live by concern in http.publish (/pub, /mpub), http.admin (/topic/*,
/channel/*, /config/:opt) and http.info (/ping, /info, /stats, /debug/*); they take a
Request and return data or raise HTTPError, and http.v1 renders the result in nsqd's V1
format. This module holds the route table and the routing, which follows the httprouter nsqd
uses: exact paths plus `/config/:opt`, 405 with an Allow header, OPTIONS answered from the
route table, a trailing slash or a wrong-case / unclean path redirected (301 for GET, 307
otherwise: http.redirects), everything else 404 NOT_FOUND.

`API.handle(request)` returns `(status, headers, body)`. Each HTTP connection is its own task,
so a slow or broken HTTP client never holds up the TCP protocol. `API.route_now` gives the
server's reactor the synchronous form of POST /pub and /mpub for requests wholly received."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..engine.api import Refused, WriteBatch
from ..gocompat.json import go_json
from ..gocompat.timefmt import go_duration
from ..log import log
from ..metrics.memory import track_gc_pauses
from ..net.boundary import describe
from ..net.listeners import open_listeners
from . import redirects
from . import server as http_server
from .admin import AdminHandlers
from .attributes import AttributeHandlers
from .info import InfoHandlers
from .messages import MessageHandlers
from .publish import PublishHandlers
from .queues import QueueHandlers
from .server import BodyError
from .v1 import (
    PLAIN,
    RAW,
    V1,
    HTTPError,
    JSONBody,
    Request,
    Response,
    as_http_error,
    http_date,
    json_headers,
    plain_headers,
    render_v1,
    respond_ok,
)

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..net.reactor import Loop
    from ..node import Node

Handler = Callable[[Request], Awaitable[Any]]
Route = tuple[Handler, bool, str]  # (handler, logged, rendering: V1, PLAIN or RAW)
SyncRoute = Callable[[bytes, int, bytes], Response]  # (query string, length, body) -> answer
RELAYED = ("/pub", "/mpub")  # the publishes a Relay may take elsewhere


class Relay(Protocol):
    """Where a publish is answered when another process must make it (a group's
    de-duplication keys have one owner per topic: nsqd/group/keys.py)."""

    def elsewhere(self, query_string: bytes) -> bool:
        """Whether the /pub or /mpub with this query string is another process's."""
        ...

    async def forward(self, req: Request) -> Response:
        """That process's answer to the request, body and all."""
        ...


class Here:
    """The Relay of a lone daemon: every publish is made here."""

    def elsewhere(self, query_string: bytes) -> bool:
        return False

    async def forward(self, req: Request) -> Response:
        raise AssertionError("a lone daemon relays nothing")


class API:
    """The route table over nsqd's handlers; `handle` answers one request."""

    def __init__(
        self, node: Node, broker: Broker, set_lookupd: Callable[[list[str]], None]
    ) -> None:
        self.tls_required = node.options.tls_required == "true"
        self.https_port = 0  # the bound --https-address port, for TLS_REQUIRED
        self.publish = PublishHandlers(node.options, broker)
        self.admin = AdminHandlers(node, broker, set_lookupd)
        self.info = InfoHandlers(node, broker)
        self.queues = QueueHandlers(self.admin.existing_channel, node.options.max_req_timeout)
        self.attributes = AttributeHandlers(node, broker)
        self.messages = MessageHandlers(node, broker)
        self.relay: Relay = Here()  # a group's worker puts its own (nsqd/group/keys.py)
        # paths a group's workers ask each other (nsqd/group/): a client's request to one
        # gets nsqd's 404 whatever its method, as the Go nsqd, which has no such path
        self.peer_only: set[str] = set()
        self.routes: dict[str, dict[str, Route]] = self._route_table()
        config = self.admin.config
        self.param_routes: dict[str, dict[str, Route]] = {
            "/config/": {"GET": (config, True, V1), "PUT": (config, True, V1)},
        }
        self.methods = sorted(
            {m for table in (self.routes, self.param_routes) for r in table.values() for m in r}
        )
        self.lower_paths = {p.lower(): p for p in self.routes}

    def _route_table(self) -> dict[str, dict[str, Route]]:
        """path -> method -> (handler, logged, rendering)."""
        pub, info = self.publish, self.info
        routes: dict[str, dict[str, Route]] = {
            "/ping": {"GET": (info.ping, True, PLAIN)},
            "/info": {"GET": (info.info, True, V1)},
            "/stats": {"GET": (info.stats, True, V1)},
            "/metrics": {"GET": (info.metrics, True, RAW)},  # ours: Prometheus
            "/pub": {"POST": (pub.pub, False, V1)},
            "/mpub": {"POST": (pub.mpub, False, V1)},
            "/debug/setblockrate": {"PUT": (info.set_block_rate, True, PLAIN)},
            "/debug/freememory": {"POST": (info.free_memory, True, PLAIN)},
            "/debug/pprof/": {"GET": (info.pprof_index, False, RAW)},
            "/debug/pprof/cmdline": {"GET": (info.pprof_cmdline, False, RAW)},
            "/debug/pprof/symbol": {
                "GET": (info.pprof_unavailable, False, RAW),
                "POST": (info.pprof_unavailable, False, RAW),
            },
        }
        for name in ("profile", "heap", "goroutine", "block", "threadcreate"):
            routes[f"/debug/pprof/{name}"] = {"GET": (info.pprof_unavailable, False, RAW)}
        for kind in ("topic", "channel"):
            for action in ("create", "delete", "empty", "pause", "unpause"):
                handler = getattr(self.admin, f"{kind}_{action}")
                routes[f"/{kind}/{action}"] = {"POST": (handler, True, V1)}
        # ours, not nsqd's: deferred messages by id
        routes["/message/cancel"] = {"POST": (self.queues.cancel, True, V1)}
        routes["/message/defer"] = {"POST": (self.queues.defer, True, V1)}
        # ours: messages seen and taken over HTTP
        m = self.messages
        routes["/channel/peek"] = {"GET": (m.peek, True, V1)}
        routes["/channel/receive"] = {"POST": (m.receive, True, V1)}
        routes["/channel/pop"] = {"POST": (m.pop, True, V1)}
        for verb in ("fin", "req", "touch"):
            routes[f"/message/{verb}"] = {"POST": (getattr(m, verb), True, V1)}
        # ours: queue attributes (policies)
        for kind in ("topic", "channel"):
            handler = getattr(self.attributes, f"{kind}_config")
            routes[f"/{kind}/config"] = {"GET": (handler, True, V1), "POST": (handler, True, V1)}
        return routes

    # -- entry --------------------------------------------------------------------------------

    async def handle(self, req: Request) -> Response:
        # the benchmarked path first
        if (
            req.path == "/pub"
            and req.method == "POST"
            and (req.tls or not self.tls_required)
            and not self.relay.elsewhere(req.query_string)
        ):
            try:
                await self.publish.pub(req)
            except HTTPError as err:
                return err.status, *render_v1(err.status, _error_data(err))
            except BodyError:
                return 500, *render_v1(500, "INTERNAL_ERROR")
            except Exception as exc:
                return _internal_error("POST /pub", exc)
            return respond_ok()
        try:
            return await self._dispatch(req)
        except BodyError:  # nsqd answers a body it cannot read with a 500
            return 500, *render_v1(500, "INTERNAL_ERROR")
        except Exception as exc:
            return _internal_error(f"{req.method} {req.path}", exc)

    def route_now(self, method: bytes, raw_path: bytes, query_string: bytes) -> SyncRoute | None:
        """The synchronous form of a route whose whole body is at hand (the HTTP reactor's:
        nsqd/http/reactor.py), or None if the request must go to `handle`. Its answers are
        `handle`'s for the same request, byte for byte."""
        if method != b"POST" or self.tls_required:  # plain HTTP only: tls_required is a 403
            return None
        if raw_path == b"/pub":
            route = self._pub_now
        elif raw_path == b"/mpub":
            route = self._mpub_now
        else:
            return None
        return None if self.relay.elsewhere(query_string) else route

    def _pub_now(self, query_string: bytes, length: int, body: bytes) -> Response:
        """`handle`'s /pub path."""
        try:
            self.publish.pub_now(query_string, length, body)
        except HTTPError as err:
            return err.status, *render_v1(err.status, _error_data(err))
        except Exception as exc:
            return _internal_error("POST /pub", exc)
        return respond_ok()

    def _mpub_now(self, query_string: bytes, length: int, body: bytes) -> Response:
        """`_run`'s for /mpub (V1, not logged) and `handle`'s errors."""
        status = 200
        try:
            data: Any = self.publish.mpub_now(query_string, length, body)
        except HTTPError as err:
            status, data = err.status, _error_data(err)
        except Exception as exc:
            return _internal_error("POST /mpub", exc)
        return status, *render_v1(status, data)

    async def _dispatch(self, req: Request) -> Response:
        if self.tls_required and not req.tls:
            return self._tls_required()
        method = req.method
        path = req.path
        if path in self.peer_only and not req.peer:
            return self._error(req, 404, "NOT_FOUND")
        if method == "POST" and path in RELAYED and self.relay.elsewhere(req.query_string):
            return await self.relay.forward(req)
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
            location = redirects.fixed_path(path, method, self._has_route, self.lower_paths)
            if location is not None:
                return redirects.redirect(req, method, location)
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

    def _error(self, req: Request, status: int, message: str, allow: bytes = b"") -> Response:
        start = time.perf_counter_ns()
        headers, body = render_v1(status, message)
        if allow:
            headers.insert(0, (b"Allow", allow))
        _log_request(req, status, start)
        return status, headers, body

    def _tls_required(self) -> Response:
        body = b'{"message": "TLS_REQUIRED", "https_port": %d}' % self.https_port
        return 403, json_headers(body), body

    async def _run(
        self,
        handler: Handler,
        req: Request,
        logged: bool,
        rendering: str,
    ) -> Response:
        start = time.perf_counter_ns()
        status = 200
        try:
            data = await handler(req)
        except (HTTPError, Refused) as exc:
            err = as_http_error(exc)
            status, data = err.status, _error_data(err)
        if rendering == RAW:
            if logged:
                _log_request(req, data[0], start)
            return data
        if rendering == PLAIN:  # http_api.PlainText: the text as is, no nsq header
            if data is None:  # nsqd's wrapper panics on an empty result (the debug endpoints)
                log.error("panic in HTTP handler - unknown response type <nil>")
                status, data, rendering = 500, "INTERNAL_ERROR", V1
            else:
                body = data.encode() if isinstance(data, str) else data
                if logged:
                    _log_request(req, status, start)
                return status, plain_headers(body), body
        if logged:
            _log_request(req, status, start)
        return status, *render_v1(status, data)


def _log_request(req: Request, status: int, start_ns: int) -> None:
    """http_api.Log: `200 GET /stats?format=json (127.0.0.1:51234) 65.643µs`."""
    if not log.isEnabledFor(logging.INFO):
        return
    elapsed = time.perf_counter_ns() - start_ns
    uri = req.raw_path.decode("latin-1") + redirects.query_suffix(req)
    log.info(
        "%d %s %s (%s:%d) %s",
        status,
        req.method,
        uri,
        req.client[0],
        req.client[1],
        go_duration(elapsed),
    )


# -- the server ----------------------------------------------------------------------------------


class HTTPServer:
    """nsqd's HTTP and HTTPS listeners: `bind` (in NSQD.run, before the task tree starts),
    `serve` in the root nursery, `close` on shutdown. HTTPS is served on --https-address when
    the daemon has a TLS context (--tls-cert and --tls-key), as nsqd does."""

    def __init__(
        self,
        node: Node,
        broker: Broker,
        set_lookupd: Callable[[list[str]], None],
        loop: Loop | None = None,
        commit: WriteBatch | None = None,
    ) -> None:
        self.node = node
        self.api = API(node, broker, set_lookupd)
        self.address: tuple[str, int] | None = None
        self.https_address: tuple[str, int] | None = None
        self._listeners: list[tuple[trio.SocketListener, ssl.SSLContext | None]] = []
        opts = node.options
        self.server = http_server.Server(
            self.api.handle,
            request_class=Request,
            route_now=self.api.route_now,
            require_client_cert=opts.tls_client_auth_policy == "require",
            loop=loop,
            commit=commit,  # the stores' group commit: the reactor's publishes answer after it
        )
        track_gc_pauses()

    async def bind(self) -> tuple[str, int]:
        """Listen on --http-address, and --https-address with TLS (nsqd's error text if that
        fails); the bound HTTP address."""
        opts = self.node.options
        listeners = await open_listeners(opts.http_address)
        self.address = listeners[0].socket.getsockname()[:2]
        self._listeners = [(listener, None) for listener in listeners]
        context = self.node.tls_context
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


def _error_data(err: HTTPError) -> Any:
    """An error's V1 data: nsqd's message, or {"message", ...} with its extra keys (ours: the
    detail of a QUEUE_FULL, of an INVALID_VALUE), on every path alike."""
    if not err.extra:
        return err.message
    return JSONBody(go_json({"message": err.message, **err.extra}))


def _internal_error(what: str, exc: Exception) -> Response:
    """A handler's bug: nsqd's 500, and one log line that says what was raised and where
    (our log lines carry no traceback, so log.exception would say nothing)."""
    log.error("HTTP: error in %s - %s", what, describe(exc))
    return 500, *render_v1(500, "INTERNAL_ERROR")
