"""Redirects as the Go nsqd makes them: httprouter's RedirectTrailingSlash and
RedirectFixedPath (a trailing slash added or removed, a cleaned, case-insensitive match, the
`/config/:opt` forms) choose where, and net/http's http.Redirect writes the answer (301 for GET,
307 otherwise, the Location escaped as Go escapes it, a short HTML body for GET)."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote

from .gonet import url_prefix
from .v1 import Headers, Request, Response, http_date


def fixed_path(
    path: str, method: str, has_route: Callable[[str, str], bool], lower_paths: dict[str, str]
) -> str | None:
    """Where httprouter's RedirectTrailingSlash and RedirectFixedPath send `path`, or None."""
    # the trailing slash first, then a cleaned, case-insensitive match
    if len(path) > 1 and path.endswith("/") and has_route(path[:-1], method):
        return path[:-1]
    # httprouter: a :opt, even an empty one, then one slash (`/config//` to `/config/`)
    opt_slash = len(path) > 8 and path.startswith("/config/") and path.endswith("/")
    if opt_slash and "/" not in path[8:-1] and has_route("/config/x", method):
        return path[:-1]
    if not path.endswith("/") and has_route(path + "/", method):
        return path + "/"
    clean = clean_path(path)
    lower = clean.lower()
    candidates = [lower]
    if len(lower) > 1 and lower.endswith("/"):
        candidates.append(lower[:-1])
    else:
        candidates.append(lower + "/")
    for candidate in candidates:
        fixed = lower_paths.get(candidate)
        if fixed is not None and has_route(fixed, method):
            return fixed
    if lower.startswith("/config/"):
        opt = clean[8:]
        if opt.endswith("/"):
            opt = opt[:-1]
        if opt and "/" not in opt and has_route("/config/" + opt, method):
            return "/config/" + opt
    return None


def redirect(req: Request, method: str, path: str) -> Response:
    """http.Redirect's answer to `req`, to `path`: 301 for GET, 307 otherwise."""
    prefix = url_prefix(req.target).decode("latin-1")
    escaped = quote(path, safe="/$&+,:;=@")
    # http.Redirect cleans a URL with no scheme and host (keeping a trailing slash)
    location = (prefix + escaped if prefix else clean_path(escaped)) + query_suffix(req)
    status = 301 if method == "GET" else 307
    headers: Headers = []
    body = b""
    if method in ("GET", "HEAD"):
        headers.append((b"Content-Type", b"text/html; charset=utf-8"))
    headers.append((b"Location", _hex_escape_non_ascii(location.encode("latin-1"))))
    if method == "GET":
        text = "Moved Permanently" if status == 301 else "Temporary Redirect"
        # the query's bytes as they came (http.Redirect escapes only the header's)
        body = f'<a href="{_html_escape(location)}">{text}</a>.\n\n'.encode("latin-1")
    headers += [(b"Date", http_date()), (b"Content-Length", b"%d" % len(body))]
    return status, headers, body


_NON_ASCII = re.compile(rb"[\x80-\xff]")


def _hex_escape_non_ascii(url: bytes) -> bytes:
    """http.Redirect's hexEscapeNonASCII: a byte past ASCII as %xx, in lower case."""
    return _NON_ASCII.sub(lambda m: b"%%%x" % m[0][0], url)


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


def query_suffix(req: Request) -> str:
    """The target's `?query` as Go's URL.String() writes it back: a lone `?` that ends the
    target is kept too (url.ParseRequestURI's ForceQuery), none where there was no `?`."""
    if req.query_string or (req.target.endswith(b"?") and req.target.count(b"?") == 1):
        return "?" + req.query_string.decode("latin-1")
    return ""
