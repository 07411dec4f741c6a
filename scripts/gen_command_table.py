"""Write nsqd/resp/commands/command_table.py from redis-server's own COMMAND INFO.

COMMAND and COMMAND INFO answer each of our commands with redis-server's entry (flags, key
positions, ACL categories, tips, key specs, subcommands): clients read them (redis-py's
cluster routing, `readonly` flags), so they are Redis's, not guessed. This asks an installed
redis-server (7.0.15, scripts/install_redis.sh) for the entry of every command of ours under
HELLO 3, keeps the RESP3 types (simple and bulk strings, arrays, sets, maps), and drops the
subcommands we do not implement. Run it when a command is added or Redis's version moves;
tests/resp/test_command_info.py compares every entry with redis-server's and says when.

    python scripts/gen_command_table.py
"""

from __future__ import annotations

import pprint
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "nsqd" / "resp" / "commands" / "command_table.py"

# A reply as a tree: int; "+text" (simple string) or "$text" (bulk); None (null); a list whose
# first item says its kind: "*" array, "~" set, "%" map (key, value, key, value...)
Node = int | str | None | list


class Reader:
    """RESP3 replies read off a socket into Nodes (what COMMAND INFO answers holds)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.taken = bytearray()  # every byte read, as sent (for byte-for-byte comparisons)

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        self.taken += line + b"\r\n"
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self.buf += self.sock.recv(65536)
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        self.taken += data + b"\r\n"
        return data

    def read(self) -> Node:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b":":
            return int(rest)
        if kind in (b"+", b"-"):
            return kind.decode() + rest.decode()
        if kind == b"$":
            return None if rest == b"-1" else "$" + self._exact(int(rest)).decode()
        if kind == b"_":
            return None
        if kind in (b"*", b"~", b"%"):
            n = int(rest)
            if n < 0:
                return None
            n *= 2 if kind == b"%" else 1
            return [kind.decode(), *(self.read() for _ in range(n))]
        raise ValueError(f"unexpected reply {line!r}")


def ask(sock: socket.socket, reader: Reader, *args: str) -> Node:
    sock.sendall(
        b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a.encode()) for a in args)
    )
    return reader.read()


def keep_ours(entry: list, ours: set[str]) -> list:
    """`entry` (COMMAND INFO's of one command) with only the subcommands we implement."""
    if len(entry) > 10 and isinstance(entry[10], list) and len(entry[10]) > 1:
        subs = [sub for sub in entry[10][1:] if sub[1][1:] in ours]
        entry = [*entry[:10], [entry[10][0], *subs]]
    return entry


def our_names() -> tuple[list[str], set[str]]:
    """Our commands, and those with their subcommands ("client|setname")."""
    sys.path.insert(0, str(REPO))
    from nsqd.resp.commands import registry  # (after the path)

    names, every = [], set()
    for cmd in registry.TABLE.values():
        names.append(cmd.name)
        every.add(cmd.name)
        every.update(sub.name for sub in (cmd.subcommands or {}).values())
    return names, every


def capture(port: int, names: list[str], every: set[str]) -> dict[str, Node]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        reader = Reader(sock)
        ask(sock, reader, "HELLO", "3")
        got = ask(sock, reader, "COMMAND", "INFO", *names)
    assert isinstance(got, list)
    return {
        name: keep_ours(entry, every) for name, entry in zip(names, got[1:], strict=True) if entry
    }


def main() -> None:
    names, every = our_names()
    server = shutil.which("redis-server")
    if server is None:
        sys.exit("redis-server is not installed (scripts/install_redis.sh)")
    version = (
        subprocess.run([server, "--version"], capture_output=True, text=True)
        .stdout.split()[2]
        .removeprefix("v=")
    )
    with tempfile.TemporaryDirectory() as tmp:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    table = capture(port, names, every)
                    break
                except ConnectionRefusedError:
                    time.sleep(0.1)
            else:
                sys.exit("redis-server did not start")
        finally:
            proc.terminate()
            proc.wait(10)
    body = pprint.pformat(table, width=99, compact=True, sort_dicts=False)
    OUT.write_text(
        f'"""redis-server {version}\'s COMMAND INFO entry of each of our commands (its'
        "\nsubcommands: ours only), written by scripts/gen_command_table.py: do not edit. Kinds as"
        ' there:\n"+text" simple, "$text" bulk, a list opened by "*" array,'
        ' "~" set or "%" map."""\n\n'
        "from __future__ import annotations\n\n"
        f"VERSION = {version!r}\n"
        f"ENTRIES: dict[str, list] = {body}\n"
    )
    subprocess.run(["ruff", "format", "--quiet", str(OUT)], check=True)  # the house's layout
    print(f"{OUT}: {len(table)} commands of redis-server {version}")


if __name__ == "__main__":
    main()
