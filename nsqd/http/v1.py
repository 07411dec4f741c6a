"""nsqd's HTTP V1 conventions, shared by the HTTP API's route table and its handlers.

`HTTPError` carries an error response; `Request` is a request with its query parsed as Go's
url.ParseQuery does; `render_v1` renders a handler's result as nsqd's V1 format: a string as a
raw body, None as an empty 200, anything else as JSON, an error as {"message":"..."}, always
with `X-NSQ-Content-Type: nsq; version=1.0`. `config_value` is an option as /config shows it;
`query_string` a parsed query written back."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from protocol.v2.names import is_valid_name

from ..config.flags import FLAGS
from ..engine.api import Refused
from ..gocompat.json import NilList, go_float, go_json
from . import server as http_server
from .gonet import http_date
from .server import BodyError

if TYPE_CHECKING:
    from ..node import Node

Headers = list[tuple[bytes, bytes]]
Response = tuple[int, Headers, bytes]


class HTTPError(Exception):
    """An error response: status code and nsqd's message text."""

    def __init__(self, status: int, message: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra  # more keys beside "message" (as nsqd's TLS_REQUIRED has)


def refused(exc: Refused) -> HTTPError:
    """The engine's refusal in HTTP's words (its status, nsqd's message, maybe a detail)."""
    return HTTPError(exc.http_status, exc.http_message, exc.http_detail)


def as_http_error(exc: HTTPError | Refused) -> HTTPError:
    """What a handler raised, in HTTP's words."""
    return exc if isinstance(exc, HTTPError) else refused(exc)


class JSONBody(bytes):
    """Handler data that is already encoded JSON (e.g. `null` for an option's nil list)."""


class BinaryBody(bytes):
    """Handler data served as application/octet-stream (nsqd message frames, for example)."""


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


def query_string(query: Mapping[str, Any], doseq: bool = False) -> bytes:
    """`parse_query`'s inverse, for a request passed on to a peer: the bytes a value was
    escaped from come back as they were (surrogateescape: a %ff is not UTF-8)."""
    return urlencode(query, doseq=doseq, encoding="utf-8", errors="surrogateescape").encode()


def parse_query(qs: bytes) -> dict[str, list[str]]:
    """Go's url.ParseQuery: '&'-separated, '+' is a space, a bad escape or a ';' is an error."""
    values, error = parse_query_pairs(qs)
    if error:
        raise HTTPError(400, "INVALID_REQUEST")
    return values


def parse_query_pairs(qs: bytes) -> tuple[dict[str, list[str]], bool]:
    """Go's url.ParseQuery whole: the values of the pairs that parse, and whether one did not
    (Request.FormValue keeps the first and drops the error)."""
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
    return values, error


class Request(http_server.Request):
    """A request as the handlers see it: the query parsed as Go does, the route's parameter,
    and whether a group's peer made it (`peer`: set on a worker's private listener alone, so
    that no client of the public ports gets a worker's answer for the group's)."""

    __slots__ = ("_query", "params", "peer")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._query: dict[str, list[str]] | None = None
        self.params = ""
        self.peer = False

    def query(self) -> dict[str, list[str]]:
        if self._query is None:
            self._query = parse_query(self.query_string)
        return self._query

    def arg(self, name: str) -> str | None:
        """The first value of a query parameter, None if absent (nsqd's ReqParams.Get)."""
        values = self.query().get(name)
        return values[0] if values else None

    def with_args(self, **changed: str) -> Request:
        """This request with some query values changed (a group's worker asking itself and
        its peers for a part of what was asked); the body is the original's, unread."""
        other = copy.copy(self)
        other._query = {**self.query(), **{k: [v] for k, v in changed.items()}}
        other.query_string = query_string(other._query, doseq=True)
        other.target = self.raw_path + b"?" + other.query_string
        return other


# -- rendering ---------------------------------------------------------------------------------

_V1 = (b"X-Nsq-Content-Type", b"nsq; version=1.0")
_JSON = (b"Content-Type", b"application/json; charset=utf-8")
_TEXT = (b"Content-Type", b"text/plain; charset=utf-8")


def json_headers(body: bytes) -> Headers:
    """A V1 JSON body's headers, in Go's order."""
    return [_JSON, _V1, (b"Date", http_date()), (b"Content-Length", b"%d" % len(body))]


def plain_headers(body: bytes) -> Headers:
    """http_api.PlainText: the text as is, no nsq header."""
    return [(b"Date", http_date()), (b"Content-Length", b"%d" % len(body)), _TEXT]


def render_v1(status: int, data: Any) -> tuple[Headers, bytes]:
    """http_api.RespondV1: headers (Go's order) and body."""
    if status != 200:
        body = data if isinstance(data, JSONBody) else go_json({"message": str(data)})
        return json_headers(body), body
    if isinstance(data, JSONBody):
        return json_headers(data), data
    if isinstance(data, BinaryBody):
        return raw_headers(b"application/octet-stream", data), data
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if data is None or isinstance(data, bytes):
        body = data or b""
        headers = [_V1, (b"Date", http_date()), (b"Content-Length", b"%d" % len(body))]
        if body:
            headers.append(_TEXT)  # net/http's content sniffing of a text body
        return headers, body
    body = go_json(data)
    return json_headers(body), body


V1, PLAIN, RAW = "v1", "plain", "raw"  # how a route's result is rendered
_OK_HEADERS_TAIL = [(b"Content-Length", b"2"), _TEXT]


def respond_ok() -> Response:
    """The /pub and /mpub success: a raw `OK`."""
    return 200, [_V1, (b"Date", http_date()), *_OK_HEADERS_TAIL], b"OK"


def raw_headers(content_type: bytes, body: bytes) -> Headers:
    """A body served as is (the /debug/pprof pages): no nsq header, no sniffing."""
    return [
        (b"Content-Type", content_type),
        (b"X-Content-Type-Options", b"nosniff"),
        (b"Date", http_date()),
        (b"Content-Length", b"%d" % len(body)),
    ]


# -- options for /config -------------------------------------------------------------------------

_NOT_IN_GO_OPTIONS = {"config", "version", "verbose", "worker_id"}
_TLS_REQUIRED = {"false": 0, "tcp-https": 1, "true": 2}
_TLS_VERSIONS = {"ssl3.0": 0x0300, "tls1.0": 0x0301, "tls1.1": 0x0302, "tls1.2": 0x0303}
_TLS_VERSIONS["tls1.3"] = 0x0304
_LOG_LEVEL_NUMBERS = {"debug": 1, "info": 2, "warn": 3, "error": 4, "fatal": 5}
_SECRETS = {"resp_password"}  # ours: never answered (400 INVALID_OPTION, as an unknown option)
_FLAGS_BY_CFG = {f.cfg_key: f for f in FLAGS if f.cfg_key not in _NOT_IN_GO_OPTIONS | _SECRETS}


def config_value(node: Node, name: str) -> Any:
    """getOptByCfgName: the option's value as nsqd's Go Options struct holds it."""
    flag = _FLAGS_BY_CFG.get(name)
    if flag is None:
        raise HTTPError(400, "INVALID_OPTION")
    opts = node.options
    value = opts.given.get(flag.attr, opts.values[flag.attr])
    if name == "log_level":
        return _LOG_LEVEL_NUMBERS[str(value).lower()]
    if name == "tls_required":
        return _TLS_REQUIRED.get(value, 0)
    if name == "tls_min_version":
        return _TLS_VERSIONS.get(str(value).lower(), 0)
    if name == "statsd_prefix" and value:
        from ..metrics.statsd import prefix_for  # not at import: --statsd-address's module

        return prefix_for(node)  # %s expanded as nsqd does at startup
    if name == "broadcast_tcp_port":  # nsqd fills in the bound ports at startup
        return node.broadcast_tcp_port
    if name == "broadcast_http_port":
        return node.broadcast_http_port
    if flag.kind == "duration":
        return round(value * 1e9)
    if value is None or type(value) is NilList:  # a nil slice: PUT null, a file's []
        return JSONBody(b"null")
    if flag.kind == "floats":
        return [go_float(v) for v in value]
    return value


# -- reading parameters --------------------------------------------------------------------------


async def read_params(req: Request) -> None:
    """http_api.NewReqParams reads the whole body: one it cannot read is INVALID_REQUEST."""
    try:
        await req.drain()
    except BodyError:
        raise HTTPError(400, "INVALID_REQUEST") from None


def topic_from_query(req: Request) -> tuple[str, dict[str, list[str]]]:
    """getTopicFromQuery: the topic name, validated (the caller creates the topic)."""
    return topic_from(req.query())


def topic_from(query: dict[str, list[str]]) -> tuple[str, dict[str, list[str]]]:
    """getTopicFromQuery on a parsed query."""
    names = query.get("topic")
    if names is None:
        raise HTTPError(400, "MISSING_ARG_TOPIC")
    if not is_valid_name(names[0].encode("utf-8", "surrogateescape")):
        raise HTTPError(400, "INVALID_TOPIC")
    return names[0], query
