"""CLIENT as Redis 7.0 answers it, as far as clients and queue libraries use it: SETNAME,
GETNAME, ID, INFO and LIST (Redis's line layout; the memory and buffer fields are 0 here),
KILL (the old `addr` form and the filters ID/ADDR/LADDR/TYPE/USER/SKIPME), UNBLOCK, NO-EVICT,
HELP;
SETINFO (Redis 7.2's, sent by redis-py on connect) is accepted."""

from __future__ import annotations

import time
from collections.abc import Callable

from protocol.resp.codec import OK, integer, string2ll

from .registry import SYNTAX, ReplyError, Session, container, integer_arg

TYPES = {b"normal", b"master", b"slave", b"replica", b"pubsub"}


def setname(s: Session, name: bytes) -> None:
    if any(c < 33 or c > 126 for c in name):
        raise ReplyError("ERR Client names cannot contain spaces, newlines or special characters.")
    s.name = name


def _setname(s: Session, argv: list[bytes]) -> bytes:
    setname(s, argv[2])
    return OK


def _laddr(s: Session) -> bytes:
    address = s.fe.address
    return f"{address[0]}:{address[1]}".encode() if address else b""


def _sessions(s: Session) -> list[Session]:
    return [conn.session for conn in s.fe.connections.values()]


def _line(s: Session) -> bytes:
    fe = s.fe
    conn = fe.connections.get(s.id)
    laddr = _laddr(s)
    flags = (b"b" if conn is not None and conn.blocked else b"") + (
        b"x" if s.multi is not None else b""
    )
    return (
        b"id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=0 flags=%s db=%d sub=0 psub=0 "
        b"ssub=0 multi=%d qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 "
        b"omem=0 tot-mem=0 events=r cmd=%s user=default redir=-1 resp=%d\n"
    ) % (
        s.id,
        (conn.remote if conn is not None else "").encode(),
        laddr,
        conn.socket.fd if conn is not None else -1,
        s.name,
        int(time.monotonic() - s.created),
        flags or b"N",
        s.db,
        -1 if s.multi is None else len(s.multi),
        b"NULL" if s.last is None else s.last.name.encode(),  # fullname: "client|list"
        s.enc.version,
    )


def _info(s: Session, argv: list[bytes]) -> bytes:
    return s.enc.verbatim(_line(s))


def _list(s: Session, argv: list[bytes]) -> bytes:
    sessions = _sessions(s)
    if len(argv) == 4 and argv[2].lower() == b"type":
        kind = argv[3].lower()
        if kind not in TYPES:
            raise ReplyError(f"ERR Unknown client type '{argv[3].decode('latin-1')}'")
        if kind != b"normal":
            sessions = []
    elif len(argv) > 3 and argv[2].lower() == b"id":
        ids = set()
        for raw in argv[3:]:
            value = string2ll(raw)
            if value is None:
                raise ReplyError("ERR Invalid client ID")
            ids.add(value)
        sessions = [x for x in sessions if x.id in ids]
    elif len(argv) != 2:
        raise ReplyError(SYNTAX)
    sessions.sort(key=lambda x: x.id)
    return s.enc.verbatim(b"".join(_line(x) for x in sessions))


def _kill_filters(s: Session, argv: list[bytes]) -> tuple[list[Callable[[Session], bool]], bool]:
    """The new form's filters (each must match) and SKIPME."""
    tests: list[Callable[[Session], bool]] = []
    skipme = True
    fe = s.fe
    for i in range(2, len(argv), 2):
        opt = argv[i].lower()
        if i + 1 >= len(argv):
            raise ReplyError(SYNTAX)
        value = argv[i + 1]
        if opt == b"id":
            wanted = string2ll(value)
            if wanted is None or wanted < 1:
                raise ReplyError("ERR client-id should be greater than 0")
            tests.append(lambda x, w=wanted: x.id == w)
        elif opt == b"type":
            if value.lower() not in TYPES:
                raise ReplyError(f"ERR Unknown client type '{value.decode('latin-1')}'")
            normal = value.lower() == b"normal"
            tests.append(lambda x, normal=normal: normal)
        elif opt == b"addr":
            tests.append(lambda x, a=value: fe.remote_of(x).encode() == a)
        elif opt == b"laddr":
            same = value == _laddr(s)
            tests.append(lambda x, same=same: same)
        elif opt == b"user":
            if value != b"default":
                raise ReplyError(f"ERR No such user '{value.decode('latin-1')}'")
        elif opt == b"skipme":
            if value.lower() not in (b"yes", b"no"):
                raise ReplyError(SYNTAX)
            skipme = value.lower() == b"yes"
        else:
            raise ReplyError(SYNTAX)
    return tests, skipme


def _kill_one(s: Session, victim: Session) -> None:
    if victim is s:
        s.close_after = True  # answered first, as Redis's CLIENT_CLOSE_AFTER_REPLY
    else:
        s.fe.kill(victim.id)


def _kill(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) == 3:  # CLIENT KILL addr:port
        for victim in _sessions(s):
            if s.fe.remote_of(victim).encode() == argv[2]:
                _kill_one(s, victim)
                return OK
        raise ReplyError("ERR No such client")
    tests, skipme = _kill_filters(s, argv)
    victims = [x for x in _sessions(s) if all(t(x) for t in tests) and not (skipme and x is s)]
    for victim in victims:
        _kill_one(s, victim)
    return integer(len(victims))


CLIENT_HELP = [
    b"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"GETNAME", b"    Return the name of the current connection.",
    b"ID", b"    Return the ID of the current connection.",
    b"INFO", b"    Return information about the current client connection.",
    b"KILL <ip:port>", b"    Kill connection made from <ip:port>.",
    b"KILL <option> <value> [<option> <value> [...]]",
    b"    Kill connections. Options are: ID, TYPE, USER, ADDR, LADDR, SKIPME.",
    b"LIST [options ...]", b"    Return information about client connections.",
    b"SETNAME <name>", b"    Assign the name <name> to the current connection.",
    b"SETINFO <LIB-NAME|LIB-VER> <value>", b"    Accepted and ignored.",
]  # fmt: skip

UNBLOCKED = b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
_UNBLOCK_REPLY = {b"timeout": None, b"error": UNBLOCKED}  # None: the command's timeout reply


def _unblock(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) > 4:
        sub = argv[1].decode("utf-8", "surrogateescape")
        raise ReplyError(
            f"ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP."
        )
    reason = argv[3].lower() if len(argv) == 4 else b"timeout"
    if reason not in _UNBLOCK_REPLY:
        raise ReplyError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    client_id = integer_arg(argv[2])
    return integer(int(s.fe.unblock(client_id, _UNBLOCK_REPLY[reason])))


container(
    "client",
    {
        "setname": (_setname, 3),
        "getname": (lambda s, a: s.enc.bulk(s.name or None), 2),
        "id": (lambda s, a: integer(s.id), 2),
        "setinfo": (lambda s, a: OK, 4),  # Redis 7.2's; redis-py sends it on connect
        "info": (_info, 2),
        "list": (_list, -2),
        "kill": (_kill, -3),
        "unblock": (_unblock, -3),
        "no-evict": (lambda s, a: OK, 3),
        "help": (lambda s, a: b"+" + b"\r\n+".join(CLIENT_HELP) + b"\r\n", 2),
    },
)
