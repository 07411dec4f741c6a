"""nsqd's flags as an argparse parser: --help's text, and every command line the plain
reader (argv.py) leaves to it, with argparse's errors as OptionError. Imported only then:
building it for ~70 flags costs several ms of a start."""

from __future__ import annotations

import argparse
import socket
from typing import NoReturn

from ..gocompat.strconv import OptionError, format_duration
from .flags import FLAGS, Flag
from .options import default_node_id


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is an OptionError (main prints it and exits 1, not 2)."""

    def error(self, message: str) -> NoReturn:
        raise OptionError(f"{message} (see nsqd --help)")


def _default_text(flag: Flag) -> str:
    # the defaults nsqd's help shows for options whose default is computed or not a plain string
    if flag.name == "node-id":
        return f" (default {default_node_id()})"
    if flag.name == "broadcast-address":
        return f' (default "{socket.gethostname()}")'
    if flag.kind == "log_level":
        return f" (default {str(flag.default).upper()})"
    if flag.kind == "tls_version":
        return f" (default {flag.default})"
    if flag.kind == "tls_required":
        return ""  # nsqd's help shows it as a false bool
    if flag.default in (None, "", [], False) or flag.kind == "list":
        return ""
    if flag.kind == "duration":
        return f" (default {format_duration(flag.default)})"
    if flag.kind == "str":
        return f' (default "{flag.default}")'
    return f" (default {str(flag.default).lower() if flag.kind == 'bool' else flag.default})"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="nsqd",
        usage="nsqd [flags]",
        allow_abbrev=False,
        add_help=False,
        description="nsqd: a realtime distributed message queue daemon (NSQ v1.3 compatible)",
    )
    parser.add_argument("-h", "-help", "--help", action="help", help="show this help")
    groups: dict[str, argparse._ArgumentGroup] = {}
    for flag in FLAGS:
        group = groups.get(flag.group) or parser.add_argument_group(flag.group)
        groups[flag.group] = group
        names = [f"-{flag.name}", f"--{flag.name}"]
        text = (flag.help + _default_text(flag)).replace("%", "%%")  # argparse formats help
        if flag.kind in ("bool", "tls_required"):  # a bare --tls-required means true too
            group.add_argument(
                *names,
                dest=flag.attr,
                nargs="?",
                const="true",
                default=None,
                metavar="true|false",
                help=text,
            )
        elif flag.kind in ("list", "floats"):
            group.add_argument(
                *names, dest=flag.attr, action="append", default=None, metavar="value", help=text
            )
        else:
            group.add_argument(*names, dest=flag.attr, default=None, metavar="value", help=text)
    return parser
