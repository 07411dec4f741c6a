"""AUTH through an HTTP auth server, as nsqd v1.3.0 (nsqd/client_v2.go, internal/auth).

A client sends `AUTH <secret>`; nsqd asks one of the --auth-http-address servers (random
rotation, the next one on failure)

    GET http://<addr>/auth?common_name=<cn>&remote_ip=<ip>&secret=<secret>&tls=true|false
    Accept: application/vnd.nsq; version=1.0

(a full URL is used as given when the address contains "://") and caches the answer

    {"ttl": 3600, "identity": "..", "identity_url": "..",
     "authorizations": [{"topic": "<regex>", "channels": ["<regex>"],
                         "permissions": ["subscribe", "publish"]}]}

for `ttl` seconds. PUB/MPUB/DPUB need a "publish" authorization whose topic regex matches and
one of whose channel regexes matches the empty string; SUB needs "subscribe", the topic and
the channel. The first check after the TTL has passed asks the auth server again.

Differences from Go, documented rather than hidden:
* Regexes are RE2 in nsqd and Python `re` here, both unanchored (re.search). The constructs RE2
  refuses and `re` accepts (lookaround, backreferences, atomic groups, possessive quantifiers,
  `\\Z`, repeats over 1000) are refused, and RE2's own spellings (`\\z`, `(?<name>..)`,
  `[[:alpha:]]`, a `{` that starts no repeat) are translated, so that an auth server's answer is
  accepted or refused as nsqd does; RE2-only syntax `re` lacks (`\\pL`, `\\Q..\\E`, `(?U)`,
  `[[:^alpha:]]`, flags in mid-pattern) makes the answer invalid here (AUTH failed) where nsqd
  would take it. Topic and channel names are ASCII without newlines, so matching agrees.
* The cache expiry uses the monotonic clock (nsqd: the wall clock)."""

from __future__ import annotations

import json
import math
import random
import re
import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus, urlsplit, urlunsplit

import httpx
import trio

from protocol import ErrorCode, NSQError
from protocol.gostr import go_quote

from .log import log

if TYPE_CHECKING:
    from collections.abc import Callable

    from .node import Node

ACCEPT = "application/vnd.nsq; version=1.0"
PERMISSIONS = frozenset({"subscribe", "publish"})
_MAX_REDIRECTS = 10  # Go's http.Client default
_INT64 = (-(2**63), 2**63 - 1)


_GO_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json(value: Any) -> bytes:
    """Go's json.Marshal: compact, raw UTF-8, with <, >, & and U+2028/9 escaped."""
    return (
        json.dumps(value, separators=(",", ":"), ensure_ascii=False).translate(_GO_ESCAPES).encode()
    )


class AuthError(Exception):
    """Why an auth server's answer was not used (only logged; clients see `AUTH failed`)."""


# -- Go regexp (RE2) on Python re ------------------------------------------------------------

_RE2_REFUSES = re.compile(
    r"""\(\?(?:[=!]|<[=!]|P=|>|\(|\#)  # lookaround, named backref, atomic, conditional, comment
      | \(\?[imsU-]*[aLux]             # flags RE2 lacks
      | [*+?}][+]                     # possessive quantifier (RE2: invalid nested repetition)
    """,
    re.VERBOSE,
)


_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_POSIX = re.compile(r"\[:(\^?)([a-z]+):\]")
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")
_RE2_MAX_REPEAT = 1000


