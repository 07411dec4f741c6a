"""Go's regexp (RE2) on Python's re: compile_go_regex refuses what RE2 refuses and translates
what RE2 spells differently.

Both are unanchored (re.search). The constructs RE2 refuses and `re` accepts (lookaround,
backreferences, atomic groups, possessive quantifiers, `\\Z`, repeats over 1000) are refused, and
RE2's own spellings (`\\z`, `(?<name>..)`, `[[:alpha:]]`, a `{` that starts no repeat) are
translated; RE2-only syntax `re` lacks (`\\pL`, `\\Q..\\E`, `(?U)`, `[[:^alpha:]]`, flags in
mid-pattern) is refused here where Go would take it, and so is nesting past what re's
recursive parser takes (some 450 groups; RE2 takes 1000)."""

from __future__ import annotations

import re

_RE2_REFUSES = re.compile(
    r"""\(\?(?:[=!]|<[=!]|P=|>|\(|\#)  # lookaround, named backref, atomic, conditional, comment
      | \(\?[imsU-]*[aLux]             # flags RE2 lacks
      | [*+?}][+]                     # possessive quantifier (RE2: invalid nested repetition)
    """,
    re.VERBOSE,
)


_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}


_POSIX = re.compile(r"\[:(\^?)([a-z]+):\]")


_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")


_RE2_MAX_REPEAT = 1000


def compile_go_regex(pattern: str) -> re.Pattern[str]:
    """Compile an RE2 pattern with `re`: refuse what RE2 refuses, translate what RE2 spells
    differently (`\\z`, `(?<name>`, `[[:alpha:]]`, a `{` that does not start a repeat is a
    literal); see the module notes for what is left."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n:
                raise re.error("trailing backslash at end of expression")
            nxt = pattern[i + 1]
            if not in_class and nxt == "z":
                out.append(r"\Z")
            elif nxt == "Z" or (nxt.isdigit() and nxt != "0"):
                raise re.error(f"invalid escape sequence: \\{nxt}")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            posix = _POSIX.match(pattern, i)
            if posix:
                if posix[1] or posix[2] not in _POSIX_CLASSES:
                    raise re.error(f"unsupported character class {posix[0]}")
                out.append(_POSIX_CLASSES[posix[2]])
                i = posix.end()
                continue
            if ch == "]":
                in_class = False
            elif ch in "[&~|":
                ch = "\\" + ch  # literal in RE2; re would warn about set operations
        elif ch == "[":
            in_class = True
            out.append(ch)
            i += 1
            # a ']' (after an optional '^') right at the start is a literal
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        elif ch == "{":
            repeat = _REPEAT.match(pattern, i)
            if repeat is None:
                ch = "\\{"  # RE2: not a repeat, a literal brace
            elif max(int(repeat[1]), int(repeat[3] or 0)) > _RE2_MAX_REPEAT:
                raise re.error(f"invalid repeat count {repeat[0]}")
        elif _NAMED_GROUP.match(pattern, i):
            out.append("(?P<")
            i += 3
            continue
        elif _RE2_REFUSES.match(pattern, i):
            raise re.error(f"RE2 does not support {pattern[i : i + 4]!r}")
        out.append(ch)
        i += 1
    try:
        return re.compile("".join(out))
    except RecursionError:
        # re's parser recurses per group and gives out (~450 deep) before RE2's limit of
        # 1000; either way a refusal, like Go's, not an exception out of AUTH
        raise re.error("expression nests too deeply") from None
