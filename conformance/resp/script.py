"""Command scripts (scripts/*.txt) and running one against a server.

One step per line; blank lines and `#` comments are ignored; `#! server: auth` in a file picks
the servers started with a password. A step may start with `@name` (the connection, opened on
first use; default `a`):

    LPUSH q "two words"   send the command (shlex words, as a multibulk), read one reply
    BLPOP q 0 &           send only
    <                     read one reply (up to 3 s)
    NOREPLY 0.2           read for 0.2 s: nothing should come (what came is recorded)
    RAW 2 b"PING\\r\\n.."   send these bytes (a Python bytes literal), read 2 replies
    RAWCLOSE b"*1\\r\\n$x"  send these bytes, read everything until the server closes
    RAWCLOSE b"A" * 70000 the same with a repeated literal
    SHAPE HELLO 3         send the command, keep only its reply's first line (the type and
                          size of a reply whose values differ between servers: ids, versions;
                          of a bulk or verbatim string only its type)
    CLOSE                 close the connection
    SLEEP 0.05            wait (the order in which blocked clients arrive)

Before a script runs, FLUSHALL on a connection of its own empties the server."""

from __future__ import annotations

import ast
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from .wire import Conn, encode

SCRIPTS = Path(__file__).with_name("scripts")
PASSWORD = "s3cret"


@dataclass
class Script:
    name: str
    steps: list[tuple[int, str]]
    server: str = "plain"  # or "auth"


@dataclass
class Transcript:
    events: list[tuple[int, str, bytes]] = field(default_factory=list)


def load(path: Path) -> Script:
    steps, server = [], "plain"
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if line.startswith("#! server:"):
            server = line.split(":", 1)[1].strip()
        if not line or line.startswith("#"):
            continue
        steps.append((n, line))
    return Script(path.stem, steps, server)


def load_all() -> list[Script]:
    return [load(p) for p in sorted(SCRIPTS.glob("*.txt"))]


def run(script: Script, port: int) -> Transcript:
    setup = Conn(port)
    if script.server == "auth":
        setup.send(encode([b"AUTH", PASSWORD.encode()]))
        setup.reply()
    setup.send(encode([b"FLUSHALL"]))
    if setup.reply() != b"+OK\r\n":
        raise RuntimeError(f"FLUSHALL failed on port {port}")
    setup.close()
    conns: dict[str, Conn] = {}
    out = Transcript()
    try:
        for n, line in script.steps:
            out.events.append((n, line, _step(line, conns, port)))
    finally:
        for conn in conns.values():
            conn.close()
    return out


def _bytes(literal: str) -> bytes:
    """A bytes literal, or `b"..." * N` (a long input without a long script line)."""
    head, sep, times = literal.rpartition(" * ")
    if sep and times.strip().isdigit():
        return ast.literal_eval(head) * int(times)
    return ast.literal_eval(literal)


def _step(line: str, conns: dict[str, Conn], port: int) -> bytes:
    name = "a"
    if line.startswith("@"):
        name, _, line = line[1:].partition(" ")
        line = line.strip()
    word, _, rest = line.partition(" ")
    if word == "SLEEP":
        time.sleep(float(rest))
        return b""
    conn = conns.get(name)
    if conn is None:
        conn = conns[name] = Conn(port)
    if word == "CLOSE":
        conn.close()
        del conns[name]
        return b""
    if word == "<":
        return conn.reply(3.0)
    if word == "NOREPLY":
        return conn.reply(float(rest)) if conn.buf or not conn.eof else b"<closed>"
    if word == "RAW":
        count, _, literal = rest.partition(" ")
        conn.send(_bytes(literal))
        return b"".join(conn.reply() for _ in range(int(count)))
    if word == "SHAPE":
        conn.send(encode([a.encode() for a in shlex.split(rest)]))
        head = conn.reply().split(b"\r\n", 1)[0]
        return head[:1] if head[:1] in (b"$", b"=") else head  # a text's length varies too
    if word == "RAWCLOSE":
        conn.send(_bytes(rest))
        return conn.until_closed()
    background = line.endswith(" &")
    if background:
        line = line[:-2]
    args = [a.encode() for a in shlex.split(line)]
    conn.send(encode(args))
    return b"" if background else conn.reply()


def diff(a: Transcript, b: Transcript) -> list[str]:
    """Lines describing each step whose replies differ (a: redis-server, b: ours)."""
    out = []
    for (n, line, want), (_, _, got) in zip(a.events, b.events, strict=True):
        if want != got:
            out.append(f"line {n}: {line}\n    redis: {want!r}\n    ours:  {got!r}")
    return out
