"""V2Connection: nsqd's side of one V2 connection, fed bytes, returning validated commands.

Like h11.Connection: `receive_data(b)` (b"" = end of stream), then `next_command()` until it
answers NEED_DATA. Every check nsqd makes before touching a topic or channel happens here, in
nsqd's order and with its texts, so a violation surfaces at the same byte it does in nsqd: the
reading stages (magic, line, body, MPUB's parts) here, each command line's checks in lines.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from . import commands as c
from . import lines
from .errors import ErrorCode, NSQError, ProtocolClosed
from .identify import ClientSettings, apply_identify
from .limits import Limits
from .lines import BodySpec, text
from .state import ClientState, check_state
from .whole import INT32 as _INT32
from .whole import fins as _whole_fins
from .whole import mpub_one as _whole_mpub_one
from .whole import pub as _whole_pub
from .whole import uniform_batch, uniform_so_far


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA: Final = _Sentinel("NEED_DATA")
PAUSED: Final = _Sentinel("PAUSED")  # after IDENTIFY, until resume(): upgrades may follow
CLOSED: Final = _Sentinel("CLOSED")  # the peer ended the stream between commands

MAGIC_V2: Final = b"  V2"
# the names a connection published to (_topic_param), kept for the fast readers of PUB and
# MPUB (whole.py): most publish to a few topics
_PUB_TOPICS: Final = 64

Event = c.Command | _Sentinel


def _closed() -> Event:
    return CLOSED


class V2Connection:
    def __init__(
        self,
        limits: Limits | None = None,
        *,
        remote_ip: str = "",
        tls_required: bool = False,
        expect_magic: bool = True,
    ) -> None:
        self.limits = limits or Limits()
        self.state = ClientState.INIT
        self.settings = ClientSettings.defaults(self.limits, remote_ip)
        self.tls_required = tls_required
        self.tls_active = False
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self._eof = False
        self._paused = False
        self._stage: Callable[[], Event | None] = (
            self._read_magic if expect_magic else self._read_line
        )
        self._body: BodySpec | None = None
        self._body_size = 0
        self._mpub_topic = ""
        self._pub_topic = ""
        self._pub_spec: BodySpec | None = None
        self._pub_topics: dict[bytes, str] = {}  # names a PUB, MPUB or DPUB was allowed with
        self._read: Event | None = None  # a command read ahead, for _take_read
        self._mpub_count = 0
        self._mpub_bodies: list[bytes] = []
        self._max_mpub_count = (self.limits.max_body_size - 4) // 5
        self._handlers: dict[bytes, Callable[[list[bytes]], Event | None]] = {
            b"FIN": self._fin,
            b"RDY": self._rdy,
            b"REQ": self._req,
            b"PUB": self._pub,
            b"MPUB": self._mpub,
            b"DPUB": self._dpub,
            b"NOP": self._nop,
            b"TOUCH": self._touch,
            b"SUB": self._sub,
            b"CLS": self._cls,
            b"AUTH": self._auth,
            b"IDENTIFY": self._identify,
        }

    def release(self) -> None:
        """The connection is over: drop the buffered bytes (a body cut short can be large)
        and the bound methods that make this object a reference cycle, so it is freed at once
        rather than at the next full garbage collection. Every later command is CLOSED."""
        self._buf = b""
        self._pos = 0
        self._mpub_bodies = []
        self._body = None
        self._pub_spec = None
        self._read = None
        self._handlers = {}
        self._eof = True
        self._stage = _closed

    # -- feeding ---------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        if not data:
            self._eof = True
            return
        buf, pos = self._buf, self._pos
        if pos == len(buf):
            # all parsed (the usual case: a read of whole commands): the read itself is the
            # buffer, with no copy, and the commands' bodies are sliced from it once
            self._buf = data if type(data) is bytes else bytearray(data)
            self._pos = 0
            return
        if type(buf) is bytes:  # a command cut short: its part is kept in a bytearray
            buf = self._buf = bytearray(buf[pos:])
        elif pos:
            del buf[:pos]
        self._pos = 0
        buf += data

    def next_command(self) -> Event:
        if self._paused:
            return PAUSED
        while True:
            event = self._stage()
            if event is not None:
                return event

    def resume(self) -> None:
        """Continue after IDENTIFY (the daemon has answered it and done any upgrade)."""
        self._paused = False

    @property
    def trailing_data(self) -> bytes:
        """Bytes received but not yet parsed (handed to a TLS or compression layer)."""
        return bytes(self._buf[self._pos :])

    def clear_trailing_data(self) -> None:
        self._buf = b""
        self._pos = 0

    # -- stages ----------------------------------------------------------------------------

    def _read_magic(self) -> Event:
        if len(self._buf) - self._pos < 4:
            return CLOSED if self._eof else NEED_DATA
        magic = bytes(self._buf[self._pos : self._pos + 4])
        self._pos += 4
        if magic != MAGIC_V2:
            raise NSQError(ErrorCode.E_BAD_PROTOCOL)
        self._stage = self._read_line
        return self._read_line()  # type: ignore[return-value]

    def _read_line(self) -> Event | None:
        buf, pos = self._buf, self._pos
        if pos == len(buf):  # every command read: the usual end of a read's commands
            return CLOSED if self._eof else NEED_DATA
        if buf.startswith(b"PUB ", pos):
            # the hot path: publishers send one PUB per round trip
            read = _whole_pub(buf, pos, self._pub_topics, self.limits.max_msg_size)
            if read is not None:
                pub, self._pos = read
                return pub
        elif buf.startswith(b"MPUB ", pos):
            # the same for an MPUB of one message (bench_writer's): its MPubStart now (what
            # nsqd does before it reads the body: AUTH's check, the topic made), the MPub at
            # the next call
            read = _whole_mpub_one(buf, pos, self._pub_topics, self.limits)
            if read is not None:
                self._read, self._pos = read
                self._stage = self._take_read
                return c.MPubStart(read[0].topic)
        elif buf.startswith(b"FIN ", pos) and self._fin_allowed():
            # the hot path: consumers send one FIN per message
            read = _whole_fins(buf, pos)
            if read is not None:
                fin, self._pos = read
                return fin
        max_line = self.limits.max_line_length
        nl = buf.find(b"\n", pos, pos + max_line)
        if nl < 0:
            if len(buf) - pos >= max_line:
                raise ProtocolClosed("failed to read command - bufio: buffer full")
            return CLOSED if self._eof else NEED_DATA
        line = bytes(buf[pos:nl])
        self._pos = nl + 1
        if line[-1:] == b"\r":
            line = line[:-1]
        params = line.split(b" ")
        verb = params[0]
        if self.tls_required and not self.tls_active and verb != b"IDENTIFY":
            raise NSQError(
                ErrorCode.E_INVALID, f"cannot {text(verb)} in current state (TLS required)"
            )
        handler = self._handlers.get(verb)
        if handler is None:
            raise NSQError(ErrorCode.E_INVALID, f"invalid command {text(verb)}")
        return handler(params)

    def _take_read(self) -> Event:
        event, self._read = self._read, None
        self._stage = self._read_line
        return event

    def _fin_allowed(self) -> bool:
        return self.state is not ClientState.INIT and not (
            self.tls_required and not self.tls_active
        )

    def _expect_body(self, spec: BodySpec) -> None:
        self._body = spec
        self._stage = self._read_body_size

    def _read_body_size(self) -> Event | None:
        spec = self._body
        assert spec is not None
        if len(self._buf) - self._pos < 4:
            return self._short(spec.error(f"failed to read {spec.noun}body size"))
        (size,) = _INT32.unpack_from(self._buf, self._pos)
        self._pos += 4
        spec.check_size(size)
        self._body_size = size
        self._stage = self._read_body
        return self._read_body()

    def _read_body(self) -> Event | None:
        spec = self._body
        assert spec is not None
        pos, size = self._pos, self._body_size
        if len(self._buf) - pos < size:
            return self._short(spec.error(f"failed to read {spec.noun}body"))
        body = bytes(self._buf[pos : pos + size])
        self._pos = pos + size
        self._stage = self._read_line
        self._body = None
        return spec.finish(body)

    def _short(self, err: NSQError) -> Event:
        # nsqd reports a body cut short by end of stream (it can still write to a half-closed
        # socket); otherwise we simply wait for more bytes.
        if self._eof:
            raise err
        return NEED_DATA

    def _read_mpub_count(self) -> Event | None:
        if len(self._buf) - self._pos < 4:
            return self._short(NSQError(ErrorCode.E_BAD_BODY, "MPUB failed to read message count"))
        (count,) = _INT32.unpack_from(self._buf, self._pos)
        self._pos += 4
        if count <= 0 or count > self._max_mpub_count:
            raise NSQError(ErrorCode.E_BAD_BODY, f"MPUB invalid message count {count}")
        self._mpub_count = count
        self._mpub_bodies = []
        self._stage = self._read_mpub_messages
        return self._read_mpub_messages()

    def _read_mpub_messages(self) -> Event | None:
        # A view copies each body once (slicing the bytearray would copy it twice); it must be
        # released before the buffer is resized.
        view = memoryview(self._buf)
        try:
            return self._mpub_messages(view)
        finally:
            view.release()

    def _mpub_messages(self, view: memoryview) -> Event | None:
        # nsqd reads MPUB message by message from the stream and never checks the parts
        # against the declared body size; so do we.
        buf, pos, end = self._buf, self._pos, len(self._buf)
        bodies, count = self._mpub_bodies, self._mpub_count
        max_msg = self.limits.max_msg_size
        if not bodies and end - pos >= 4:
            uniform = uniform_batch(view, pos, end, count, max_msg)
            if uniform is not None:
                self._pos = uniform[1]
                self._stage = self._read_line
                return c.MPub(self._mpub_topic, uniform[0])
            if not self._eof and uniform_so_far(view, pos, end, count, max_msg):
                return NEED_DATA  # a batch cut by a read: taken whole once it is all in
        unpack = _INT32.unpack_from
        while len(bodies) < count:
            i = len(bodies)
            if end - pos < 4:
                self._pos = pos
                return self._short(
                    NSQError(ErrorCode.E_BAD_MESSAGE, f"MPUB failed to read message({i}) body size")
                )
            (size,) = unpack(buf, pos)
            if size <= 0:
                raise NSQError(
                    ErrorCode.E_BAD_MESSAGE, f"MPUB invalid message({i}) body size {size}"
                )
            if size > max_msg:
                raise NSQError(ErrorCode.E_BAD_MESSAGE, f"MPUB message too big {size} > {max_msg}")
            start = pos + 4
            if end - start < size:
                self._pos = pos
                return self._short(
                    NSQError(ErrorCode.E_BAD_MESSAGE, "MPUB failed to read message body")
                )
            bodies.append(view[start : start + size].tobytes())
            pos = start + size
        self._pos = pos
        self._stage = self._read_line
        self._mpub_bodies = []
        return c.MPub(self._mpub_topic, bodies)

    def _read_mpub_size(self) -> Event | None:
        if len(self._buf) - self._pos < 4:
            return self._short(NSQError(ErrorCode.E_BAD_BODY, "MPUB failed to read body size"))
        (size,) = _INT32.unpack_from(self._buf, self._pos)
        self._pos += 4
        assert self._body is not None
        self._body.check_size(size)
        self._body = None
        self._stage = self._read_mpub_count
        return self._read_mpub_count()

    # -- command lines (their checks: lines.py) ------------------------------------------------

    def _identify(self, params: list[bytes]) -> Event | None:
        check_state(b"IDENTIFY", self.state)
        self._expect_body(
            BodySpec(
                "IDENTIFY",
                ErrorCode.E_BAD_BODY,
                "",
                self.limits.max_body_size,
                True,
                self._finish_identify,
            )
        )
        return None

    def _finish_identify(self, body: bytes) -> c.Command:
        self.settings = apply_identify(body, self.settings, self.limits)
        self._paused = True
        return c.Identify(self.settings)

    def _auth(self, params: list[bytes]) -> Event | None:
        lines.auth(params, self.state)
        self._expect_body(
            BodySpec("AUTH", ErrorCode.E_BAD_BODY, "", self.limits.max_body_size, True, c.Auth)
        )
        return None

    def _sub(self, params: list[bytes]) -> Event | None:
        sub = lines.sub(params, self.state, self.settings)
        self.state = lines.transition(self.state, b"SUB")
        return sub

    def _topic_param(self, verb: str, params: list[bytes], count: int) -> str:
        topic = lines.topic(verb, params, count)
        name = topic.decode()
        names = self._pub_topics
        if len(names) < _PUB_TOPICS:
            names[topic] = name  # valid, and allowed here (TLS): whole.pub's from now
        return name

    def _pub(self, params: list[bytes]) -> Event | None:
        self._pub_topic = self._topic_param("PUB", params, 2)
        spec = self._pub_spec
        if spec is None:  # made once per connection: PUB is a hot path
            spec = self._pub_spec = BodySpec(
                "PUB",
                ErrorCode.E_BAD_MESSAGE,
                "message ",
                self.limits.max_msg_size,
                False,
                self._finish_pub,
            )
        self._body = spec
        self._stage = self._read_body_size
        return None

    def _finish_pub(self, body: bytes) -> c.Command:
        return c.Pub(self._pub_topic, body)

    def _dpub(self, params: list[bytes]) -> Event | None:
        topic = self._topic_param("DPUB", params, 3)
        delay_ms = lines.dpub_delay(params[2], self.limits)
        self._expect_body(
            BodySpec(
                "DPUB",
                ErrorCode.E_BAD_MESSAGE,
                "message ",
                self.limits.max_msg_size,
                False,
                lambda body: c.DPub(topic, delay_ms, body),
            )
        )
        return None

    def _mpub(self, params: list[bytes]) -> Event | None:
        topic = self._topic_param("MPUB", params, 2)
        self._mpub_topic = topic
        self._body = BodySpec(
            "MPUB", ErrorCode.E_BAD_BODY, "", self.limits.max_body_size, False, c.Auth
        )
        self._stage = self._read_mpub_size
        return c.MPubStart(topic)

    def _rdy(self, params: list[bytes]) -> Event | None:
        return lines.rdy(params, self.state, self.limits)

    def _fin(self, params: list[bytes]) -> Event | None:
        return c.Fin([lines.msg_id(b"FIN", params, 2, self.state)])

    def _touch(self, params: list[bytes]) -> Event | None:
        return c.Touch(lines.msg_id(b"TOUCH", params, 2, self.state))

    def _req(self, params: list[bytes]) -> Event | None:
        return lines.req(params, self.state, self.limits)

    def _cls(self, params: list[bytes]) -> Event | None:
        check_state(b"CLS", self.state)
        self.state = lines.transition(self.state, b"CLS")
        return c.Cls()

    def _nop(self, params: list[bytes]) -> Event | None:
        return c.Nop()
