"""Go's regexp on RE2's own engine: compile_go_regex compiles a pattern with the google-re2
binding, so matching is linear in the text as in Go (no backtracking), after refusing what Go's
parser refuses and RE2's C++ parser takes.

Go's regexp/syntax and RE2 share their syntax; where they part (measured against Go 1.26):
* `\\C` (any byte) is RE2's, an invalid escape in Go;
* a group name must be ASCII letters, digits and `_` in Go (RE2 takes any Unicode word);
* Go refuses a parse tree more than 1000 deep (syntax.maxHeight); RE2 nests without limit.
  The height here is computed as Go's parser builds its tree (captures, repeats,
  concatenations and alternations each a level, a run of literals one node); Go's
  simplifications (a one-rune class as a literal, factored alternations) are not followed,
  so a pattern right at the limit and full of them can be judged differently.
* RE2's compiled-program budget (max_mem, 8 MiB) counts UTF-8 byte instructions, Go's (128 MB)
  runes: a Unicode class repeated some hundreds of times (`\\pL{1000}`) is refused here where
  Go takes it. Kept: RE2 compiles such a program slowly (`[\\pL\\pN]{1000}` eight times over,
  with a 256 MiB budget, 5.6 s; Go 0.1 s) and a compile holds the daemon's loop, while under
  the default budget `\\pL{400}`, about the largest it takes, compiles in 0.2 s.
Both search unanchored (Go's MatchString is RE2's PartialMatch)."""

from __future__ import annotations

import re
from typing import Any, Protocol

_MAX_HEIGHT = 1000  # Go's regexp/syntax maxHeight

_GROUP_NAME = re.compile(r"\(\?P?<(?![=!])([^>]*)>")
_GO_NAME = re.compile(r"[A-Za-z0-9_]+")
_POSIX = re.compile(r"\[:\^?[a-z]*:\]")
_REPEAT = re.compile(r"[*+?]|\{\d+(,\d*)?\}")
_FLAGS = re.compile(r"\(\?[imsU-]*\)")


class RegexError(ValueError):
    """A pattern Go's regexp.Compile refuses."""


class Matcher(Protocol):
    def search(self, text: str, /) -> Any: ...


def compile_go_regex(pattern: str) -> Matcher:
    """Compile an RE2 (Go) pattern to a linear-time matcher; RegexError where Go refuses it."""
    _refuse_go_only(pattern)
    # imported here, not at the daemon's start: only an AUTH answer ever compiles a pattern
    import re2

    options = re2.Options()
    options.log_errors = False  # a refusal is AUTH failed and logged once, by the caller
    try:
        return re2.compile(pattern, options)  # type: ignore[no-any-return]
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise RegexError(str(detail)) from None


class _Frame:
    """One open group while measuring the tree: its finished branches and current items."""

    __slots__ = ("branches", "capture", "items", "literal_run")

    def __init__(self, capture: bool) -> None:
        self.capture = capture
        self.branches: list[int] = []
        self.items: list[int] = []
        self.literal_run = 0  # runes in the last item when it is a run of literals

    def add(self, height: int, literal: bool = False) -> None:
        if literal and self.literal_run:
            self.literal_run += 1  # Go concatenates adjacent literal runes into one node
            return
        self.items.append(height)
        self.literal_run = 1 if literal else 0

    def repeat(self) -> None:
        """A repetition of the last item; of a run's last rune only (`ab*` is a, b*)."""
        if self.literal_run > 1:
            self.items.append(2)
        else:
            self.items[-1] += 1
        self.literal_run = 0

    def end_branch(self) -> None:
        items = self.items
        self.branches.append(1 if not items else items[0] if len(items) == 1 else 1 + max(items))
        self.items = []
        self.literal_run = 0

    def height(self) -> int:
        self.end_branch()
        b = self.branches
        h = b[0] if len(b) == 1 else 1 + max(b)
        return h + 1 if self.capture else h


def _refuse_go_only(pattern: str) -> None:
    """Raise RegexError for what Go refuses and RE2 takes (see the module notes); syntax errors
    both refuse are left to RE2."""
    stack = [_Frame(capture=False)]
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        top = stack[-1]
        if ch == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt == "C":
                raise RegexError("invalid escape sequence: `\\C`")
            if nxt == "Q":  # literal text up to \E: nothing in it is syntax
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                top.add(1, literal=True)
                continue
            i += 2
            if nxt in ("p", "P", "x") and pattern[i : i + 1] == "{":  # \p{Greek}, \x{41}
                close = pattern.find("}", i)
                i = n if close < 0 else close + 1
            top.add(1, literal=nxt not in "dDsSwWbBAzpP")
        elif ch == "[":
            i = _skip_class(pattern, i + 1)
            top.add(1)
        elif ch == "(":
            flags = _FLAGS.match(pattern, i)
            if flags:  # (?i): no node
                i = flags.end()
                continue
            named = _GROUP_NAME.match(pattern, i)
            if named:
                if not _GO_NAME.fullmatch(named[1]):
                    raise RegexError(f"invalid named capture: `{named[0]}`")
                stack.append(_Frame(capture=True))
                i = named.end()
            elif pattern.startswith("(?", i):
                colon = pattern.find(":", i)
                stack.append(_Frame(capture=False))
                i = n if colon < 0 else colon + 1
            else:
                stack.append(_Frame(capture=True))
                i += 1
        elif ch == ")":
            i += 1
            if len(stack) > 1:
                group = stack.pop()
                if (
                    not group.capture
                    and not group.branches
                    and len(group.items) > 1
                    and not _REPEAT.match(pattern, i)
                ):
                    # Go hoists a concatenation into the one around it: no level of its own
                    stack[-1].items.extend(group.items)
                    stack[-1].literal_run = 0
                else:
                    stack[-1].add(group.height())
        elif ch == "|":
            top.end_branch()
            i += 1
        else:
            repeat = _REPEAT.match(pattern, i)
            if repeat and top.items:
                top.repeat()
                i = repeat.end()
                if pattern[i : i + 1] == "?":
                    i += 1
            else:
                top.add(1, literal=ch not in ".^$")
                i += 1
        if top.items and top.items[-1] > _MAX_HEIGHT:
            raise RegexError("expression nests too deeply")
    while len(stack) > 1:  # unclosed: RE2 refuses it (missing closing paren)
        h = stack.pop().height()
        stack[-1].add(h)
    if stack[0].height() > _MAX_HEIGHT:
        raise RegexError("expression nests too deeply")


def _skip_class(pattern: str, i: int) -> int:
    """The index after a character class whose `[` ends at i (a leading `]` is a literal)."""
    n = len(pattern)
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if pattern[i + 1 : i + 2] == "C":
                raise RegexError("invalid escape sequence: `\\C`")
            i += 2
        elif ch == "]":
            return i + 1
        else:
            posix = _POSIX.match(pattern, i)
            i = posix.end() if posix else i + 1
    return n
