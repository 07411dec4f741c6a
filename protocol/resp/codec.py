"""RESP2 as pure code: the request parser (multibulk and inline, as Redis 7's networking.c reads
them, with its exact protocol-error texts) and the reply encoders. No I/O, no Trio, no clock:
tests/resp/test_purity.py keeps it so.

A `Parser` is fed bytes and hands out complete commands (lists of bytes arguments); a protocol
error is raised once every complete command before it has been taken, as Redis answers the
commands it parsed, then the error, then closes."""

from __future__ import annotations

from itertools import chain

INLINE_MAX = 64 * 1024  # PROTO_INLINE_MAX_SIZE: a line without its newline past this is an error
INT_MAX = 2**31 - 1


class ProtocolError(Exception):
    """The client broke RESP: answer `-ERR Protocol error: <text>` and close."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        clean = text.replace("\r", " ").replace("\n", " ")
        self.reply = b"-ERR Protocol error: " + clean.encode("latin-1") + b"\r\n"


class ReplyError(Exception):
    """Answer this error (the text without its leading '-') and go on."""

    def __init__(self, text: str | bytes) -> None:
        raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
        super().__init__(raw)
        self.reply = b"-" + raw.replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n"


def string2ll(s: bytes) -> int | None:
    """Redis's strict integer syntax (string2ll): optional '-', no '+', no leading zeros, no
    spaces, within a signed 64-bit range; None otherwise."""
    n = len(s)
    if n == 0 or n > 20:
        return None
    if n == 1 and s == b"0":
        return 0
    digits = s[1:] if s[:1] == b"-" else s
    if not digits or not digits.isdigit() or digits[:1] == b"0" or not digits.isascii():
        return None
    value = int(s)
    if not -(2**63) <= value < 2**63:
        return None
    return value


_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_HEX = b"0123456789abcdefABCDEF"


_SPACE = b" \n\r\t\v\f"


def _double_quoted(line: bytes, i: int, cur: bytearray) -> int:
    """Read a "..." word's inside from `i` (past the quote) into `cur`: the index past the
    closing quote, or -1 when it is missing or not followed by a space."""
    n = len(line)
    while i < n:
        c = line[i]
        if (
            c == 92
            and i + 3 < n
            and line[i + 1] == 120
            and (line[i + 2] in _HEX and line[i + 3] in _HEX)
        ):
            cur.append(int(line[i + 2 : i + 4], 16))
            i += 4
        elif c == 92 and i + 1 < n:
            cur.append(_ESCAPES.get(line[i + 1], line[i + 1]))
            i += 2
        elif c == 34:
            return -1 if i + 1 < n and line[i + 1] not in _SPACE else i + 1
        else:
            cur.append(c)
            i += 1
    return -1


def _single_quoted(line: bytes, i: int, cur: bytearray) -> int:
    """The same for a '...' word, where only \\' is an escape."""
    n = len(line)
    while i < n:
        c = line[i]
        if c == 92 and i + 1 < n and line[i + 1] == 39:
            cur.append(39)
            i += 2
        elif c == 39:
            return -1 if i + 1 < n and line[i + 1] not in _SPACE else i + 1
        else:
            cur.append(c)
            i += 1
    return -1


def split_args(line: bytes) -> list[bytes] | None:
    """sdssplitargs: whitespace-separated words, "double quotes" with \\xHH and C escapes,
    'single quotes' with \\' only; a closing quote must be followed by a space. None when
    the quotes do not balance."""
    out: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _SPACE:
            i += 1
        if i >= n:
            return out
        cur = bytearray()
        while i < n and line[i] not in _SPACE:
            c = line[i]
            if c == 34 or c == 39:
                i = (_double_quoted if c == 34 else _single_quoted)(line, i + 1, cur)
                if i < 0:
                    return None
                break  # a quoted word ends at its closing quote
            cur.append(c)
            i += 1
        out.append(bytes(cur))


_COUNTS = {b"*%d" % n: n for n in range(1, 1025)}  # the fast reader's argument counts
_SIZES = {b"$%d" % n: n for n in range(1025)}  # and the bulk lengths it reads by lookup
_WHOLE = 1024  # a buffer up to this long holding one request is split whole


def _size(header: bytes) -> int | None:
    """A longer bulk header's length (`$` and up to 10 digits, no leading zero), or None."""
    digits = header[1:]
    if header[:1] != b"$" or not digits.isdigit() or len(digits) > 10 or digits[0] == 48:
        return None
    return int(digits)


