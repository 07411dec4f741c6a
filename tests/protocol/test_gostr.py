"""go_quote against Go's strconv.Quote (what nsqd's %q puts in SUB/PUB/DPUB/MPUB errors)."""

from __future__ import annotations

import pytest
from goquote_cases import GO_QUOTE_CASES
from v2wire import MAGIC

from protocol.v2 import NSQError, V2Connection, is_valid_name
from protocol.v2.gostr import go_quote

IDS = [repr(raw) for raw, _ in GO_QUOTE_CASES]


@pytest.mark.parametrize(("raw", "quoted"), GO_QUOTE_CASES, ids=IDS)
def test_go_quote(raw: bytes, quoted: str) -> None:
    assert go_quote(raw) == quoted


# Invalid names that fit in one parameter (no space, no newline).
PARAMS = [
    (raw, quoted)
    for raw, quoted in GO_QUOTE_CASES
    if b" " not in raw and b"\n" not in raw and not is_valid_name(raw)
]


@pytest.mark.parametrize(("raw", "quoted"), PARAMS, ids=[repr(raw) for raw, _ in PARAMS])
def test_quoted_in_error_frames(raw: bytes, quoted: str) -> None:
    conn = V2Connection()
    conn.receive_data(MAGIC + b"SUB t " + raw + b" x\n")
    with pytest.raises(NSQError) as info:
        conn.next_command()
    assert bytes(info.value) == f"E_BAD_CHANNEL SUB channel name {quoted} is not valid".encode()


@pytest.mark.parametrize("code", range(128))
def test_every_ascii_byte(code: int) -> None:
    # Go: printable ASCII as is (escaping " and \), the named escapes, \xNN for the rest.
    named = {
        7: "\\a",
        8: "\\b",
        12: "\\f",
        10: "\\n",
        13: "\\r",
        9: "\\t",
        11: "\\v",
        34: '\\"',
        92: "\\\\",
    }
    if code in named:
        inner = named[code]
    elif 32 <= code < 127:
        inner = chr(code)
    else:
        inner = f"\\x{code:02x}"
    assert go_quote(bytes([code])) == f'"{inner}"'


@pytest.mark.parametrize("code", range(128, 256))
def test_every_lone_high_byte_is_hex_escaped(code: int) -> None:
    assert go_quote(bytes([code])) == f'"\\x{code:02x}"'