def compile_go_regex(pattern: str) -> re.Pattern[str]:
    """Compile an RE2 pattern with `re`: refuse what RE2 refuses, translate what RE2 spells
    differently (`\\z`, `(?<name>`, `[[:alpha:]]`, a `{` that does not start a repeat is a
    literal); see the module notes for what is left."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n:
                raise re.error("trailing backslash at end of expression")
            nxt = pattern[i + 1]
            if not in_class and nxt == "z":
                out.append(r"\Z")
            elif nxt == "Z" or (nxt.isdigit() and nxt != "0"):
                raise re.error(f"invalid escape sequence: \\{nxt}")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            posix = _POSIX.match(pattern, i)
            if posix:
                if posix[1] or posix[2] not in _POSIX_CLASSES:
                    raise re.error(f"unsupported character class {posix[0]}")
                out.append(_POSIX_CLASSES[posix[2]])
                i = posix.end()
                continue
            if ch == "]":
                in_class = False
            elif ch in "[&~|":
                ch = "\\" + ch  # literal in RE2; re would warn about set operations
        elif ch == "[":
            in_class = True
            out.append(ch)
            i += 1
            # a ']' (after an optional '^') right at the start is a literal
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        elif ch == "{":
            repeat = _REPEAT.match(pattern, i)
            if repeat is None:
                ch = "\\{"  # RE2: not a repeat, a literal brace
            elif max(int(repeat[1]), int(repeat[3] or 0)) > _RE2_MAX_REPEAT:
                raise re.error(f"invalid repeat count {repeat[0]}")
        elif _NAMED_GROUP.match(pattern, i):
            out.append("(?P<")
            i += 3
            continue
        elif _RE2_REFUSES.match(pattern, i):
            raise re.error(f"RE2 does not support {pattern[i : i + 4]!r}")
        out.append(ch)
        i += 1
    return re.compile("".join(out))


# -- the auth server's answer ----------------------------------------------------------------


@dataclass(frozen=True)
class Authorization:
    topic: re.Pattern[str]
    channels: tuple[re.Pattern[str], ...]
    permissions: frozenset[str]

    def is_allowed(self, topic: str, channel: str) -> bool:
        needed = "subscribe" if channel else "publish"
        if needed not in self.permissions:
            return False
        if not self.topic.search(topic):
            return False
        return any(c.search(channel) for c in self.channels)


@dataclass
class AuthState:
    ttl: int
    identity: str
    identity_url: str
    authorizations: list[Authorization]
    expires: float  # time.monotonic()

    def is_allowed(self, topic: str, channel: str) -> bool:
        return any(a.is_allowed(topic, channel) for a in self.authorizations)

    def is_expired(self) -> bool:
        return self.expires < time.monotonic()


class _Object(list):  # type: ignore[type-arg]
    """A decoded JSON object, as its (key, value) pairs in order."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _fields(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """Go's json.Unmarshal into a struct: keys matched case-insensitively, last one wins,
    unknown keys ignored, null leaves the zero value."""
    if obj is None:
        return {}
    if not isinstance(obj, _Object):
        raise AuthError(f"cannot unmarshal {obj!r} into an object")
    found: dict[str, Any] = {}
    for key, value in obj:
        name = key if key in names else key.casefold()
        if name in names and value is not None:
            found[name] = value
    return found


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise AuthError(f"cannot unmarshal {value!r} into {what} (string)")
    # Go's decoder turns a lone surrogate escape into U+FFFD
    return _SURROGATE.sub("\ufffd", value)


def _strings(value: Any, what: str) -> list[str]:
    if type(value) is not list:
        raise AuthError(f"cannot unmarshal {value!r} into {what} ([]string)")
    return ["" if v is None else _string(v, what) for v in value]


def parse_auth_response(body: bytes) -> AuthState:
    """Decode and validate an auth server's 200 answer, as nsqd's auth.QueryAuthd."""
    try:
        doc = json.loads(
            body.decode("utf-8", "replace"),
            object_pairs_hook=_Object,
            parse_constant=_refuse_constant,
        )
    except (ValueError, RecursionError) as exc:
        raise AuthError(f"invalid JSON: {exc}") from exc
    top = _fields(doc, ("ttl", "identity", "identity_url", "authorizations"))
    ttl = top.get("ttl", 0)
    if type(ttl) is not int or not _INT64[0] <= ttl <= _INT64[1]:
        raise AuthError(f"cannot unmarshal {ttl!r} into ttl (int)")
    identity = _string(top.get("identity", ""), "identity")
    identity_url = _string(top.get("identity_url", ""), "identity_url")
    raw_auths = top.get("authorizations", [])
    if type(raw_auths) is not list:
        raise AuthError("cannot unmarshal authorizations (not an array)")
    authorizations: list[Authorization] = []
    for raw in raw_auths:
        f = _fields(raw, ("topic", "channels", "permissions"))
        topic = _string(f.get("topic", ""), "topic")
        channels = _strings(f.get("channels", []), "channels")
        permissions = _strings(f.get("permissions", []), "permissions")
        for p in permissions:
            if p not in PERMISSIONS:
                raise AuthError(f"unknown permission {p}")
        try:
            topic_re = compile_go_regex(topic)
        except re.error as exc:
            raise AuthError(f"unable to compile topic {topic!r} {exc}") from exc
        channel_res: list[re.Pattern[str]] = []
        for channel in channels:
            try:
                channel_res.append(compile_go_regex(channel))
            except re.error as exc:
                raise AuthError(f"unable to compile channel {channel!r} {exc}") from exc
        authorizations.append(Authorization(topic_re, tuple(channel_res), frozenset(permissions)))
    if ttl <= 0:
        raise AuthError(f"invalid TTL {ttl} (must be >0)")
    return AuthState(ttl, identity, identity_url, authorizations, time.monotonic() + ttl)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


# -- the HTTP side ---------------------------------------------------------------------------


def auth_url(address: str, remote_ip: str, tls: bool, common_name: str, secret: bytes) -> str:
    """The request URL, byte for byte as Go's url.Values.Encode (keys sorted, QueryEscape)."""
    query = "&".join(
        f"{key}={quote_plus(value, safe='')}"
        for key, value in (
            ("common_name", common_name.encode("utf-8", "surrogateescape")),
            ("remote_ip", remote_ip.encode()),
            ("secret", secret),
            ("tls", b"true" if tls else b"false"),
        )
    )
    if "://" in address:
        return f"{address}?{query}"
    return f"http://{address}/auth?{query}"


