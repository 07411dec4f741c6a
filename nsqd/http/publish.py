"""nsqd's publishing endpoints: POST /pub (one message, optionally deferred) and POST /mpub
(newline-separated, or `binary` length-prefixed, messages)."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING

from protocol.v2.bodies import PackedBodies
from protocol.v2.names import is_valid_name

from ..engine.api import MAX_TTL_MS, Refused
from ..engine.broker import Broker
from ..gocompat.strconv import parse_int64
from ..log import log
from .server import BodyError
from .v1 import (
    HTTPError,
    Request,
    parse_query,
    refused,
    topic_from,
    topic_from_query,
)

if TYPE_CHECKING:
    from ..config.options import Options

# a binary /mpub reader: yields sizes to read, is sent the bytes (None: the body ended first)
BinaryReader = Generator[int, bytes | None, list[bytes]]
_PLAIN_QUERY_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-#="
_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class PublishHandlers:
    """/pub and /mpub, with the daemon's --max-msg-size, --max-body-size and --max-req-timeout."""

    def __init__(self, opts: Options, broker: Broker) -> None:
        self.broker = broker
        self.max_msg_size: int = opts.max_msg_size
        self.max_body_size: int = opts.max_body_size
        self.max_req_timeout_ns = round(opts.max_req_timeout * 1e9)

    # -- /pub ---------------------------------------------------------------------------------

    async def pub(self, req: Request) -> str:
        length = req.content_length()
        self._check_pub_length(length)
        max_size = self.max_msg_size
        body = await req.read(max_size + 1)
        if len(body) > max_size:
            raise HTTPError(413, "MSG_TOO_BIG")
        return self.publish_one(req.query_string, body)

    def pub_now(self, query_string: bytes, length: int, body: bytes) -> str:
        """/pub with its whole body (`length` bytes) at hand: the reactor's synchronous call."""
        self._check_pub_length(length)
        return self.publish_one(query_string, body)

    def _check_pub_length(self, length: int | None) -> None:
        if length is not None and length > self.max_msg_size:
            raise HTTPError(413, "MSG_TOO_BIG")

    def publish_one(self, qs: bytes, body: bytes) -> str:
        """/pub once its body is read (within --max-msg-size)."""
        if not body:
            raise HTTPError(400, "MSG_EMPTY")
        if qs.startswith(b"topic=") and not qs.translate(None, _PLAIN_QUERY_BYTES):
            name = qs[6:].decode()  # the common case: just ?topic=<valid name>
            if not is_valid_name(qs[6:]):
                raise HTTPError(400, "INVALID_TOPIC")
            try:
                self.broker.publish(name, [body])
            except Refused as exc:
                raise refused(exc) from exc
            return "OK"
        name, query = topic_from(parse_query(qs))
        ttl_ms = _ttl(query)
        key = query.get("dedupe_key")
        delay_ms = self._defer_ms(name, query.get("defer"))
        try:
            if delay_ms > 0 and not ttl_ms:
                self.broker.publish_deferred(name, body, delay_ms, key[0] if key else "")
            elif delay_ms > 0:
                raise HTTPError(400, "INVALID_TTL", {"detail": "ttl and defer together"})
            else:
                self.broker.publish(name, [body], ttl_ms, [key[0]] if key else None)
        except Refused as exc:
            raise refused(exc) from exc
        return "OK"

    def _defer_ms(self, name: str, defer: list[str] | None) -> int:
        """/pub's `defer` in ms (0 without one). nsqd makes the topic before it reads `defer`,
        so a refused one leaves the topic made, as there."""
        if defer is None:
            return 0
        delay_ms = parse_int64(defer[0])
        limit = self.max_req_timeout_ns
        if delay_ms is None or not 0 <= _wrap_int64(delay_ms * 1_000_000) <= limit:
            self.broker.create_topic(name)
            raise HTTPError(400, "INVALID_DEFER")
        return delay_ms

    # -- /mpub --------------------------------------------------------------------------------

    async def mpub(self, req: Request) -> str:
        self._check_mpub_length(req.content_length())
        name, query = topic_from_query(req)
        ttl_ms, binary_mode = self._mpub_start(name, query)
        if binary_mode:
            bodies: Sequence[bytes] = await self._read_binary_mpub(req)
        else:
            bodies = self._text_bodies(await req.read(self.max_body_size + 1))
        return self._mpub_finish(name, query, ttl_ms, bodies)

    def mpub_now(self, query_string: bytes, length: int, body: bytes) -> str:
        """/mpub with its whole body (`length` bytes) at hand: the reactor's synchronous call."""
        self._check_mpub_length(length)
        name, query = topic_from(parse_query(query_string))
        ttl_ms, binary_mode = self._mpub_start(name, query)
        if binary_mode:
            bodies: Sequence[bytes] = _binary_from_bytes(self._binary_mpub(), body)
        else:
            bodies = self._text_bodies(body[: self.max_body_size + 1])
        return self._mpub_finish(name, query, ttl_ms, bodies)

    def _check_mpub_length(self, length: int | None) -> None:
        if length is not None and length > self.max_body_size:
            raise HTTPError(413, "BODY_TOO_BIG")

    def _mpub_start(self, name: str, query: dict[str, list[str]]) -> tuple[int, bool]:
        """(ttl, binary) of an /mpub; its topic is made before the body is read, as nsqd."""
        ttl_ms = _ttl(query)
        self.broker.create_topic(name)
        binary = query.get("binary")
        binary_mode = False
        if binary is not None:
            value = binary[0]
            if value in _GO_TRUE:
                binary_mode = True
            elif value not in _GO_FALSE:
                binary_mode = True
                log.warning("deprecated value '%s' used for /mpub binary param", value)
        return ttl_ms, binary_mode

    def _mpub_finish(
        self, name: str, query: dict[str, list[str]], ttl_ms: int, bodies: Sequence[bytes]
    ) -> str:
        if bodies:
            keys = _batch_keys(query, len(bodies))
            try:
                self.broker.publish(name, bodies, ttl_ms, keys)
            except Refused as exc:
                raise refused(exc) from exc
        return "OK"

    def _text_bodies(self, body: bytes) -> Sequence[bytes]:
        """The messages of a text /mpub body read up to --max-body-size + 1 bytes."""
        over = len(body) == self.max_body_size + 1
        max_msg = self.max_msg_size
        if not over:
            packed = _uniform_lines(body, max_msg)
            if packed is not None:
                return packed
        blocks = body.split(b"\n")
        if body.endswith(b"\n"):
            blocks.pop()  # no block after the last newline
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
        steps = self._binary_mpub()
        size = next(steps)
        while True:
            try:
                size = steps.send(await _read_exact(req, size))
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]

    def _binary_mpub(self) -> BinaryReader:
        """readMPUBBinary without its I/O: yields how many bytes it reads next and is sent
        them (None if the body ends first); returns the messages."""
        head = yield 4
        if head is None:
            raise HTTPError(413, "BAD_BODY")
        count = int.from_bytes(head, "big", signed=True)
        max_messages = int((self.max_body_size - 4) / 5)
        if count <= 0 or count > max_messages:
            raise HTTPError(413, "BAD_BODY")
        bodies = []
        for _ in range(count):
            head = yield 4
            if head is None:
                raise HTTPError(413, "BAD_MESSAGE")
            size = int.from_bytes(head, "big", signed=True)
            if size <= 0 or size > self.max_msg_size:
                raise HTTPError(413, "BAD_MESSAGE")
            body = yield size
            if body is None:
                raise HTTPError(413, "BAD_MESSAGE")
            bodies.append(body)
        return bodies


