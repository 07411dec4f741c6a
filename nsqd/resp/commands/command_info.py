"""COMMAND and COMMAND INFO's entries: redis-server's own, for each command of ours
(command_table.py, captured by scripts/gen_command_table.py), rendered for the connection's
protocol. Clients read them (flags such as `write` and `readonly`, key positions and key specs
for cluster routing, ACL categories): an empty entry misleads them."""

from __future__ import annotations

from collections.abc import Callable

from protocol.resp.codec import integer

from .command_table import ENTRIES

# RESP2 has no sets nor maps: they go out as arrays, a map's keys and values in turn
_OPENERS = {2: {"*": b"*", "~": b"*", "%": b"*"}, 3: {"*": b"*", "~": b"~", "%": b"%"}}


def _render(node: object, openers: dict[str, bytes]) -> bytes:
    return _KINDS[type(node)](node, openers)


def _text(node: str, openers: dict[str, bytes]) -> bytes:
    body = node[1:].encode()
    if node[0] == "+":
        return b"+%b\r\n" % body
    return b"$%d\r\n%b\r\n" % (len(body), body)


def _aggregate(node: list, openers: dict[str, bytes]) -> bytes:
    kind, items = node[0], node[1:]
    count = len(items) // 2 if openers[kind] == b"%" else len(items)
    return openers[kind] + b"%d\r\n" % count + b"".join(_render(i, openers) for i in items)


_KINDS: dict[type, Callable[[object, dict[str, bytes]], bytes]] = {
    int: lambda node, _: integer(node),  # type: ignore[arg-type]
    str: _text,  # type: ignore[dict-item]
    list: _aggregate,  # type: ignore[dict-item]
}

# name -> its entry, per protocol version (rendered once, at import: ~150 small entries)
RENDERED = {
    version: {name.encode(): _render(entry, openers) for name, entry in ENTRIES.items()}
    for version, openers in _OPENERS.items()
}
