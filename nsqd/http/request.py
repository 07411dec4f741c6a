"""One HTTP request as a handler sees it: its head as parsed and its body, read on demand from
the connection (nsqd/http/server.py) within the limits the handler asks for."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import parser
    from .server import Connection, Headers


class BodyError(Exception):
    """The request body could not be read: the client went away or sent a malformed body."""


class Request:
    """One request: its head as parsed, and its body to be read by the handler."""

    __slots__ = (
        "_conn",
        "_kept",
        "client",
        "headers",
        "http_version",
        "method",
        "path",
        "query_string",
        "raw_path",
        "target",
        "tls",
    )

    def __init__(
        self,
        conn: Connection,
        event: parser.RequestHead,
        headers: Headers,
        path: str,
        raw_path: bytes,
        query_string: bytes,
    ) -> None:
        self._conn = conn
        self._kept: bytes | None = None  # put_back's
        self.method: str = event.method.decode("ascii")
        self.target: bytes = event.target
        self.http_version: bytes = event.http_version
        self.headers = headers  # names in lower case
        self.path = path
        self.raw_path = raw_path
        self.query_string = query_string
        self.client: tuple[str, int] = conn.client
        self.tls: bool = conn.tls

    def header(self, name: bytes) -> bytes | None:
        """The first value of a header (`name` in lower case), None if absent."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def content_length(self) -> int | None:
        value = self.header(b"content-length")
        return None if value is None else int(value)  # h11 checked it is a number

    async def read(self, limit: int) -> bytes:
        """At most `limit` bytes of the body (io.LimitReader): more may remain unread."""
        kept = self._kept
        if kept is not None:
            self._kept = kept[limit:]
            return kept[:limit]
        conn = self._conn
        chunk = await conn.body_chunk()
        if len(chunk) >= limit or not chunk:
            if len(chunk) > limit:
                conn.unread = chunk[limit:]
                return chunk[:limit]
            return chunk
        chunks = [chunk]
        size = len(chunk)
        while size < limit:
            chunk = await conn.body_chunk()
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        body = b"".join(chunks)
        if size > limit:
            conn.unread = body[limit:]
            body = body[:limit]
        return body

    def put_back(self, body: bytes) -> None:
        """The body as read whole by a wrapper before the handler it calls: the handler's
        reads get it again (and nothing after it)."""
        self._kept = body

    async def read_exact(self, n: int) -> bytes | None:
        """Exactly `n` bytes of the body, or None if it ends first."""
        data = await self.read(n)
        while 0 < len(data) < n:
            more = await self.read(n - len(data))
            if not more:
                break
            data += more
        return data if len(data) == n else None

    async def drain(self) -> None:
        """Read and drop the whole body (as nsqd's NewReqParams does; keeps keep-alive)."""
        conn = self._conn
        while await conn.body_chunk():
            pass
