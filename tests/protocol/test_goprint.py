"""goprint.is_print against the Go toolchain's strconv.IsPrint, for every rune.

The Go that builds the reference nsqd (scripts/install_reference.sh) is the one asked, so a
failure here means our error texts would quote some character differently from that nsqd:
run scripts/gen_goprint.py with it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from protocol.v2.goprint import UNICODE_VERSION
from protocol.v2.gostr import is_print

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import gobuild

SOURCE = Path(__file__).resolve().parent / "goprint"
BINARY = SOURCE / "bin" / "goprint"


@pytest.fixture(scope="module")
def go_ranges() -> tuple[str, list[tuple[int, int]]]:
    binary = gobuild.build(SOURCE, BINARY)  # GoBuildError (a failure) without Go
    lines = subprocess.run(
        [str(binary)], capture_output=True, text=True, check=True, timeout=120
    ).stdout.splitlines()
    pairs = [line.split() for line in lines[1:]]
    return lines[0], [(int(first, 16), int(last, 16)) for first, last in pairs]


def ours() -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    start = -1
    for code in range(0x110001):
        printable = code <= 0x10FFFF and is_print(code)
        if printable and start < 0:
            start = code
        elif not printable and start >= 0:
            ranges.append((start, code - 1))
            start = -1
    return ranges


def test_same_unicode_version(go_ranges: tuple[str, list[tuple[int, int]]]) -> None:
    version, _ = go_ranges
    assert version == UNICODE_VERSION, "run scripts/gen_goprint.py with this Go"


def test_every_rune(go_ranges: tuple[str, list[tuple[int, int]]]) -> None:
    _, expected = go_ranges
    assert len(expected) > 500  # Go's tables, not an empty answer
    assert ours() == expected
