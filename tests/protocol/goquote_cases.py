"""Go's strconv.Quote of raw bytes (nsqd's %q in its error texts): each case as the Go toolchain
prints it (test_gostr.py runs our port; test_against_nsqd.py checks them against Go)."""

from __future__ import annotations

# (raw bytes, strconv.Quote(string(raw)))
GO_QUOTE_CASES: list[tuple[bytes, str]] = [
    (b"", '""'),
    (b"abc", '"abc"'),
    (b"with space ~!", '"with space ~!"'),
    (b'a"b', '"a\\"b"'),
    (b"a\\b", '"a\\\\b"'),
    (b"'", '"\'"'),
    (b"\x00", '"\\x00"'),
    (b"\x07\x08\x0c\n\r\t\x0b", '"\\a\\b\\f\\n\\r\\t\\v"'),
    (b"\x01\x1b\x1f", '"\\x01\\x1b\\x1f"'),
    (b"\x7f", '"\\x7f"'),
    ("é日本".encode(), '"é日本"'),
    ("😀".encode(), '"😀"'),
    ("\ufffd".encode(), '"\ufffd"'),  # a real U+FFFD is printable
    ("\u00a0".encode(), '"\\u00a0"'),  # no-break space
    ("\u0085".encode(), '"\\u0085"'),  # C1 control
    ("\u200b".encode(), '"\\u200b"'),  # zero width space (format)
    ("\u2028".encode(), '"\\u2028"'),  # line separator
    ("\u3000".encode(), '"\\u3000"'),  # ideographic space
    ("\ufeff".encode(), '"\\ufeff"'),
    ("\ue000".encode(), '"\\ue000"'),  # private use
    ("\u0378".encode(), '"\\u0378"'),  # unassigned
    ("\U000e0001".encode(), '"\\U000e0001"'),
    ("\U0010ffff".encode(), '"\\U0010ffff"'),
    # SHAKING FACE (Unicode 15.0): Go since 1.21 prints it; Python 3.11's own tables (Unicode
    # 14) would escape it, 3.13's (15.1) would print U+1FAE9 too, which Go escapes.
    ("\U0001fae8".encode(), '"\U0001fae8"'),
    ("\U0001fae9".encode(), '"\\U0001fae9"'),
    ("\u0cf3\U0001f6dc\U00031350".encode(), '"\u0cf3\U0001f6dc\U00031350"'),
    (b"\xff", '"\\xff"'),
    (b"a\xc3", '"a\\xc3"'),  # truncated sequence
    (b"\xc3(", '"\\xc3("'),
    (b"\xe2\x82", '"\\xe2\\x82"'),
    (b"\xed\xa0\x80", '"\\xed\\xa0\\x80"'),  # an encoded surrogate
    (b"\xc0\x80", '"\\xc0\\x80"'),  # overlong
    (b"\xf4\x90\x80\x80", '"\\xf4\\x90\\x80\\x80"'),  # above U+10FFFF
    (b"\xe6\x97\xa5\xff\n", '"日\\xff\\n"'),
    (b'\x80"\\', '"\\x80\\"\\\\"'),
]
