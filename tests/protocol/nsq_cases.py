"""Byte-level cases of nsqd's V2 protocol (spec section 2), each with the commands our parser
must hand over and how the stream must end; every expectation here is what the real nsqd
v1.3.0 answers (checked by test_against_nsqd.py against .reference/bin/nsqd).

COMMAND_CASES are written once per command and expanded over the three client states:
where the command is not allowed the expectation becomes nsqd's state error (RDY after CLS is
silently ignored), and every INIT case is also run under --tls-required."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from v2wire import (
    EOF,
    HANGUP,
    MSG_ID,
    Case,
    Err,
    Outcome,
    dpub,
    i32,
    identified,
    identify,
    mpub,
    mpub_body,
    pub,
    sized,
)

from protocol.v2 import (
    Auth,
    Cls,
    Command,
    DPub,
    Fin,
    Limits,
    MPub,
    MPubStart,
    Nop,
    Pub,
    Rdy,
    Req,
    Sub,
    Touch,
)

INIT, SUBSCRIBED, CLOSING = "INIT", "SUBSCRIBED", "CLOSING"
ANY = frozenset({INIT, SUBSCRIBED, CLOSING})

# Spec 2.3, written independently of protocol/v2/state.py.
ALLOWED: dict[bytes, frozenset[str]] = {
    b"IDENTIFY": frozenset({INIT}),
    b"AUTH": frozenset({INIT}),
    b"SUB": frozenset({INIT}),
    b"RDY": frozenset({SUBSCRIBED}),  # ignored in CLOSING
    b"FIN": frozenset({SUBSCRIBED, CLOSING}),
    b"REQ": frozenset({SUBSCRIBED, CLOSING}),
    b"TOUCH": frozenset({SUBSCRIBED, CLOSING}),
    b"CLS": frozenset({SUBSCRIBED}),
    b"PUB": ANY,
    b"MPUB": ANY,
    b"DPUB": ANY,
    b"NOP": ANY,
}

# Bytes that put a fresh connection into each state, and the commands they produce.
STATE_PREFIX: dict[str, tuple[bytes, tuple[Command, ...]]] = {
    INIT: (b"", ()),
    SUBSCRIBED: (b"SUB t c\n", (Sub("t", "c"),)),
    CLOSING: (b"SUB t c\nCLS\n", (Sub("t", "c"), Cls())),
}

MAX_MSG = 1048576
MAX_BODY = 5242880
ID = MSG_ID
IDS = [b"%016x" % n for n in range(1, 6)]


def E(text: str | bytes) -> Err:
    return Err(text.encode() if isinstance(text, str) else text)


def C(
    id: str,
    data: bytes,
    events: Sequence[Command] = (),
    end: Outcome = EOF,
    limits: Limits | None = None,
) -> Case:
    return Case(id, data, tuple(events), end, limits or Limits())


# -- commands, one state-independent case each -------------------------------------------------

LINE_CASES = [
    C("empty-line", b"\n", end=E("E_INVALID invalid command ")),
    C("crlf-empty-line", b"\r\n", end=E("E_INVALID invalid command ")),
    C("unknown-verb", b"ASDF\n", end=E("E_INVALID invalid command ASDF")),
    C("lowercase-verb", b"nop\n", end=E("E_INVALID invalid command nop")),
    C("leading-space", b" NOP\n", end=E("E_INVALID invalid command ")),
    C("only-one-cr-stripped", b"NOP\r\r\n", end=E(b"E_INVALID invalid command NOP\r")),
    C("binary-verb", b"\xff\xfe\x00\n", end=E(b"E_INVALID invalid command \xff\xfe\x00")),
    C("eof-mid-line", b"NOP"),
    C("eof-between-commands", b"NOP\nNOP\n", [Nop(), Nop()]),
]

NOP_CASES = [
    C("nop", b"NOP\n", [Nop()]),
    C("nop-crlf", b"NOP\r\n", [Nop()]),
    C("nop-extra-params", b"NOP x y\n", [Nop()]),
]

PUB_CASES = [
    C("pub", pub(b"p", b"hello"), [Pub("p", b"hello")]),
    C("pub-binary-body", pub(b"p", b"NOP\n\x00\xff\r\n"), [Pub("p", b"NOP\n\x00\xff\r\n")]),
    C("pub-crlf", b"PUB p\r\n" + sized(b"x"), [Pub("p", b"x")]),
    C("pub-extra-param", b"PUB p extra\n" + sized(b"x"), [Pub("p", b"x")]),
    C("pub-ephemeral", pub(b"p#ephemeral", b"x"), [Pub("p#ephemeral", b"x")]),
    C(
        "pub-max-size",
        pub(b"p", b"m" * 100),
        [Pub("p", b"m" * 100)],
        limits=Limits(max_msg_size=100),
    ),
    C("pub-no-topic", b"PUB\n", end=E("E_INVALID PUB insufficient number of parameters")),
    C("pub-empty-topic", b"PUB \n", end=E('E_BAD_TOPIC PUB topic name "" is not valid')),
    C("pub-double-space", b"PUB  p\n", end=E('E_BAD_TOPIC PUB topic name "" is not valid')),
    # the topic is checked before the body is read
    C("pub-bad-topic", b"PUB bad!\n", end=E('E_BAD_TOPIC PUB topic name "bad!" is not valid')),
    C(
        "pub-topic-65",
        pub(b"a" * 65, b"x"),
        end=E(f'E_BAD_TOPIC PUB topic name "{"a" * 65}" is not valid'),
    ),
    C(
        "pub-quoted-topic",
        b'PUB a"b\\\n',
        end=E('E_BAD_TOPIC PUB topic name "a\\"b\\\\" is not valid'),
    ),
    C(
        "pub-eof-before-size",
        b"PUB p\n",
        end=E("E_BAD_MESSAGE PUB failed to read message body size"),
    ),
    C(
        "pub-eof-mid-size",
        b"PUB p\n\x00\x00",
        end=E("E_BAD_MESSAGE PUB failed to read message body size"),
    ),
    C("pub-size-0", b"PUB p\n" + i32(0), end=E("E_BAD_MESSAGE PUB invalid message body size 0")),
    C(
        "pub-size-negative",
        b"PUB p\n" + i32(-1),
        end=E("E_BAD_MESSAGE PUB invalid message body size -1"),
    ),
    C(
        "pub-size-min-int",
        b"PUB p\n" + i32(-(2**31)),
        end=E("E_BAD_MESSAGE PUB invalid message body size -2147483648"),
    ),
    C(
        "pub-too-big",
        b"PUB p\n" + i32(MAX_MSG + 1),
        end=E("E_BAD_MESSAGE PUB message too big 1048577 > 1048576"),
    ),
    C(
        "pub-too-big-custom",
        b"PUB p\n" + i32(105),
        end=E("E_BAD_MESSAGE PUB message too big 105 > 100"),
        limits=Limits(max_msg_size=100),
    ),
    C(
        "pub-negative-custom",
        b"PUB p\n" + i32(-5),
        end=E("E_BAD_MESSAGE PUB invalid message body size -5"),
        limits=Limits(max_msg_size=100),
    ),
    C(
        "pub-eof-mid-body",
        b"PUB p\n" + i32(10) + b"short",
        end=E("E_BAD_MESSAGE PUB failed to read message body"),
    ),
]

DPUB_CASES = [
    C("dpub", dpub(b"p", 100, b"hi"), [DPub("p", 100, b"hi")]),
    C("dpub-zero", dpub(b"p", 0, b"hi"), [DPub("p", 0, b"hi")]),
    C("dpub-empty-delay-is-0", dpub(b"p", b"", b"hi"), [DPub("p", 0, b"hi")]),
    C("dpub-max-delay", dpub(b"p", 3600000, b"hi"), [DPub("p", 3600000, b"hi")]),
    # ByteToBase10 wraps at 2**64: 2**64 parses as 0
    C("dpub-wraps-to-0", dpub(b"p", 2**64, b"hi"), [DPub("p", 0, b"hi")]),
    C("dpub-no-params", b"DPUB\n", end=E("E_INVALID DPUB insufficient number of parameters")),
    C("dpub-one-param", b"DPUB p\n", end=E("E_INVALID DPUB insufficient number of parameters")),
    C(
        "dpub-bad-topic",
        b"DPUB bad! 10\n",
        end=E('E_BAD_TOPIC DPUB topic name "bad!" is not valid'),
    ),
    C(
        "dpub-bad-topic-before-delay",
        b"DPUB bad! x\n",
        end=E('E_BAD_TOPIC DPUB topic name "bad!" is not valid'),
    ),
    C("dpub-unparsable", b"DPUB p abc\n", end=E("E_INVALID DPUB could not parse timeout abc")),
    C("dpub-minus", b"DPUB p -1\n", end=E("E_INVALID DPUB could not parse timeout -1")),
    C("dpub-plus", b"DPUB p +1\n", end=E("E_INVALID DPUB could not parse timeout +1")),
    C("dpub-float", b"DPUB p 1.5\n", end=E("E_INVALID DPUB could not parse timeout 1.5")),
    C(
        "dpub-out-of-range",
        b"DPUB p 3600001\n",
        end=E("E_INVALID DPUB timeout 3600001 out of range 0-3600000"),
    ),
    C(
        "dpub-spec-example",
        b"DPUB p 3600100\n",
        end=E("E_INVALID DPUB timeout 3600100 out of range 0-3600000"),
    ),
    C(
        "dpub-negative-after-wrap",
        b"DPUB p 18446744073709551615\n",
        end=E("E_INVALID DPUB timeout 18446744073709551615 out of range 0-3600000"),
    ),
    C(
        "dpub-out-of-range-custom",
        b"DPUB p 1001\n",
        end=E("E_INVALID DPUB timeout 1001 out of range 0-1000"),
        limits=Limits(max_req_timeout_ms=1000),
    ),
    C(
        "dpub-eof-before-size",
        b"DPUB p 10\n",
        end=E("E_BAD_MESSAGE DPUB failed to read message body size"),
    ),
    C(
        "dpub-size-0",
        b"DPUB p 10\n" + i32(0),
        end=E("E_BAD_MESSAGE DPUB invalid message body size 0"),
    ),
    C(
        "dpub-size-negative",
        b"DPUB p 10\n" + i32(-7),
        end=E("E_BAD_MESSAGE DPUB invalid message body size -7"),
    ),
    C(
        "dpub-too-big",
        b"DPUB p 10\n" + i32(MAX_MSG + 1),
        end=E("E_BAD_MESSAGE DPUB message too big 1048577 > 1048576"),
    ),
    C(
        "dpub-too-big-custom",
        b"DPUB p 10\n" + i32(101),
        end=E("E_BAD_MESSAGE DPUB message too big 101 > 100"),
        limits=Limits(max_msg_size=100),
    ),
    C(
        "dpub-eof-mid-body",
        b"DPUB p 10\n" + i32(3) + b"x",
        end=E("E_BAD_MESSAGE DPUB failed to read message body"),
    ),
]

MPUB_CASES = [
    C(
        "mpub",
        mpub(b"p", [b"a", b"bc", b"d\nNOP\n"]),
        [MPubStart("p"), MPub("p", [b"a", b"bc", b"d\nNOP\n"])],
    ),
    C("mpub-one", mpub(b"p", [b"x"]), [MPubStart("p"), MPub("p", [b"x"])]),
    # bodies of one size, whole in the buffer (the parser's batch path when fed whole), and
    # batches that only look like it: each must give what the message-by-message reading gives
    C(
        "mpub-same-sizes",
        mpub(b"p", [b"ab", b"cd", b"ef"]) + b"NOP\n",
        [MPubStart("p"), MPub("p", [b"ab", b"cd", b"ef"]), Nop()],
    ),
    C(
        "mpub-last-size-differs",
        mpub(b"p", [b"ab", b"cd", b"efg"]) + b"NOP\n",
        [MPubStart("p"), MPub("p", [b"ab", b"cd", b"efg"]), Nop()],
    ),
    C(
        "mpub-same-sizes-then-size-0",
        b"MPUB p\n" + i32(99) + i32(3) + sized(b"ab") * 2 + i32(0) + b"NOP\nNOP\n",
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB invalid message(2) body size 0"),
    ),
    C(
        "mpub-same-sizes-too-big",
        mpub(b"p", [b"x" * 101] * 3),
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB message too big 101 > 100"),
        limits=Limits(max_msg_size=100),
    ),
    # the declared size is only range-checked, never matched against the messages
    C(
        "mpub-declared-size-ignored",
        mpub(b"p", [b"a"], declared=1000) + b"NOP\n",
        [MPubStart("p"), MPub("p", [b"a"]), Nop()],
    ),
    C(
        "mpub-declared-too-small",
        mpub(b"p", [b"abcdef"], declared=1) + b"NOP\n",
        [MPubStart("p"), MPub("p", [b"abcdef"]), Nop()],
    ),
    C("mpub-no-topic", b"MPUB\n", end=E("E_INVALID MPUB insufficient number of parameters")),
    C(
        "mpub-bad-topic",
        b"MPUB bad!\n",
        end=E('E_BAD_TOPIC E_BAD_TOPIC MPUB topic name "bad!" is not valid'),
    ),
    C(
        "mpub-empty-topic",
        b"MPUB \n",
        end=E('E_BAD_TOPIC E_BAD_TOPIC MPUB topic name "" is not valid'),
    ),
    C(
        "mpub-eof-before-size",
        b"MPUB p\n",
        [MPubStart("p")],
        E("E_BAD_BODY MPUB failed to read body size"),
    ),
    C(
        "mpub-size-0",
        b"MPUB p\n" + i32(0),
        [MPubStart("p")],
        E("E_BAD_BODY MPUB invalid body size 0"),
    ),
    C(
        "mpub-size-negative",
        b"MPUB p\n" + i32(-1),
        [MPubStart("p")],
        E("E_BAD_BODY MPUB invalid body size -1"),
    ),
    C(
        "mpub-too-big",
        b"MPUB p\n" + i32(MAX_BODY + 1),
        [MPubStart("p")],
        E("E_BAD_BODY MPUB body too big 5242881 > 5242880"),
    ),
    C(
        "mpub-too-big-custom",
        b"MPUB p\n" + i32(1148),
        [MPubStart("p")],
        E("E_BAD_BODY MPUB body too big 1148 > 1000"),
        limits=Limits(max_body_size=1000),
    ),
    C(
        "mpub-eof-before-count",
        b"MPUB p\n" + i32(20),
        [MPubStart("p")],
        E("E_BAD_BODY MPUB failed to read message count"),
    ),
    C(
        "mpub-count-0",
        b"MPUB p\n" + i32(20) + i32(0),
        [MPubStart("p")],
        E("E_BAD_BODY MPUB invalid message count 0"),
    ),
    C(
        "mpub-count-negative",
        b"MPUB p\n" + i32(20) + i32(-3),
        [MPubStart("p")],
        E("E_BAD_BODY MPUB invalid message count -3"),
    ),
    # (max-body-size - 4) / 5 messages at most
    C(
        "mpub-count-max",
        b"MPUB p\n" + i32(20) + i32(1048575),
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB failed to read message(0) body size"),
    ),
    C(
        "mpub-count-over-max",
        b"MPUB p\n" + i32(20) + i32(1048576),
        [MPubStart("p")],
        E("E_BAD_BODY MPUB invalid message count 1048576"),
    ),
    C(
        "mpub-count-over-max-custom",
        b"MPUB p\n" + i32(20) + i32(200),
        [MPubStart("p")],
        E("E_BAD_BODY MPUB invalid message count 200"),
        limits=Limits(max_body_size=1000),
    ),
    C(
        "mpub-count-max-custom",
        b"MPUB p\n" + i32(20) + i32(199),
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB failed to read message(0) body size"),
        limits=Limits(max_body_size=1000),
    ),
    C(
        "mpub-eof-at-message-2",
        b"MPUB p\n" + i32(20) + mpub_body([b"a", b"b"], count=3),
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB failed to read message(2) body size"),
    ),
    C(
        "mpub-message-5-size-0",
        b"MPUB p\n" + i32(99) + mpub_body([b"m"] * 5, count=6) + i32(0),
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB invalid message(5) body size 0"),
    ),
    C(
        "mpub-message-0-size-negative",
        b"MPUB p\n" + i32(99) + i32(1) + i32(-1),
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB invalid message(0) body size -1"),
    ),
    C(
        "mpub-message-too-big",
        b"MPUB p\n" + i32(99) + i32(2) + sized(b"a") + i32(MAX_MSG + 1),
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB message too big 1048577 > 1048576"),
    ),
    C(
        "mpub-message-too-big-custom",
        b"MPUB p\n" + i32(99) + i32(1) + i32(101),
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB message too big 101 > 100"),
        limits=Limits(max_msg_size=100),
    ),
    C(
        "mpub-eof-mid-message",
        b"MPUB p\n" + i32(99) + i32(1) + i32(5) + b"ab",
        [MPubStart("p")],
        E("E_BAD_MESSAGE MPUB failed to read message body"),
    ),
]

RDY_CASES = [
    C("rdy-default-1", b"RDY\n", [Rdy(1)]),
    C("rdy-empty-is-0", b"RDY \n", [Rdy(0)]),
    C("rdy-10", b"RDY 10\n", [Rdy(10)]),
    C("rdy-max", b"RDY 2500\n", [Rdy(2500)]),
    C("rdy-extra-param", b"RDY 5 6\n", [Rdy(5)]),
    C("rdy-wraps-to-0", b"RDY 18446744073709551616\n", [Rdy(0)]),
    C("rdy-out-of-range", b"RDY 2501\n", end=E("E_INVALID RDY count 2501 out of range 0-2500")),
    C(
        "rdy-out-of-range-custom",
        b"RDY 51\n",
        end=E("E_INVALID RDY count 51 out of range 0-50"),
        limits=Limits(max_rdy_count=50),
    ),
    C(
        "rdy-negative-after-wrap",
        b"RDY 18446744073709551615\n",
        end=E("E_INVALID RDY count -1 out of range 0-2500"),
    ),
    C("rdy-unparsable", b"RDY abc\n", end=E("E_INVALID RDY could not parse count abc")),
    C("rdy-minus", b"RDY -1\n", end=E("E_INVALID RDY could not parse count -1")),
    C("rdy-hex", b"RDY 0x10\n", end=E("E_INVALID RDY could not parse count 0x10")),
]

FIN_CASES = [
    C("fin", b"FIN " + ID + b"\n", [Fin([ID])]),
    C("fin-extra-param", b"FIN " + ID + b" x\n", [Fin([ID])]),
    C("fin-binary-id", b"FIN " + b"\x00\xff" * 8 + b"\n", [Fin([b"\x00\xff" * 8])]),
    C("fin-no-params", b"FIN\n", end=E("E_INVALID FIN insufficient number of params")),
    C("fin-empty-id", b"FIN \n", end=E("E_INVALID invalid message ID")),
    C("fin-short-id", b"FIN " + ID[:15] + b"\n", end=E("E_INVALID invalid message ID")),
    C("fin-long-id", b"FIN " + ID + b"0\n", end=E("E_INVALID invalid message ID")),
]

REQ_CASES = [
    C("req", b"REQ " + ID + b" 5000\n", [Req(ID, 5000)]),
    C("req-zero", b"REQ " + ID + b" 0\n", [Req(ID, 0)]),
    C("req-empty-timeout-is-0", b"REQ " + ID + b" \n", [Req(ID, 0)]),
    C("req-max", b"REQ " + ID + b" 3600000\n", [Req(ID, 3600000)]),
    # out-of-range delays are clamped, never rejected
    C("req-clamped-high", b"REQ " + ID + b" 3600001\n", [Req(ID, 3600000)]),
    C("req-clamped-huge", b"REQ " + ID + b" 99999999999999\n", [Req(ID, 3600000)]),
    C("req-clamped-negative-after-wrap", b"REQ " + ID + b" 18446744073709551615\n", [Req(ID, 0)]),
    C(
        "req-clamped-custom",
        b"REQ " + ID + b" 5000\n",
        [Req(ID, 1000)],
        limits=Limits(max_req_timeout_ms=1000),
    ),
    C("req-no-params", b"REQ\n", end=E("E_INVALID REQ insufficient number of params")),
    C("req-one-param", b"REQ " + ID + b"\n", end=E("E_INVALID REQ insufficient number of params")),
    C("req-bad-id", b"REQ 123 10\n", end=E("E_INVALID invalid message ID")),
    C("req-bad-id-before-timeout", b"REQ 123 abc\n", end=E("E_INVALID invalid message ID")),
    C(
        "req-unparsable",
        b"REQ " + ID + b" abc\n",
        end=E("E_INVALID REQ could not parse timeout abc"),
    ),
    C("req-minus", b"REQ " + ID + b" -5\n", end=E("E_INVALID REQ could not parse timeout -5")),
]

TOUCH_CASES = [
    C("touch", b"TOUCH " + ID + b"\n", [Touch(ID)]),
    C("touch-no-params", b"TOUCH\n", end=E("E_INVALID TOUCH insufficient number of params")),
    C("touch-bad-id", b"TOUCH abc\n", end=E("E_INVALID invalid message ID")),
]

CLS_CASES = [
    C("cls", b"CLS\n", [Cls()]),
    C("cls-extra-param", b"CLS now\n", [Cls()]),
]

SUB_CASES = [
    C("sub", b"SUB t c\n", [Sub("t", "c")]),
    C("sub-extra-param", b"SUB t c x\n", [Sub("t", "c")]),
    C("sub-ephemeral", b"SUB t#ephemeral c#ephemeral\n", [Sub("t#ephemeral", "c#ephemeral")]),
    C("sub-no-params", b"SUB\n", end=E("E_INVALID SUB insufficient number of parameters")),
    C("sub-one-param", b"SUB t\n", end=E("E_INVALID SUB insufficient number of parameters")),
    C("sub-bad-topic", b"SUB bad! c\n", end=E('E_BAD_TOPIC SUB topic name "bad!" is not valid')),
    C("sub-empty-topic", b"SUB  c\n", end=E('E_BAD_TOPIC SUB topic name "" is not valid')),
    C(
        "sub-bad-topic-and-channel",
        b"SUB t:x c:y\n",
        end=E('E_BAD_TOPIC SUB topic name "t:x" is not valid'),
    ),
    C(
        "sub-bad-channel",
        b"SUB t test:ephemeral\n",
        end=E('E_BAD_CHANNEL SUB channel name "test:ephemeral" is not valid'),
    ),
    C("sub-empty-channel", b"SUB t \n", end=E('E_BAD_CHANNEL SUB channel name "" is not valid')),
]

AUTH_CASES = [
    C("auth", b"AUTH\n" + sized(b"s3cret"), [Auth(b"s3cret")]),
    C("auth-binary-secret", b"AUTH\n" + sized(b"\x00\n\xff"), [Auth(b"\x00\n\xff")]),
    C("auth-param", b"AUTH s3cret\n", end=E("E_INVALID AUTH invalid number of parameters")),
    C("auth-empty-param", b"AUTH \n", end=E("E_INVALID AUTH invalid number of parameters")),
    C("auth-eof-before-size", b"AUTH\n", end=E("E_BAD_BODY AUTH failed to read body size")),
    C("auth-size-0", b"AUTH\n" + i32(0), end=E("E_BAD_BODY AUTH invalid body size 0")),
    C("auth-size-negative", b"AUTH\n" + i32(-1), end=E("E_BAD_BODY AUTH invalid body size -1")),
    C(
        "auth-too-big",
        b"AUTH\n" + i32(MAX_BODY + 1),
        end=E("E_BAD_BODY AUTH body too big 5242881 > 5242880"),
    ),
    C(
        "auth-too-big-custom",
        b"AUTH\n" + i32(11),
        end=E("E_BAD_BODY AUTH body too big 11 > 10"),
        limits=Limits(max_body_size=10),
    ),
    C(
        "auth-eof-mid-body",
        b"AUTH\n" + i32(8) + b"abc",
        end=E("E_BAD_BODY AUTH failed to read body"),
    ),
]

IDENTIFY_SIZE_CASES = [
    C("identify", identify(b"{}"), [identified()]),
    C("identify-params-ignored", b"IDENTIFY x y\n" + sized(b"{}"), [identified()]),
    C(
        "identify-eof-before-size",
        b"IDENTIFY\n",
        end=E("E_BAD_BODY IDENTIFY failed to read body size"),
    ),
    C(
        "identify-eof-mid-size",
        b"IDENTIFY\n\x00",
        end=E("E_BAD_BODY IDENTIFY failed to read body size"),
    ),
    C("identify-size-0", b"IDENTIFY\n" + i32(0), end=E("E_BAD_BODY IDENTIFY invalid body size 0")),
    C(
        "identify-size-negative",
        b"IDENTIFY\n" + i32(-1),
        end=E("E_BAD_BODY IDENTIFY invalid body size -1"),
    ),
    C(
        "identify-too-big",
        b"IDENTIFY\n" + i32(MAX_BODY + 1),
        end=E("E_BAD_BODY IDENTIFY body too big 5242881 > 5242880"),
    ),
    C(
        "identify-too-big-custom",
        b"IDENTIFY\n" + i32(101),
        end=E("E_BAD_BODY IDENTIFY body too big 101 > 100"),
        limits=Limits(max_body_size=100),
    ),
    C(
        "identify-max-custom",
        identify(b"{" + b" " * 98 + b"}"),
        [identified()],
        limits=Limits(max_body_size=100),
    ),
    C(
        "identify-eof-mid-body",
        b"IDENTIFY\n" + i32(30) + b'{"client_id":',
        end=E("E_BAD_BODY IDENTIFY failed to read body"),
    ),
]

COMMAND_CASES = [
    *LINE_CASES,
    *NOP_CASES,
    *PUB_CASES,
    *DPUB_CASES,
    *MPUB_CASES,
    *RDY_CASES,
    *FIN_CASES,
    *REQ_CASES,
    *TOUCH_CASES,
    *CLS_CASES,
    *SUB_CASES,
    *AUTH_CASES,
    *IDENTIFY_SIZE_CASES,
]


def first_verb(data: bytes) -> bytes:
    line = data.split(b"\n", 1)[0]
    if line.endswith(b"\r"):
        line = line[:-1]
    return line.split(b" ", 1)[0]


def in_state(case: Case, state: str) -> Case:
    """The case sent after the bytes that put the connection in `state`."""
    prefix, prefix_events = STATE_PREFIX[state]
    verb = first_verb(case.data)
    allowed = ALLOWED.get(verb, ANY)  # an unknown verb fails the same way in every state
    events, end = case.events, case.end
    if state not in allowed:
        events = ()
        if verb == b"RDY" and state == CLOSING:
            end = EOF  # RDY after CLS is ignored, whatever its count
        else:
            end = E(f"E_INVALID cannot {verb.decode()} in current state")
    return Case(f"{state}-{case.id}", prefix + case.data, prefix_events + events, end, case.limits)


def tls_required(case: Case) -> Case:
    """The INIT case on a connection that must upgrade to TLS first."""
    verb = first_verb(case.data)
    assert verb != b"IDENTIFY"
    end: Outcome = EOF
    if b"\n" in case.data:
        end = Err(b"E_INVALID cannot " + verb + b" in current state (TLS required)")
    return Case(f"TLS-{case.id}", case.data, (), end, case.limits, tls_required=True)


STATE_CASES = [
    in_state(case, state) for case in COMMAND_CASES for state in (INIT, SUBSCRIBED, CLOSING)
]

TLS_CASES = [
    *(tls_required(case) for case in COMMAND_CASES if first_verb(case.data) != b"IDENTIFY"),
    Case("TLS-identify-exempt", identify(b"{}"), (identified(),), EOF, tls_required=True),
    Case(
        "TLS-identify-then-nop",
        identify(b"{}") + b"NOP\n",
        (identified(),),
        E("E_INVALID cannot NOP in current state (TLS required)"),
        tls_required=True,
    ),
    Case(
        "TLS-identify-size-error",
        b"IDENTIFY\n" + i32(0),
        (),
        E("E_BAD_BODY IDENTIFY invalid body size 0"),
        tls_required=True,
    ),
]

# -- whole streams -----------------------------------------------------------------------------

_MANY_CONSUMER = (
    b"SUB t c\nRDY 10\nFIN "
    + ID
    + b"\nREQ "
    + ID
    + b" 5000\nTOUCH "
    + ID
    + b"\nNOP\n"
    + pub(b"p", b"hello")
    + mpub(b"p", [b"a", b"b"])
    + dpub(b"p", 100, b"later")
    + b"CLS\nFIN "
    + ID
    + b"\nREQ "
    + ID
    + b" 0\r\nRDY 3\nTOUCH "
    + ID
    + b"\nNOP\n"
)
_MANY_PRODUCER = (
    identify({"client_id": "prod", "heartbeat_interval": -1})
    + b"NOP\n"
    + pub(b"p", b"x")
    + identify({"hostname": "h"})  # IDENTIFY may repeat while still in INIT
    + mpub(b"p", [b"1", b"22", b"333"])
    + dpub(b"p", 0, b"y")
    + b"AUTH\n"
    + sized(b"secret")
)

STREAM_CASES = [
    Case(
        "many-consumer-commands",
        _MANY_CONSUMER,
        (
            Sub("t", "c"),
            Rdy(10),
            Fin([ID]),
            Req(ID, 5000),
            Touch(ID),
            Nop(),
            Pub("p", b"hello"),
            MPubStart("p"),
            MPub("p", [b"a", b"b"]),
            DPub("p", 100, b"later"),
            Cls(),
            Fin([ID]),
            Req(ID, 0),
            Touch(ID),
            Nop(),
        ),
        EOF,
    ),
    Case(
        "many-producer-commands",
        _MANY_PRODUCER,
        (
            identified(client_id="prod", heartbeat_interval_ms=0),
            Nop(),
            Pub("p", b"x"),
            identified(hostname="h", heartbeat_interval_ms=0),  # 0 keeps the disabled heartbeat
            MPubStart("p"),
            MPub("p", [b"1", b"22", b"333"]),
            DPub("p", 0, b"y"),
            Auth(b"secret"),
        ),
        EOF,
    ),
    Case(
        "error-after-good-commands",
        b"NOP\n" + pub(b"p", b"x") + b"SUB t c\nRDY 2501\nNOP\n",
        (Nop(), Pub("p", b"x"), Sub("t", "c")),
        E("E_INVALID RDY count 2501 out of range 0-2500"),
    ),
    Case(
        "sub-heartbeats-disabled",
        identify({"heartbeat_interval": -1}) + b"SUB t c\n",
        (identified(heartbeat_interval_ms=0),),
        E("E_INVALID cannot SUB with heartbeats disabled"),
    ),
    # the heartbeat check comes before the parameter count
    Case(
        "sub-heartbeats-disabled-no-params",
        identify({"heartbeat_interval": -1}) + b"SUB\n",
        (identified(heartbeat_interval_ms=0),),
        E("E_INVALID cannot SUB with heartbeats disabled"),
    ),
    Case(
        "sub-heartbeats-reenabled",
        identify({"heartbeat_interval": -1})
        + identify({"heartbeat_interval": 5000})
        + b"SUB t c\n",
        (
            identified(heartbeat_interval_ms=0),
            identified(heartbeat_interval_ms=5000),
            Sub("t", "c"),
        ),
        EOF,
    ),
    Case(
        "second-sub",
        b"SUB t c\nSUB t c\n",
        (Sub("t", "c"),),
        E("E_INVALID cannot SUB in current state"),
    ),
    Case(
        "rdy-ignored-after-cls",
        b"SUB t c\nCLS\nRDY 99999\nRDY abc\nNOP\n",
        (Sub("t", "c"), Cls(), Nop()),
        EOF,
    ),
    # consumers send FINs back to back; the parser may hand a run of them over as one Fin
    Case(
        "fin-run",
        b"SUB t c\n"
        + b"".join(b"FIN " + i + b"\n" for i in IDS[:3])
        + b"FIN "
        + IDS[3]
        + b"\r\nNOP\nFIN "
        + IDS[4]
        + b"\n",
        (Sub("t", "c"), *(Fin([i]) for i in IDS[:4]), Nop(), Fin([IDS[4]])),
        EOF,
    ),
    Case(
        "fin-run-then-bad-id",
        b"SUB t c\nFIN "
        + IDS[0]
        + b"\nFIN "
        + IDS[1]
        + b"\nFIN "
        + IDS[2][:15]
        + b"\nFIN "
        + IDS[3]
        + b"\n",
        (Sub("t", "c"), Fin([IDS[0]]), Fin([IDS[1]])),
        E("E_INVALID invalid message ID"),
    ),
    Case(
        "fin-run-in-init",
        b"FIN " + IDS[0] + b"\nFIN " + IDS[1] + b"\n",
        (),
        E("E_INVALID cannot FIN in current state"),
    ),
    Case(
        "fin-run-after-cls",
        b"SUB t c\nCLS\nFIN " + IDS[0] + b"\nFIN " + IDS[1] + b"\n",
        (Sub("t", "c"), Cls(), Fin([IDS[0]]), Fin([IDS[1]])),
        EOF,
    ),
    Case(
        "fin-id-ending-in-cr",
        b"SUB t c\nFIN " + IDS[0][:15] + b"\r\r\n",
        (Sub("t", "c"), Fin([IDS[0][:15] + b"\r"])),
        EOF,
    ),
    Case(
        "fin-id-with-cr-too-long",
        b"SUB t c\nFIN " + IDS[0] + b"\r\r\n",
        (Sub("t", "c"),),
        E("E_INVALID invalid message ID"),
    ),
    Case(
        "fin-id-with-space",
        b"SUB t c\nFIN 01234567 9abcdef0\n",
        (Sub("t", "c"),),
        E("E_INVALID invalid message ID"),
    ),
    Case(
        "cls-twice",
        b"SUB t c\nCLS\nCLS\n",
        (Sub("t", "c"), Cls()),
        E("E_INVALID cannot CLS in current state"),
    ),
]

# -- magic and the 16 KiB line limit -----------------------------------------------------------

LINE_MAX = 16384

MAGIC_CASES = [
    Case("magic-bad", b"XXXX", (), E("E_BAD_PROTOCOL"), magic=False),
    Case("magic-v1", b"  V1NOP\n", (), E("E_BAD_PROTOCOL"), magic=False),
    Case("magic-lowercase", b"  v2NOP\n", (), E("E_BAD_PROTOCOL"), magic=False),
    Case("magic-http", b"GET / HTTP/1.1\r\n\r\n", (), E("E_BAD_PROTOCOL"), magic=False),
    Case("magic-one-space", b" V2\nNOP\n", (), E("E_BAD_PROTOCOL"), magic=False),
    Case("magic-short-then-eof", b"  V", (), EOF, magic=False),
    Case("magic-garbage-short-then-eof", b"XY", (), EOF, magic=False),
    Case("magic-only", b"  V2", (), EOF, magic=False),
    Case("magic-then-nop", b"  V2NOP\n", (Nop(),), EOF, magic=False),
]

LINE_LIMIT_CASES = [
    Case("line-16383-bytes", b"NOP" + b" " + b"a" * (LINE_MAX - 5) + b"\n", (Nop(),), EOF),
    Case("line-16384-bytes", b"NOP" + b" " * (LINE_MAX - 3) + b"\n", (), HANGUP),
    Case("line-16384-no-newline", b"X" * LINE_MAX, (), HANGUP),
    Case("line-16383-no-newline-eof", b"X" * (LINE_MAX - 1), (), EOF),
    Case(
        "line-long-topic",
        b"PUB " + b"a" * (LINE_MAX - 5) + b"\n",
        (),
        E(f'E_BAD_TOPIC PUB topic name "{"a" * (LINE_MAX - 5)}" is not valid'),
    ),
    Case(
        "line-limit-after-body",
        pub(b"p", b"x" * 100) + b"N" * LINE_MAX,
        (Pub("p", b"x" * 100),),
        HANGUP,
    ),
    Case(
        "line-limit-custom",
        b"NOP" + b" " * 61 + b"\n",
        (),
        HANGUP,
        Limits(max_line_length=64),
        oracle=False,
    ),
    Case(
        "line-limit-custom-fits",
        b"NOP" + b" " * 60 + b"\n",
        (Nop(),),
        EOF,
        Limits(max_line_length=64),
        oracle=False,
    ),
]


# -- IDENTIFY bodies ---------------------------------------------------------------------------

DECODE_ERROR = "E_BAD_BODY IDENTIFY failed to decode JSON body"


def I(  # noqa: E743 - short like C() above
    id: str,
    body: bytes | str | dict[str, Any],
    expect: dict[str, Any] | str,
    limits: Limits | None = None,
) -> Case:
    """An IDENTIFY body and either the settings it changes or nsqd's error text."""
    limits = limits or Limits()
    if isinstance(expect, str):
        return Case(f"identify-{id}", identify(body), (), E(expect), limits)
    if isinstance(body, dict) and body.get("msg_timeout"):
        expect = {"msg_timeout_set": True, **expect}  # it named one (ours: policies read it)
    return Case(f"identify-{id}", identify(body), (identified(limits, **expect),), EOF, limits)