class Parser:
    """Feed bytes in, take commands out (processInputBuffer's two readers)."""

    __slots__ = (
        "_args", "_buf", "_bulk", "_chunk_bytes", "_chunks", "_left", "_need", "_pos",
        "max_bulk", "strict_auth",
    )  # fmt: skip

    def __init__(self, max_bulk: int = 512 * 1024 * 1024) -> None:
        self.max_bulk = max_bulk
        self.strict_auth = False  # set while AUTH is required: Redis's smaller limits apply
        self._buf = b""
        self._pos = 0
        self._args: list[bytes] = []
        self._left = 0  # arguments still to read of the current multibulk
        self._bulk = -1  # length of the bulk being read, -1 before its header
        # Bytes fed but not yet joined to _buf: a big bulk arrives in many reads and is
        # joined once, when all of it is there (not once per read: that would be quadratic).
        self._chunks: list[bytes] = []
        self._chunk_bytes = 0
        self._need = 0  # bytes past _pos the bulk being waited for needs (0: any will do)

    def feed(self, data: bytes) -> int:
        """Take `data` in; how many bytes are now received and not yet parsed (Redis closes
        a client past 1 GiB of these)."""
        if not self._chunks and self._pos >= len(self._buf):
            self._buf = data  # the usual case: everything before was consumed, no copy
            self._pos = 0
            return len(data)
        self._chunks.append(data)
        self._chunk_bytes += len(data)
        return len(self._buf) - self._pos + self._chunk_bytes

    def _gather(self) -> None:
        have = len(self._buf) - self._pos
        if self._need and have + self._chunk_bytes < self._need:
            return
        chunks = self._chunks
        if not have and len(chunks) == 1:
            self._buf = chunks[0]  # the usual case: everything before was consumed, no copy
        else:
            self._buf = self._buf[self._pos :] + b"".join(chunks)
        self._pos = 0
        self._chunks = []
        self._chunk_bytes = 0
        self._need = 0

    def release(self) -> None:
        """The connection ended: drop the buffer."""
        self._buf = b""
        self._pos = 0
        self._args = []
        self._chunks = []
        self._chunk_bytes = 0

    def next(self) -> list[bytes] | None:
        """The next complete command, or None until more bytes come; ProtocolError when the
        input is not RESP."""
        if self._chunks:
            self._gather()
        buf = self._buf
        while True:
            pos = self._pos
            if pos >= len(buf):
                return None
            if self._left == 0 and buf[pos] == 42 and not self.strict_auth:
                cmd = self._fast()
                if cmd is not None:
                    return cmd
            if self._left == 0 and buf[pos] != 42:  # not '*': an inline command
                cmd = self._inline()
                if cmd is None:
                    return None
                if cmd:
                    return cmd
                continue  # an empty line
            if self._left == 0:
                if not self._multibulk_header():
                    return None
                if self._left == 0:
                    continue  # *0 or a negative count: nothing to run
            cmd = self._bulks()
            if cmd is not None:
                return cmd
            return None

    def _fast(self) -> list[bytes] | None:
        """A whole well-formed multibulk at once (the hot path); None sends anything else
        (incomplete, odd or wrong) to the exact reader below, which also gives the errors.
        The usual counts and lengths are looked up whole (`*3`, `$200`): one dict probe
        both checks and reads them."""
        buf, pos = self._buf, self._pos
        if not pos and len(buf) <= _WHOLE and self.max_bulk >= _WHOLE:
            # one short request alone in the buffer (no pipelining: the usual read): split
            # at every CRLF in C; a CRLF inside an argument, or a second request, shows as
            # a count or a length that does not match, and the reader below takes it
            parts = buf.split(b"\r\n")
            n = _COUNTS.get(parts[0])
            if n is not None and len(parts) == 2 * n + 2 and not parts[-1]:
                sizes = _SIZES
                for i in range(1, 2 * n, 2):
                    if sizes.get(parts[i]) != len(parts[i + 1]):
                        break
                else:
                    self._pos = len(buf)
                    return parts[2 : 2 * n + 1 : 2]
        find = buf.find
        end = find(b"\r\n", pos)
        if end < 0:
            return None
        n = _COUNTS.get(buf[pos:end])
        if n is None:
            return None
        args: list[bytes] = []
        append = args.append
        p, size_all, limit = end + 2, len(buf), self.max_bulk
        for _ in range(n):
            end = find(b"\r\n", p)
            if end < 0:
                return None
            size = _SIZES.get(buf[p:end])
            if size is None:
                size = _size(buf[p:end])
                if size is None:
                    return None
            start = end + 2
            p = start + size
            if size > limit or p + 2 > size_all:
                return None
            append(buf[start:p])
            p += 2  # Redis skips the CRLF unchecked
        self._pos = p
        return args

    def _inline(self) -> list[bytes] | None:
        buf, pos = self._buf, self._pos
        nl = buf.find(b"\n", pos)
        if nl < 0:
            if len(buf) - pos > INLINE_MAX:
                raise ProtocolError("too big inline request")
            return None
        end = nl - 1 if nl > pos and buf[nl - 1] == 13 else nl
        self._pos = nl + 1
        args = split_args(bytes(buf[pos:end]))
        if args is None:
            raise ProtocolError("unbalanced quotes in request")
        return args

    def _line(self, too_big: str) -> bytes | None:
        buf, pos = self._buf, self._pos
        cr = buf.find(b"\r", pos)
        if cr < 0:
            if len(buf) - pos > INLINE_MAX:
                raise ProtocolError(too_big)
            return None
        if cr + 1 >= len(buf):
            return None  # the \n has not come yet
        self._pos = cr + 2
        return bytes(buf[pos:cr])

    def _multibulk_header(self) -> bool:
        line = self._line("too big mbulk count string")
        if line is None:
            return False
        count = string2ll(line[1:])
        if count is None or count > INT_MAX:
            raise ProtocolError("invalid multibulk length")
        if count > 10 and self.strict_auth:
            raise ProtocolError("unauthenticated multibulk length")
        if count > 0:
            self._left = count
            self._args = []
            self._bulk = -1
        return True

    def _bulks(self) -> list[bytes] | None:
        buf = self._buf
        args = self._args
        while self._left:
            if self._bulk < 0:
                line = self._line("too big bulk count string")
                if line is None:
                    return None
                if line[:1] != b"$":
                    got = chr(line[0]) if line else "\r"  # Redis prints the byte as is
                    raise ProtocolError(f"expected '$', got '{got}'")
                size = string2ll(line[1:])
                if size is None or size < 0 or size > self.max_bulk:
                    raise ProtocolError("invalid bulk length")
                if size > 16384 and self.strict_auth:
                    raise ProtocolError("unauthenticated bulk length")
                self._bulk = size
            pos, size = self._pos, self._bulk
            if len(buf) - pos < size + 2:
                self._need = size + 2
                return None
            args.append(bytes(buf[pos : pos + size]))  # Redis skips the CRLF unchecked
            self._pos = pos + size + 2
            self._bulk = -1
            self._left -= 1
            # what it waited for is here (feed may have swapped the buffer in without
            # _gather): a stale need would hold the next short read back for ever
            self._need = 0
        self._args = []
        return args


