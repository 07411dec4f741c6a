"""A plain nsqd command line read without argparse: `--flag=value`, `-flag=value`,
`--flag value` and `-flag value` of known flags, a bare bool flag, list flags given many times.

Building argparse's parser for nsqd's ~70 flags and running it costs several ms of every
start. A daemon's command line is nearly always this plain form, so `read_plain` reads it
directly and gives exactly the dict `vars(parser.parse_args(argv))` would; anything else
(--help, unknown or abbreviated flags, a value that starts with "-", "--", stray words,
a missing value) returns None and the caller asks argparse, which words the errors.
tests/ops/test_argv.py checks the two agree over many command lines."""

from __future__ import annotations

from typing import Any

from .flags import FLAGS, FLAGS_BY_NAME

# how argparse reads a flag's value: one string, appended to a list, or optional (bools)
_STORE, _APPEND, _OPTIONAL = "store", "append", "optional"


def _reading(kind: str) -> str:
    if kind in ("bool", "tls_required"):
        return _OPTIONAL  # argparse nargs="?", const="true": a bare flag means true
    if kind in ("list", "floats"):
        return _APPEND
    return _STORE


# every spelling argparse knows for a flag (-name and --name) -> (dest, reading)
_SPELLINGS: dict[str, tuple[str, str]] = {}
for _flag in FLAGS:
    for _dashes in ("-", "--"):
        _SPELLINGS[_dashes + _flag.name] = (_flag.attr, _reading(_flag.kind))
_DESTS = tuple(flag.attr for flag in FLAGS)


def _is_value(token: str) -> bool:
    """argparse takes a token as an option's value when it does not start with "-" (or is
    empty). Tokens that do start with "-" (negative numbers, "-", "--", words with spaces)
    have rules of their own: the caller leaves those command lines to argparse."""
    return not token or token[0] != "-"


def _is_flag(token: str) -> bool:
    """A token argparse reads as one of nsqd's flags (`-name`, `--name`, `--name=value`)."""
    return token in _SPELLINGS or token.partition("=")[0] in _SPELLINGS


def read_plain(argv: list[str]) -> dict[str, Any] | None:
    """argparse's namespace for a plain command line as a dict (None for every flag not
    given, a list of strings for list flags), or None when argparse must read it."""
    args: dict[str, Any] = dict.fromkeys(_DESTS)
    i, n = 0, len(argv)
    while i < n:
        token = argv[i]
        i += 1
        known = _SPELLINGS.get(token)
        if known is not None:
            dest, reading = known
            if i < n and _is_value(argv[i]):
                value = argv[i]
                i += 1
            elif reading == _OPTIONAL and (i == n or _is_flag(argv[i])):
                value = "true"
            else:
                return None  # a missing value, or a next token argparse may read otherwise
        else:
            name, eq, value = token.partition("=")
            known = _SPELLINGS.get(name) if eq else None
            if known is None or value == "--":
                # --help, unknown, abbreviated, a stray word, "--"; and argparse drops a
                # value "--" (--flag=-- reads as an empty list)
                return None
            dest, reading = known
        if reading == _APPEND:
            args[dest] = [*(args[dest] or ()), value]
        else:
            args[dest] = value
    return args


def go_command_line(argv: list[str]) -> list[str] | None:
    """The flags Go's flag package reads from argv, each as `--name=value`; None where it
    refuses the command line or where it is --help (argparse then words that).

    Go stops at the first word that is not a flag ("stray", "-", "") or after "--", and
    nsqd ignores the rest; a flag that takes a value takes the next word whatever it is
    (`-mem-queue-size -5`); a bool flag (and --tls-required, an IsBoolFlag) takes a value
    only after "=", so `--deflate false` is deflate=true and then a stray word."""
    out: list[str] = []
    i, n = 0, len(argv)
    while i < n:
        token = argv[i]
        i += 1
        if len(token) < 2 or token[0] != "-":
            break
        if token == "--":
            break
        body = token[2:] if token[1] == "-" else token[1:]
        if not body or body[0] in "-=":
            return None  # Go's "bad flag syntax"
        name, eq, value = body.partition("=")
        flag = FLAGS_BY_NAME.get(name)
        if flag is None:
            return None  # unknown, or -h/--help
        if flag.kind in ("bool", "tls_required"):
            value = value if eq else "true"
        elif not eq:
            if i == n:
                return None  # "flag needs an argument"
            value = argv[i]
            i += 1
        out.append(f"--{name}={value}")
    return out
