"""What clients send on connect and to manage their connection: PING, ECHO, SELECT, QUIT,
AUTH (with --resp-password), HELLO (2 or 3: the session's reply types), TIME,
COMMAND, INFO (CONFIG is in admin.py)."""

from __future__ import annotations

import hmac
import time

from protocol.resp.codec import EMPTY_ARRAY, OK, PONG, array, bulk, integer, raw_array
from protocol.resp.replies import PROTOCOLS

from .. import info as info_text
from .clients import setname
from .command_info import RENDERED
from .pubsub import mode as pubsub_mode
from .registry import (
    SYNTAX,
    TABLE,
    ReplyError,
    Session,
    command,
    container,
    int_arg,
    integer_arg,
    wrong_arity,
)

VERSION = info_text.VERSION.encode()


@command("ping", -1)
def ping(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) > 2:
        raise wrong_arity("ping")
    return PONG if len(argv) == 1 else bulk(argv[1])


@command("echo", 2)
def echo(s: Session, argv: list[bytes]) -> bytes:
    return bulk(argv[1])


@command("select", 2)
def select(s: Session, argv: list[bytes]) -> bytes:
    db = int_arg(argv[1])
    dbs = s.fe.ks.dbs
    if not 0 <= db < len(dbs):
        raise ReplyError("ERR DB index is out of range")
    s.db, s.ks = db, dbs[db]
    return OK


@command("quit", -1, noauth=True, immediate=True)
def quit_(s: Session, argv: list[bytes]) -> bytes:
    s.close_after = True
    return OK


def _authenticate(s: Session, user: bytes, password: bytes) -> bool:
    want = s.fe.password
    if user != b"default":
        return False
    ok = not want or hmac.compare_digest(password, want)
    if ok:
        s.authed = True
        s.parser.strict_auth = False
    return ok


@command("auth", -2, noauth=True)
def auth(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    if len(argv) == 2:
        if not s.fe.password:
            raise ReplyError(
                "ERR AUTH <password> called without any password configured for the default "
                "user. Are you sure your configuration is correct?"
            )
        user, password = b"default", argv[1]
    else:
        user, password = argv[1], argv[2]
    if not _authenticate(s, user, password):
        raise ReplyError("WRONGPASS invalid username-password pair or user is disabled.")
    return OK


def _hello_options(s: Session, argv: list[bytes], j: int) -> None:
    """HELLO's AUTH and SETNAME, each done as it is read (Redis 7.0's helloCommand): a name
    before a bad option or a wrong password stays set, a bad name fails before what follows."""
    while j < len(argv):
        opt, more = argv[j].lower(), len(argv) - 1 - j
        if opt == b"auth" and more >= 2:
            if not _authenticate(s, argv[j + 1], argv[j + 2]):
                raise ReplyError("WRONGPASS invalid username-password pair or user is disabled.")
            j += 2
        elif opt == b"setname" and more:
            setname(s, argv[j + 1])
            j += 1
        else:
            text = argv[j].decode("utf-8", "surrogateescape")
            raise ReplyError(f"ERR Syntax error in HELLO option '{text}'")
        j += 1


@command("hello", -1, noauth=True)
def hello(s: Session, argv: list[bytes]) -> bytes:
    j = 1
    if len(argv) >= 2:
        ver = integer_arg(argv[1], "ERR Protocol version is not an integer or out of range")
        enc = PROTOCOLS.get(ver)
        if enc is None:
            raise ReplyError("NOPROTO unsupported protocol version")
        j = 2
    else:
        enc = s.enc
    _hello_options(s, argv, j)
    if not s.authed:
        raise ReplyError(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
            "HELLO AUTH <user> <pass> option can be used to authenticate the client and "
            "select the RESP protocol version at the same time"
        )
    s.enc = enc
    pubsub_mode(s)  # RESP3 lifts RESP2's subscribed-mode limits, RESP2 puts them back
    return enc.map(
        [
            bulk(b"server"), bulk(b"redis"), bulk(b"version"), bulk(VERSION),
            bulk(b"proto"), integer(enc.version), bulk(b"id"), integer(s.id),
            bulk(b"mode"), bulk(b"standalone"), bulk(b"role"), bulk(b"master"),
            bulk(b"modules"), EMPTY_ARRAY,
        ]
    )  # fmt: skip


# -- COMMAND ----------------------------------------------------------------------------------


def _command_all(s: Session, argv: list[bytes]) -> bytes:
    entries = RENDERED[s.enc.version]
    return raw_array([entries[name] for name in TABLE])


def _command_info(s: Session, argv: list[bytes]) -> bytes:
    """Redis's entry of each command named (command_info.py), or a null for one not ours."""
    entries, null = RENDERED[s.enc.version], s.enc.null
    return raw_array([entries.get(n.lower(), null) for n in argv[2:] or list(TABLE)])


container(
    "command",
    {
        "count": (lambda s, a: integer(len(TABLE)), 2),
        "info": (_command_info, -2),
        "docs": (lambda s, a: EMPTY_ARRAY, -2),  # no docs: redis-cli falls back to its own
        "list": (lambda s, a: array([c.encode() for c in sorted(n.decode() for n in TABLE)]), -2),
    },
    _command_all,
)


@command("time", 1)
def time_(s: Session, argv: list[bytes]) -> bytes:
    now = time.time_ns() // 1000
    return array([b"%d" % (now // 1_000_000), b"%d" % (now % 1_000_000)])


# -- INFO, CONFIG -----------------------------------------------------------------------------


@command("info", -1)
def info(s: Session, argv: list[bytes]) -> bytes:
    return s.enc.verbatim(info_text.render(s.fe, argv[1:]))
