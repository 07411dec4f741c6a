"""What Go's net/http says and checks, for nsqd's HTTP server: status lines with Go's reason
phrases, the checks it makes on a request head that h11 lets through, and its plain-text answers
to requests it cannot read (400, 431, 501, 505) or whose Expect it cannot meet (417), and its
Date header, byte for byte."""

from __future__ import annotations

import ast
import re
import time
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

from . import parser

Headers = list[tuple[bytes, bytes]]

# Go's http.StatusText where Python's phrase differs
_GO_REASONS = {413: "Request Entity Too Large", 418: "I'm a teapot", 422: "Unprocessable Entity"}
_REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}
_REASONS.update((code, text.encode()) for code, text in _GO_REASONS.items())

_GO_ERROR_HEADERS = b"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
_BAD_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")
# url.parseHost: a host's %-escapes are of bytes past ASCII only (%25 aside); not in [...]
_ASCII_ESCAPE = re.compile(rb"^(?!\[).*?%(?!25)[0-7][0-9A-Fa-f]", re.S)
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_BAD_HEADER_LINE = re.compile(r"illegal header line: bytearray\((b'.*')\)\Z", re.S)
_MAX_LENGTH = 1 << 63
_SCHEME = re.compile(rb"[A-Za-z][-+.A-Za-z0-9]*:")
# httpguts.ValidHostHeader's bytes
_HOST_BYTES = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!$%&()*+,-.:;=[']_~"

_date_cache: list[Any] = [0, b""]
# RFC 7231's IMF-fixdate names (not the locale's), as email.utils.formatdate writes them
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date() -> bytes:
    """net/http's Date header value, now (made once a second)."""
    now = int(time.time())
    if _date_cache[0] != now:
        t = time.gmtime(now)
        _date_cache[0] = now
        _date_cache[1] = (
            f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
        ).encode()
    return _date_cache[1]


_responses: dict[tuple[int, tuple[tuple[bytes, bytes], ...]], parser.Response] = {}


def response(status: int, headers: Headers) -> parser.Response:
    """h11's Response event; the same answers repeat (/pub's `OK` within one Date second),
    and an event is immutable, so recent ones are kept rather than validated again."""
    key = (status, tuple(headers))
    response = _responses.get(key)
    if response is None:
        if len(_responses) >= 64:
            _responses.clear()
        response = parser.Response(status_code=status, headers=headers, reason=reason(status))
        _responses[key] = response
    return response


def reason(status: int) -> bytes:
    return _REASONS.get(status, b"status code %d" % status)


def check_head(event: parser.RequestHead) -> tuple[Headers, str, bytes, bytes] | bytes:
    """(headers, path, raw path, query string) of a request h11 accepted, or net/http's answer to a
    request it refuses: a version other than 1.x, a target that is not a path, a bad escape in
    the path, a Host header with characters a host cannot have, an Expect it cannot meet."""
    if not event.http_version.startswith(b"1.") and not _H2_PREFACE(event):
        return go_status_error(505, "unsupported protocol version")
    raw_path, _, query = event.target.partition(b"?")
    if event.method == b"CONNECT" and not raw_path.startswith(b"/"):
        raw_path = b""  # authority form: net/http's URL has no path (nsqd's router: 404)
    elif not raw_path.startswith(b"/"):
        scheme = _SCHEME.match(raw_path)
        if scheme is not None:  # absolute form, any scheme (url.ParseRequestURI)
            path = _absolute_path(raw_path[scheme.end() :])
            if path is None:
                return go_error(None)
            raw_path = path
        elif raw_path != b"*":
            return go_error(None)
    headers = list(event.headers)
    expect = b""
    for name, value in headers:
        if _CONTROL.search(value):  # h11 lets control characters other than NUL through
            return go_error(None)
        if name == b"host" and value.translate(None, _HOST_BYTES):
            return go_status_error(400, "malformed Host header")
        if name == b"expect" and not expect:  # net/http reads the first one
            expect = value
        elif name == b"content-length" and len(value) > 18 and int(value) >= _MAX_LENGTH:
            return go_error(None)  # past ParseUint(cl, 10, 63); h11 takes any digits
    if expect and not _continue(expect):
        return EXPECTATION_FAILED % http_date()
    # bytes past ASCII are taken raw, as net/http does, and read as an escape of them reads
    path = raw_path.decode("utf-8", "surrogateescape")
    if b"%" not in raw_path:
        return headers, path, raw_path, query
    if _BAD_ESCAPE.search(raw_path):
        return go_error(None)
    return headers, unquote(path, errors="surrogateescape"), raw_path, query


# net/http's answer to an Expect other than 100-continue (sendExpectationFailed), then it closes
EXPECTATION_FAILED = (
    b"HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: %s\r\nContent-Length: 0\r\n\r\n"
)


def _continue(expect: bytes) -> bool:
    """net/http's hasToken(expect, "100-continue"): one of its comma or blank separated
    words, in any case."""
    return b"100-continue" in expect.lower().replace(b"\t", b" ").replace(b",", b" ").split()


_H11_CLOSE = b"\r\nConnection: close\r\n\r\n"


def http10_head(head: bytes, keep_alive: bool) -> bytes:
    """h11's response head to an HTTP/1.0 request as net/http writes it: an HTTP/1.0 status
    line, and no `Connection: close` (h11 closes after any HTTP/1.0 request and says so;
    net/http closes silently, or says `Connection: keep-alive` when it keeps the connection)."""
    if head.endswith(_H11_CLOSE):
        head = head[: -len(_H11_CLOSE)] + b"\r\n\r\n"
    if keep_alive:
        head = head[:-2] + b"Connection: keep-alive\r\n\r\n"
    return b"HTTP/1.0" + head[8:]


def keeps_http10(headers: Headers, response: Headers, status: int, method: bytes) -> bool:
    """Whether net/http keeps an HTTP/1.0 connection after this answer: its client asked with
    `Connection: keep-alive` (in the first Connection header, whatever else is there: even
    `close`) and the answer's length is known."""
    for name, value in headers:
        if name == b"connection":
            if b"keep-alive" not in value.lower().replace(b",", b" ").split():
                return False
            break
    else:
        return False
    if method == b"HEAD" or status < 200 or status in (204, 304):
        return True
    return any(name.lower() == b"content-length" for name, _ in response)


def _absolute_path(rest: bytes) -> bytes | None:
    """The path of an absolute-form target after its scheme, as url.ParseRequestURI finds it:
    after an authority (`//host`), or the rest itself from a `/`; none (b"", nsqd's router
    404s it) for an opaque one (`mailto:x`). None for an authority with a bad escape."""
    if rest.startswith(b"//"):
        authority, slash, path = rest[2:].partition(b"/")
        if _BAD_ESCAPE.search(authority) or _ASCII_ESCAPE.search(authority.rpartition(b"@")[2]):
            return None
        return slash + path
    return rest if rest.startswith(b"/") else b""


def url_prefix(target: bytes) -> bytes:
    """What Go's URL.String() writes before the path of an absolute-form target (a redirect's
    Location is that URL with the path fixed): the scheme in lower case, with the `//authority`
    that follows it if any; b"" for a target that is a path."""
    scheme = None if target.startswith(b"/") else _SCHEME.match(target)
    if scheme is None:
        return b""
    rest = target[scheme.end() :].partition(b"?")[0]
    prefix = scheme.group().lower()
    if rest.startswith(b"//"):
        prefix += b"//" + rest[2:].partition(b"/")[0]
    return prefix


def bad_host(headers: Headers) -> bool:
    """A Host header with characters a host cannot have (httpguts.ValidHostHeader; check_head's
    test, for heads with no other fault)."""
    # a loop, not any() over a generator (0.17 against 0.29 us): once per request
    for name, value in headers:  # noqa: SIM110
        if name == b"host" and value.translate(None, _HOST_BYTES):
            return True
    return False


def _H2_PREFACE(event: parser.RequestHead) -> bool:
    """`PRI * HTTP/2.0`: net/http without HTTP/2 routes it like any request (405 from nsqd)."""
    return event.method == b"PRI" and event.target == b"*" and event.http_version == b"2.0"


def go_status_error(status: int, text: str) -> bytes:
    line = b"%d %s: %s" % (status, reason(status), text.encode())
    return b"HTTP/1.1 " + line + _GO_ERROR_HEADERS + line


def go_error(exc: parser.ProtocolError | None) -> bytes:
    """What net/http writes for a request it could not read."""
    hint = exc.error_status_hint if exc is not None else 400
    if hint == 431:
        line = b"431 Request Header Fields Too Large"
        return b"HTTP/1.1 " + line + _GO_ERROR_HEADERS + line
    if hint == 501:
        return (
            b"HTTP/1.1 501 Not Implemented" + _GO_ERROR_HEADERS + b"Unsupported transfer encoding"
        )
    text = str(exc) if exc is not None else ""
    if text.startswith("Missing mandatory Host"):
        return go_status_error(400, "missing required Host header")
    bad_line = _BAD_HEADER_LINE.match(text)
    if bad_line:  # net/http names a header name with a space in it (only that)
        line: bytes = ast.literal_eval(bad_line.group(1))
        name, colon, _ = line.partition(b":")
        if colon and b" " in name and _TOKEN.fullmatch(name.replace(b" ", b"")):
            return go_status_error(400, "invalid header name")
    return b"HTTP/1.1 400 Bad Request" + _GO_ERROR_HEADERS + b"400 Bad Request"


HTTP_TO_HTTPS = b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
HTTP_STARTS = (b"GET /", b"HEAD ", b"POST ", b"PUT /", b"OPTIO")  # tlsRecordHeaderLooksLikeHTTP