_TLS_VERSIONS: dict[str | int, ssl.TLSVersion] = {
    "tls1.0": ssl.TLSVersion.TLSv1,
    "tls1.1": ssl.TLSVersion.TLSv1_1,
    "tls1.2": ssl.TLSVersion.TLSv1_2,
    "tls1.3": ssl.TLSVersion.TLSv1_3,
    0x0301: ssl.TLSVersion.TLSv1,
    0x0302: ssl.TLSVersion.TLSv1_1,
    0x0303: ssl.TLSVersion.TLSv1_2,
    0x0304: ssl.TLSVersion.TLSv1_3,
}


def _client_ssl_context(node: Node) -> ssl.SSLContext:
    """nsqd's outbound TLS config: only --tls-root-ca-file's CAs when given (at
    --tls-min-version), else the system roots."""
    opts = node.options
    ctx = ssl.create_default_context(cafile=opts.tls_root_ca_file or None)
    if opts.tls_root_ca_file:
        version = _TLS_VERSIONS.get(
            opts.tls_min_version.lower()
            if isinstance(opts.tls_min_version, str)
            else opts.tls_min_version
        )
        if version is not None:
            try:
                ctx.minimum_version = version
            except ValueError:
                pass  # this OpenSSL cannot go that low: keep its floor
    return ctx


def http_client(node: Node) -> httpx.AsyncClient:
    """One HTTP client per node, made on first use (no proxies from the environment, as
    nsqd's transport; connect timeout from --http-client-connect-timeout)."""
    client: httpx.AsyncClient | None = node.shared.get("auth_http")
    if client is None:
        opts = node.options
        client = httpx.AsyncClient(
            verify=_client_ssl_context(node),
            trust_env=False,
            follow_redirects=True,
            max_redirects=_MAX_REDIRECTS,
            # 0 means no limit, as in Go; the total is bounded in query_authd
            timeout=httpx.Timeout(
                opts.http_client_request_timeout or None,
                connect=opts.http_client_connect_timeout or None,
            ),
        )
        node.shared["auth_http"] = client
    return client


def _https_endpoint(url: str, body: bytes) -> str:
    """Go's http_api.httpsEndpoint: a 403 from a plain-HTTP nsq service names its HTTPS port."""
    try:
        port = _fields(json.loads(body, object_pairs_hook=_Object), ("https_port",)).get(
            "https_port", 0
        )
    except ValueError as exc:
        raise AuthError(f"403 without an https_port: {exc}") from exc
    if type(port) is not int:
        raise AuthError(f"403 with https_port {port!r}")
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is None:
        raise AuthError(f"missing port in address {parts.netloc}")
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return urlunsplit(("https", netloc, parts.path, parts.query, parts.fragment))