# -- replies --------------------------------------------------------------------------------

OK = b"+OK\r\n"
NULL = b"$-1\r\n"
NULL_ARRAY = b"*-1\r\n"
EMPTY_ARRAY = b"*0\r\n"
ZERO = b":0\r\n"
ONE = b":1\r\n"
PONG = b"+PONG\r\n"
QUEUED = b"+QUEUED\r\n"

_SMALL_INTS = [f":{i}\r\n".encode() for i in range(1025)]


def integer(n: int) -> bytes:
    if 0 <= n <= 1024:
        return _SMALL_INTS[n]
    return b":%d\r\n" % n


def bulk(value: bytes | None) -> bytes:
    if value is None:
        return NULL
    return b"$%d\r\n%b\r\n" % (len(value), value)


def simple(text: str) -> bytes:
    return b"+" + text.encode() + b"\r\n"


def error(text: str) -> bytes:
    """An error reply; CR and LF become spaces as in Redis (addReplyErrorLength)."""
    return b"-" + text.replace("\r", " ").replace("\n", " ").encode() + b"\r\n"


def array(items: list[bytes] | None) -> bytes:
    """An array of bulk strings (None: the null array)."""
    if items is None:
        return NULL_ARRAY
    return bulks(b"*", items)


class _Between(dict[int, bytes]):
    """What goes between a bulk string of n bytes and the next one (made once per n)."""

    def __missing__(self, n: int) -> bytes:
        sep = self[n] = b"\r\n$%d\r\n" % n
        return sep


_BETWEEN = _Between()


def bulks(kind: bytes, items: list[bytes]) -> bytes:
    """An aggregate (`kind`: b"*" array, b"~" set) of bulk strings. A long one whose items
    have one length (a queue's jobs, LRANGE on them) is one join with the separator that length
    needs: a quarter of the time of formatting each item (LRANGE 600 was most of its time)."""
    n = len(items)
    if n > 8:
        lengths = set(map(len, items))
        if len(lengths) == 1:
            (size,) = lengths
            return b"%b%d\r\n$%d\r\n" % (kind, n, size) + _BETWEEN[size].join(items) + b"\r\n"
        seps = map(_BETWEEN.__getitem__, map(len, items))
        body = b"".join(chain.from_iterable(zip(seps, items, strict=True)))
        return b"%b%d\r\n" % (kind, n) + body[2:] + b"\r\n"
    return b"%b%d\r\n" % (kind, n) + b"".join(
        [b"$%d\r\n%b\r\n" % (len(item), item) for item in items]
    )


def raw_array(encoded: list[bytes]) -> bytes:
    """An array of already encoded replies."""
    return b"*%d\r\n" % len(encoded) + b"".join(encoded)


def command(*args: bytes) -> bytes:
    """A command as a client sends it (a multibulk of bulk strings)."""
    return array(list(args))
