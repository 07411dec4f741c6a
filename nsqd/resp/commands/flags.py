"""Which of our commands Redis 7.0.15 flags `write` or `noscript` (its COMMAND INFO, as
command_table.py holds it; a test holds the list to redis-server's): while resp.log cannot be
written the writes are refused with -MISCONF, as Redis refuses them after a failed AOF write
(processCommand: `is_write_command`, and PING); a script may not call the `noscript` ones."""

from __future__ import annotations

from .command_table import ENTRIES


def _writes() -> frozenset[str]:
    """The names (`container|sub` for a subcommand) whose entry carries Redis's `write` flag."""
    # an entry: "*", name, arity, flags, first, last, step, ACL, tips, key specs, subcommands
    return frozenset(
        each[1][1:]
        for entry in ENTRIES.values()
        for each in (entry, *(entry[10][1:] if len(entry) > 10 else ()))
        if "+write" in each[3]
    )


def _noscript() -> frozenset[bytes]:
    """The names whose entry (or one of whose subcommands': every subcommand of CLIENT, CONFIG,
    FUNCTION and SCRIPT is) carries Redis's `noscript` flag: what a script may not call."""
    return frozenset(
        entry[1][1:].encode()
        for entry in ENTRIES.values()
        if any(
            "+noscript" in each[3] for each in (entry, *(entry[10][1:] if len(entry) > 10 else ()))
        )
    )


WRITE = _writes()
# a script cannot open a transaction, subscribe, block, run a script or change the connection
# (SCRIPT FLUSH inside a script would drop the Lua state it runs in)
NOT_IN_SCRIPTS = _noscript()
# refused as well while Redis cannot write its AOF (processCommand's `pingCommand` case)
DISK_BOUND = WRITE | {"ping"}
# commands that run others: a change they made is a write's (EXEC's queue, a script's calls)
RUNS_OTHERS = frozenset({"exec", "eval", "evalsha"})
# writes whose reply hands over what they removed (a popped element, the value they deleted
# or replaced): in the pass whose log write fails they keep that reply, as Redis answers
# them, where the pass's other writes get -MISCONF. Refused, the element is gone from memory
# and, once the kept record is written, from the log: lost to every client. Answered, it
# reaches its client; were the kept record never written (kill -9, or a stop with the disk
# still full), it comes back after the restart: delivered twice at worst, never lost. Run by
# EXEC or a script, one that removed something keeps the EXEC's or script's reply the same
# way (registry.run_inside); SET ... GET is GETSET's case (strings.set_).
HANDS_OVER = frozenset({
    "blmove", "blmpop", "blpop", "brpop", "brpoplpush", "bzmpop", "bzpopmax", "bzpopmin",
    "getdel", "getset", "lmove", "lmpop", "lpop", "rpop", "rpoplpush", "spop", "zmpop",
    "zpopmax", "zpopmin",
})  # fmt: skip