def invalid(what: str, value: int) -> str:
    return f"E_BAD_BODY IDENTIFY {what} ({value}) is invalid"


FN = {"feature_negotiation": True}  # makes nsqd echo the effective settings in its JSON reply

IDENTIFY_JSON_CASES = [
    # decoding as Go's encoding/json does
    I("empty-object", b"{}", {}),
    I("null", b"null", {}),
    I("whitespace-around", b" \r\n\t{} \n", {}),
    I(
        "all-fields",
        {
            "client_id": "cid",
            "hostname": "host",
            "user_agent": "ua/1.0",
            "heartbeat_interval": 1000,
            "output_buffer_size": 64,
            "output_buffer_timeout": 25,
            "feature_negotiation": False,
            "tls_v1": True,
            "deflate": True,
            "deflate_level": 3,
            "snappy": True,
            "sample_rate": 99,
            "msg_timeout": 1000,
        },
        {
            "client_id": "cid",
            "hostname": "host",
            "user_agent": "ua/1.0",
            "heartbeat_interval_ms": 1000,
            "output_buffer_size": 64,
            "output_buffer_timeout_ms": 25,
            "tls_v1": True,
            "deflate": True,
            "deflate_level": 3,
            "snappy": True,
            "sample_rate": 99,
            "msg_timeout_ms": 1000,
        },
    ),
    I(
        "unknown-keys-ignored",
        b'{"long_id":"x","short_id":7,"foo":[1,{"bar":null}],"baz":1.5e300,"client_id":"c"}',
        {"client_id": "c"},
    ),
    I(
        "keys-case-insensitive",
        b'{"CLIENT_ID":"a","Heartbeat_Interval":5000,"SAMPLE_rate":7}',
        {"client_id": "a", "heartbeat_interval_ms": 5000, "sample_rate": 7},
    ),
    # Go folds keys with Unicode simple folding: the long s (U+017F) matches "s"
    I("key-long-s-folds", '{"\u017fample_rate":7}', {"sample_rate": 7}),
    I("key-long-s-validated", '{"\u017fample_rate":100}', invalid("sample rate", 100)),
    I("duplicate-keys-last-wins", b'{"sample_rate":1,"sample_rate":3}', {"sample_rate": 3}),
    I("duplicate-folded-keys-last-wins", b'{"sample_rate":1,"SAMPLE_RATE":2}', {"sample_rate": 2}),
    I("nulls-ignored", b'{"heartbeat_interval":null,"client_id":null,"tls_v1":null}', {}),
    I("negative-zero", b'{"heartbeat_interval":-0}', {}),
    I("invalid-utf8-in-string", b'{"client_id":"a\xffb"}', {"client_id": "a\ufffdb"}),
    I("escapes-in-string", b'{"client_id":"a\\u00e9\\n"}', {"client_id": "a\u00e9\n"}),
    I("huge-number-unknown-key", b'{"x":1' + b"0" * 5000 + b"}", {}),
    I("deep-nesting-unknown-key", b'{"x":' + b"[" * 1500 + b"]" * 1500 + b"}", {}),
    # encoding/json's depth limit is 10000 (the object counts as one level)
    I("deepest-accepted", b'{"x":' + b"[" * 9999 + b"]" * 9999 + b"}", {}),
    I("array", b"[]", DECODE_ERROR),
    I("array-of-int", b"[1]", DECODE_ERROR),
    I("array-of-pairs", b'[["sample_rate",100]]', DECODE_ERROR),
    I("number", b"1", DECODE_ERROR),
    I("string", b'"x"', DECODE_ERROR),
    I("true", b"true", DECODE_ERROR),
    I("only-whitespace", b" ", DECODE_ERROR),
    I("truncated", b'{"client_id":', DECODE_ERROR),
    I("trailing-garbage", b"{} x", DECODE_ERROR),
    I("two-objects", b"{}{}", DECODE_ERROR),
    I("single-quotes", b"{'client_id':'x'}", DECODE_ERROR),
    I("trailing-comma", b'{"client_id":"x",}', DECODE_ERROR),
    I("bom", b"\xef\xbb\xbf{}", DECODE_ERROR),
    I("control-char-in-string", b'{"client_id":"a\x01"}', DECODE_ERROR),
    I("float-in-int", b'{"heartbeat_interval":1000.0}', DECODE_ERROR),
    I("exponent-in-int", b'{"heartbeat_interval":1e3}', DECODE_ERROR),
    I("fraction-in-int", b'{"sample_rate":1.5}', DECODE_ERROR),
    I("string-in-int", b'{"heartbeat_interval":"1000"}', DECODE_ERROR),
    I("bool-in-int", b'{"msg_timeout":true}', DECODE_ERROR),
    I("int-in-bool", b'{"tls_v1":1}', DECODE_ERROR),
    I("string-in-bool", b'{"feature_negotiation":"true"}', DECODE_ERROR),
    I("int-in-string", b'{"client_id":5}', DECODE_ERROR),
    I("object-in-string", b'{"client_id":{"a":1}}', DECODE_ERROR),
    I("array-in-int", b'{"deflate_level":[1]}', DECODE_ERROR),
    I("nan-unknown-key", b'{"x":NaN}', DECODE_ERROR),
    I("infinity", b'{"msg_timeout":Infinity}', DECODE_ERROR),
    I("int64-overflow", b'{"heartbeat_interval":9223372036854775808}', DECODE_ERROR),
    I("int32-overflow", b'{"sample_rate":2147483648}', DECODE_ERROR),
    I("int32-underflow", b'{"sample_rate":-2147483649}', DECODE_ERROR),
    I("too-deep", b"[" * 10001 + b"]" * 10001, DECODE_ERROR),
    I("too-deep-unknown-key", b'{"x":' + b"[" * 10000 + b"]" * 10000 + b"}", DECODE_ERROR),
    I("bad-type-among-good", b'{"client_id":"c","hostname":1,"sample_rate":200}', DECODE_ERROR),
    # validation, in nsqd's order, with its texts
    I("heartbeat-disabled", {"heartbeat_interval": -1}, {"heartbeat_interval_ms": 0}),
    I("heartbeat-0-default", {"heartbeat_interval": 0}, {}),
    I("heartbeat-min", {"heartbeat_interval": 1000}, {"heartbeat_interval_ms": 1000}),
    I("heartbeat-max", {"heartbeat_interval": 60000}, {"heartbeat_interval_ms": 60000}),
    I("heartbeat-999", {"heartbeat_interval": 999}, invalid("heartbeat interval", 999)),
    I("heartbeat-60001", {"heartbeat_interval": 60001}, invalid("heartbeat interval", 60001)),
    I("heartbeat--2", {"heartbeat_interval": -2}, invalid("heartbeat interval", -2)),
    I(
        "heartbeat-int64-max",
        {"heartbeat_interval": 2**63 - 1},
        invalid("heartbeat interval", 2**63 - 1),
    ),
    I(
        "heartbeat-300001",
        {"heartbeat_interval": 300001},
        invalid("heartbeat interval", 300001),
        Limits(max_heartbeat_interval_ms=300000),
    ),
    I(
        "heartbeat-300000",
        {"heartbeat_interval": 300000},
        {"heartbeat_interval_ms": 300000},
        Limits(max_heartbeat_interval_ms=300000),
    ),
    I("obt-disabled", {**FN, "output_buffer_timeout": -1}, {**FN, "output_buffer_timeout_ms": 0}),
    I("obt-min", {**FN, "output_buffer_timeout": 25}, {**FN, "output_buffer_timeout_ms": 25}),
    I("obt-max", {**FN, "output_buffer_timeout": 30000}, {**FN, "output_buffer_timeout_ms": 30000}),
    I("obt-24", {"output_buffer_timeout": 24}, invalid("output buffer timeout", 24)),
    I("obt-30001", {"output_buffer_timeout": 30001}, invalid("output buffer timeout", 30001)),
    I("obt--2", {"output_buffer_timeout": -2}, invalid("output buffer timeout", -2)),
    I(
        "obt-custom-min",
        {"output_buffer_timeout": 99},
        invalid("output buffer timeout", 99),
        Limits(min_output_buffer_timeout_ms=100),
    ),
    I(
        "obs-disabled",
        {**FN, "output_buffer_size": -1},
        {**FN, "output_buffer_size": 1, "output_buffer_timeout_ms": 0},
    ),
    I(
        "obs-disabled-overrides-timeout",
        {**FN, "output_buffer_size": -1, "output_buffer_timeout": 100},
        {**FN, "output_buffer_size": 1, "output_buffer_timeout_ms": 0},
    ),
    I("obs-min", {**FN, "output_buffer_size": 64}, {**FN, "output_buffer_size": 64}),
    I("obs-max", {**FN, "output_buffer_size": 65536}, {**FN, "output_buffer_size": 65536}),
    I("obs-63", {"output_buffer_size": 63}, invalid("output buffer size", 63)),
    I("obs-65537", {"output_buffer_size": 65537}, invalid("output buffer size", 65537)),
    I("obs--2", {"output_buffer_size": -2}, invalid("output buffer size", -2)),
    I(
        "obs-custom-max",
        {"output_buffer_size": 1001},
        invalid("output buffer size", 1001),
        Limits(max_output_buffer_size=1000),
    ),
    I("sample-rate-99", {**FN, "sample_rate": 99}, {**FN, "sample_rate": 99}),
    I("sample-rate-100", {"sample_rate": 100}, invalid("sample rate", 100)),
    I("sample-rate--1", {"sample_rate": -1}, invalid("sample rate", -1)),
    I("sample-rate-int32-max", {"sample_rate": 2**31 - 1}, invalid("sample rate", 2**31 - 1)),
    I("msg-timeout-min", {**FN, "msg_timeout": 1000}, {**FN, "msg_timeout_ms": 1000}),
    I("msg-timeout-max", {**FN, "msg_timeout": 900000}, {**FN, "msg_timeout_ms": 900000}),
    I("msg-timeout-999", {"msg_timeout": 999}, invalid("msg timeout", 999)),
    I("msg-timeout-900001", {"msg_timeout": 900001}, invalid("msg timeout", 900001)),
    I("msg-timeout--1", {"msg_timeout": -1}, invalid("msg timeout", -1)),
    I(
        "msg-timeout-custom-max",
        {"msg_timeout": 5001},
        invalid("msg timeout", 5001),
        Limits(max_msg_timeout_ms=5000),
    ),
    I(
        "msg-timeout-custom-default",
        FN,
        {**FN, "msg_timeout_ms": 30000},
        Limits(msg_timeout_ms=30000),
    ),
    I(
        "order-heartbeat-first",
        {
            "msg_timeout": 1,
            "sample_rate": 100,
            "output_buffer_size": 1,
            "output_buffer_timeout": 1,
            "heartbeat_interval": 1,
        },
        invalid("heartbeat interval", 1),
    ),
    I(
        "order-timeout-before-size",
        {"msg_timeout": 1, "sample_rate": 100, "output_buffer_size": 1, "output_buffer_timeout": 1},
        invalid("output buffer timeout", 1),
    ),
    I(
        "order-size-before-sample-rate",
        {"msg_timeout": 1, "sample_rate": 100, "output_buffer_size": 1},
        invalid("output buffer size", 1),
    ),
    I(
        "order-sample-rate-before-msg-timeout",
        {"msg_timeout": 1, "sample_rate": 100},
        invalid("sample rate", 100),
    ),
]
