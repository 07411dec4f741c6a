"""The reply types where RESP2 and RESP3 differ, as two tables a session holds one of (HELLO
switches): nulls, maps, sets, doubles, verbatim text and push messages. Pure code."""

from __future__ import annotations

from .codec import NULL, NULL_ARRAY, array, bulk, bulks, raw_array


def _double_text(value: float) -> bytes:
    """Redis 7.0's addReplyDouble text: %.17g, and inf/-inf/nan spelled so."""
    if value != value:
        return b"nan"
    if value in (float("inf"), float("-inf")):
        return b"inf" if value > 0 else b"-inf"
    return b"%.17g" % value


class Resp2:
    """How a connection that spoke `HELLO 2` (or nothing) gets the replies RESP3 types: nulls
    as $-1 / *-1, maps and sets as flat arrays, doubles and verbatim text as bulk strings,
    push messages as arrays. A session holds one of these two tables; commands ask it."""

    version = 2
    null = NULL
    null_array = NULL_ARRAY

    def bulk(self, value: bytes | None) -> bytes:
        return bulk(value)

    def map(self, encoded: list[bytes]) -> bytes:
        """Key, value, key, value... (each already encoded)."""
        return raw_array(encoded)

    def set(self, items: list[bytes]) -> bytes:
        return array(items)

    def double(self, value: float) -> bytes:
        return bulk(_double_text(value))

    def verbatim(self, text: bytes) -> bytes:
        return bulk(text)

    def push(self, encoded: list[bytes]) -> bytes:
        return raw_array(encoded)


class Resp3(Resp2):
    """The same replies under `HELLO 3`."""

    version = 3
    null = b"_\r\n"
    null_array = b"_\r\n"

    def bulk(self, value: bytes | None) -> bytes:
        return b"_\r\n" if value is None else b"$%d\r\n%b\r\n" % (len(value), value)

    def map(self, encoded: list[bytes]) -> bytes:
        return b"%%%d\r\n" % (len(encoded) // 2) + b"".join(encoded)

    def set(self, items: list[bytes]) -> bytes:
        return bulks(b"~", items)

    def double(self, value: float) -> bytes:
        return b",%b\r\n" % _double_text(value)

    def verbatim(self, text: bytes) -> bytes:
        return b"=%d\r\ntxt:%b\r\n" % (len(text) + 4, text)

    def push(self, encoded: list[bytes]) -> bytes:
        return b">%d\r\n" % len(encoded) + b"".join(encoded)


RESP2 = Resp2()
RESP3 = Resp3()
PROTOCOLS = {2: RESP2, 3: RESP3}
