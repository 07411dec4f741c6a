"""The sans-IO RESP parser fed in every split: the same commands whatever the read sizes,
and the protocol errors at the same point (the differential suite checks the texts)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.resp.codec import Parser, ProtocolError, command, split_args

args_st = st.lists(st.binary(max_size=40), min_size=1, max_size=6)


def parse_all(data: bytes, cuts: list[int]) -> list[list[bytes]]:
    p = Parser()
    out: list[list[bytes]] = []
    last = 0
    for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
        p.feed(data[last:cut])
        last = max(last, cut)
        while (cmd := p.next()) is not None:
            out.append(cmd)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(args_st, min_size=1, max_size=5), st.lists(st.integers(0, 10_000), max_size=8))
def test_multibulk_any_split(cmds: list[list[bytes]], cuts: list[int]) -> None:
    data = b"".join(command(*c) for c in cmds)
    assert parse_all(data, cuts) == cmds


def test_a_bulk_completed_in_a_swapped_buffer_leaves_no_need_behind() -> None:
    """The case hypothesis found: a bulk waited for (its need noted), completed by a read
    that replaced the consumed buffer, then the request's end in two more reads."""
    cmds = [[b"\x00"], [b"", b"\x00", b"\x00" * 3], [b"\x00" * 10, b"", b"", b"", b"", b""]]
    data = b"".join(command(*c) for c in cmds)
    assert parse_all(data, [46, 83]) == cmds


def test_byte_by_byte_mixed_inline_and_multibulk() -> None:
    data = b"PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nSET k \"a b\"\n\r\n*0\r\nECHO 'x'\r\n"
    p = Parser()
    got = []
    for i in range(len(data)):
        p.feed(data[i : i + 1])
        while (cmd := p.next()) is not None:
            got.append(cmd)
    assert got == [[b"PING"], [b"ECHO", b"hi"], [b"SET", b"k", b"a b"], [b"ECHO", b"x"]]


@pytest.mark.parametrize(
    ("line", "args"),
    [
        (b"a b  c", [b"a", b"b", b"c"]),
        (b'"\\x41\\x4a" \\n', [b"AJ", b"\\n"]),
        (b"'it\\'s'", [b"it's"]),
        (b'""', [b""]),
        (b'"a"b', None),
        (b"'open", None),
    ],
)
def test_split_args(line: bytes, args: list[bytes] | None) -> None:
    assert split_args(line) == args


def test_errors_after_the_commands_before_them() -> None:
    p = Parser(max_bulk=10)
    p.feed(b"*1\r\n$4\r\nPING\r\n*1\r\n$11\r\n")
    assert p.next() == [b"PING"]
    with pytest.raises(ProtocolError) as exc:
        p.next()
    assert exc.value.reply == b"-ERR Protocol error: invalid bulk length\r\n"


class _Exact(Parser):
    """The exact reader alone (the fast path's readers turned off): the reference."""

    __slots__ = ()

    def _fast(self) -> list[bytes] | None:
        return None


def _outcome(parser: Parser, data: bytes, cuts: list[int]) -> tuple[list[list[bytes]], str]:
    out: list[list[bytes]] = []
    last = 0
    try:
        for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
            parser.feed(data[last:cut])
            last = max(last, cut)
            while (cmd := parser.next()) is not None:
                out.append(cmd)
    except ProtocolError as exc:
        return out, str(exc)
    return out, ""


crlf_args_st = st.lists(
    st.one_of(st.binary(max_size=30), st.sampled_from([b"\r\n", b"$3\r\n", b"*2\r\n$1\r\na"])),
    min_size=1,
    max_size=5,
)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(crlf_args_st, min_size=1, max_size=4),
    st.lists(st.integers(0, 10_000), max_size=4),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=2),
)
def test_the_fast_readers_agree_with_the_exact_one(
    cmds: list[list[bytes]], cuts: list[int], flips: list[tuple[int, int]]
) -> None:
    """Arguments holding CRLFs and headers, requests alone or pipelined, bytes changed
    anywhere: the whole-buffer split and the lookup reader give what the exact reader gives,
    commands and error alike."""
    data = bytearray(b"".join(command(*c) for c in cmds))
    for pos, value in flips:
        data[pos % len(data)] = value
    assert _outcome(Parser(), bytes(data), cuts) == _outcome(_Exact(), bytes(data), cuts)
