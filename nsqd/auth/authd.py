"""Asking the --auth-http-address servers (nsqd's internal/auth): the request URL byte for byte as
Go's, one HTTP client per node with nsqd's outbound TLS settings, the 403-to-HTTPS retry, and the
random rotation over the servers."""

from __future__ import annotations

import json
import math
import random
import ssl
from typing import TYPE_CHECKING
from urllib.parse import quote_plus, urlsplit, urlunsplit

import httpx
import trio

from ..log import log
from .grants import AuthError, AuthState, _fields, _Object, parse_auth_response

if TYPE_CHECKING:
    from ..node import Node


ACCEPT = "application/vnd.nsq; version=1.0"


_MAX_REDIRECTS = 10  # Go's http.Client default


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
    client = node.auth_http
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
        node.auth_http = client
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
