"""Topic and channel names (spec 2.5): ^[.a-zA-Z0-9_-]+(#ephemeral)?$, 1..64 bytes including
the #ephemeral suffix."""

from __future__ import annotations

import pytest

from protocol.v2 import is_ephemeral, is_valid_name

VALID = [
    b"a",
    b"test",
    b"test-with_period.",
    b"...",
    b"-_-",
    b"0123456789",
    b"ABCxyz",
    b"test#ephemeral",
    b"a" * 64,
    b"a" * 54 + b"#ephemeral",  # 64 with the suffix
]

INVALID = [
    b"",
    b"a" * 65,
    b"a" * 55 + b"#ephemeral",  # 65 with the suffix
    b"test:ephemeral",
    b"#ephemeral",
    b"test#ephemeral#ephemeral",
    b"test#Ephemeral",
    b"test#",
    b"test#eph",
    b"te#st",
    b"with space",
    b"tab\t",
    b"trailing\n",
    b"trailing\r",
    b"a/b",
    b"a*",
    b"bad!",
    b"caf\xc3\xa9",
    b"\xff",
    b"a\x00",
]


@pytest.mark.parametrize("name", VALID, ids=repr)
def test_valid(name: bytes) -> None:
    assert is_valid_name(name)


@pytest.mark.parametrize("name", INVALID, ids=repr)
def test_invalid(name: bytes) -> None:
    assert not is_valid_name(name)


@pytest.mark.parametrize(
    ("name", "ephemeral"),
    [("t#ephemeral", True), ("t", False), ("t#ephemera", False), ("ephemeral", False)],
)
def test_is_ephemeral(name: str, ephemeral: bool) -> None:
    assert is_ephemeral(name) is ephemeral