def _binary_from_bytes(steps: BinaryReader, body: bytes) -> list[bytes]:
    """Run a binary /mpub reader over a body wholly at hand."""
    size = next(steps)
    pos = 0
    end = len(body)
    while True:
        chunk = body[pos : pos + size] if pos + size <= end else None
        pos = pos + size if chunk is not None else end
        try:
            size = steps.send(chunk)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def _uniform_lines(body: bytes, max_msg: int) -> PackedBodies | None:
    """The common /mpub body, lines of one length (within max_msg), each ended by a newline
    but perhaps the last: the same bodies as split and filtered below, kept in `body` and cut
    out when read (no bytes object per message while it is queued). None otherwise."""
    if type(body) is not bytes:
        body = bytes(body)  # the items must be bytes, as split() gives
    size = body.find(b"\n")
    if size <= 0 or size > max_msg:
        return None
    newlines = body.count(b"\n")
    count = newlines if body.endswith(b"\n") else newlines + 1
    stride = size + 1
    # the length fixes where stride-spaced newlines fall; the count says there are no others
    if len(body) != count * stride - (count - newlines) or count < 2:
        return None
    if body[size::stride] != b"\n" * newlines:
        return None
    return PackedBodies(body, size, count, 0, stride)


def _batch_keys(query: dict[str, list[str]], n: int) -> Sequence[str] | None:
    """/mpub's de-duplication keys (ours): message i gets `<dedupe_key>/<dedupe_offset + i>`
    (a producer that sends a partition's rows in several requests gives each its first row's
    number, so a row's key does not depend on how the rows were split)."""
    prefix = query.get("dedupe_key")
    if not prefix:
        return None
    offset = 0
    if values := query.get("dedupe_offset"):
        parsed = parse_int64(values[0])
        if parsed is None or parsed < 0:
            raise HTTPError(400, "INVALID_DEDUPE_OFFSET")
        offset = parsed
    return Broker.batch_keys(prefix[0], offset, n)


def _ttl(query: dict[str, list[str]]) -> int:
    """`ttl=MS` (ours, not nsqd's): the message expires MS after it is published."""
    values = query.get("ttl")
    if values is None:
        return 0
    ttl = parse_int64(values[0])
    if ttl is None or ttl <= 0:
        raise HTTPError(400, "INVALID_TTL")
    if ttl > MAX_TTL_MS:  # (before /mpub's body is read; the engine refuses it too)
        raise HTTPError(400, "INVALID_TTL", {"detail": f"ttl must be 1 to {MAX_TTL_MS} ms"})
    return ttl


async def _read_exact(req: Request, n: int) -> bytes | None:
    """readMPUBBinary's reads: a body that cannot be read counts as one that ends early."""
    try:
        return await req.read_exact(n)
    except BodyError:
        return None


def _wrap_int64(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63