async def query_authd(node: Node, url: str) -> AuthState:
    """One auth server, as Go's GETV1: 200 → decode; 403 over http → retry at its https_port;
    anything else is an error. The whole exchange is bounded by --http-client-request-timeout."""
    client = http_client(node)
    timeout = node.options.http_client_request_timeout
    with trio.move_on_after(timeout if timeout > 0 else math.inf) as scope:
        while True:
            try:
                resp = await client.get(url, headers={"Accept": ACCEPT})
            except (httpx.HTTPError, httpx.InvalidURL, ssl.SSLError, OSError, ValueError) as exc:
                raise AuthError(f"{type(exc).__name__}: {exc}") from exc
            if resp.status_code == 200:
                return parse_auth_response(resp.content)
            if resp.status_code == 403 and not url.startswith("https"):
                url = _https_endpoint(url, resp.content)
                continue
            raise AuthError(
                f"got response {resp.status_code} {resp.reason_phrase} {resp.content[:200]!r}"
            )
    assert scope.cancelled_caught
    raise AuthError(f"request timed out after {timeout}s")


async def query_any_authd(
    node: Node, remote_ip: str, tls: bool, common_name: str, secret: bytes
) -> AuthState:
    """Try the configured servers from a random starting point; the last error if none answers."""
    addresses: list[str] = list(node.options.auth_http_address)
    start = random.randrange(len(addresses))
    error: AuthError | None = None
    for i in range(len(addresses)):
        address = addresses[(start + i) % len(addresses)]
        try:
            return await query_authd(node, auth_url(address, remote_ip, tls, common_name, secret))
        except AuthError as exc:
            log.warning("failed auth against %s %s", address, exc)
            error = exc
    assert error is not None
    raise error


# -- per client ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Identity:
    """What the auth server is told about a connection."""

    remote_ip: str
    tls: bool
    common_name: str  # of the client's TLS certificate, "" without one


class ClientAuth:
    """One connection's AUTH secret and cached authorizations."""

    def __init__(self, node: Node, name: str, facts: Callable[[], Identity]) -> None:
        self.node = node
        self.name = name  # for the log
        self._facts = facts  # read at each query: TLS may have been negotiated since
        self.secret = b""
        self.state: AuthState | None = None

    # /stats
    @property
    def authed(self) -> bool:
        """nsqd's HasAuthorizations."""
        return self.state is not None and bool(self.state.authorizations)

    @property
    def identity(self) -> str:
        return self.state.identity if self.state is not None else ""

    @property
    def identity_url(self) -> str:
        return self.state.identity_url if self.state is not None else ""

    async def _query(self) -> None:
        facts = self._facts()
        self.state = await query_any_authd(
            self.node, facts.remote_ip, facts.tls, facts.common_name, self.secret
        )

    async def auth(self, secret: bytes) -> bytes:
        """AUTH: the response body, or nsqd's error."""
        if self.authed:
            raise NSQError(ErrorCode.E_INVALID, "AUTH already set")
        self.secret = secret
        try:
            await self._query()
        except AuthError as exc:
            log.warning("PROTOCOL(V2): [%s] AUTH failed %s", self.name, exc)
            raise NSQError(ErrorCode.E_AUTH_FAILED, "AUTH failed") from exc
        state = self.state
        assert state is not None
        if not state.authorizations:
            raise NSQError(ErrorCode.E_UNAUTHORIZED, "AUTH no authorizations found")
        return go_json(
            {
                "identity": state.identity,
                "identity_url": state.identity_url,
                "permission_count": len(state.authorizations),
            }
        )

    async def check(self, verb: str, topic: str, channel: str = "") -> None:
        """nsqd's CheckAuth before PUB, MPUB, DPUB and SUB (re-asking after the TTL)."""
        if not self.authed:
            raise NSQError(ErrorCode.E_AUTH_FIRST, f"AUTH required before {verb}")
        assert self.state is not None
        if self.state.is_expired():
            try:
                await self._query()
            except AuthError as exc:
                log.warning("PROTOCOL(V2): [%s] AUTH failed %s", self.name, exc)
                raise NSQError(ErrorCode.E_AUTH_FAILED, "AUTH failed") from exc
        if not self.state.is_allowed(topic, channel):
            raise NSQError(
                ErrorCode.E_UNAUTHORIZED,
                f"AUTH failed for {verb} on {go_quote(topic.encode())} "
                f"{go_quote(channel.encode())}",
            )
