"""The executor's decoders of nsqd's receive answer (pyspark_nsq/frames.py), without Spark:
the column-wise one gives the same columns as the per-message one, for frames of one size and
of many (odd sizes, empty bodies, 1 MB bodies), and leaves to it what it does not take."""

from __future__ import annotations

import random
import struct
from typing import Any

import pyarrow as pa
import pytest

from protocol.v2.message import encode_message_frame
from pyspark_nsq import frames
from pyspark_nsq.planning import NsqPartition, record_batch
from pyspark_nsq.schema import SOURCE_SCHEMA

TS = 1_764_000_000_123_456_789  # ns


def frame(i: int, body: bytes, attempts: int = 1, msg_id: bytes | None = None) -> bytes:
    return encode_message_frame(TS + i * 1_001, attempts, msg_id or b"%016x" % i, body)


def as_lists(rows: frames.Rows) -> list[list[Any]]:
    return [
        c.to_pylist() if isinstance(c, pa.Array) else list(c)
        for c in (rows.ids, rows.bodies, rows.timestamps_us, rows.attempts)
    ]


def both(raw: bytes) -> tuple[list[list[Any]], list[list[Any]]]:
    """The columns of both decoders (the columnar one must take `raw`)."""
    columns = frames.decode_columns(raw)
    assert columns is not None
    assert columns.ids.type == pa.string() and columns.bodies.type == pa.binary()
    assert (columns.timestamps_us.type, columns.attempts.type) == (pa.int64(), pa.int32())
    return as_lists(columns), as_lists(frames.decode_rows(raw))


ANSWERS = {
    "empty answer": b"",
    "one empty body": frame(0, b""),
    "one size (uniform fast path)": b"".join(frame(i, b"x" * 200) for i in range(1000)),
    "empty bodies": b"".join(frame(i, b"", attempts=i % 70_000) for i in range(300)),
    "odd sizes": b"".join(frame(i, bytes([i % 256]) * (i * 11 % 301)) for i in range(500)),
    "1 MB bodies": b"".join(frame(i, bytes([65 + i]) * (1 << 20)) for i in range(3)),
    "1 MB among small": b"".join(frame(i, b"y" * (17 if i % 3 else 1 << 20)) for i in range(7)),
    "attempts 65535, any bytes": b"".join(
        frame(i, random.Random(i).randbytes(33), attempts=65_535) for i in range(64)
    ),
    # the same size for the first frames, then another: the strided check must say no
    "one size then another": b"".join(frame(i, b"z" * (5 if i < 9 else 6)) for i in range(10)),
}


@pytest.mark.parametrize("name", list(ANSWERS))
def test_columnar_and_per_message_decoders_agree(name: str) -> None:
    columnar, per_message = both(ANSWERS[name])
    assert columnar == per_message
    if name == "odd sizes":
        assert len(set(map(len, per_message[1]))) > 250 and b"" in per_message[1]


def test_what_the_columnar_decoder_leaves_to_the_per_message_one() -> None:
    good = b"".join(frame(i, b"ok") for i in range(5))
    error_frame = struct.pack(">ii", 16, 1) + b"E_BAD_THINGS"  # type 1: an error
    truncated = good[:-1]
    non_ascii_id = frame(0, b"b", msg_id=b"\xc3\xa9" + b"0" * 14)
    before_1970 = encode_message_frame(-5_500, 1, b"0" * 16, b"old")
    response_frame = b"\x00\x00\x00\x1e\x00\x00\x00\x00" + b"_" * 26  # type 0, message-sized
    for raw in (good + error_frame, truncated, non_ascii_id, before_1970, response_frame + good):
        assert frames.decode_columns(raw) is None
    # decode() still reads them, message by message
    assert frames.decode(good + error_frame).ids == [f"{i:016x}" for i in range(5)]
    assert frames.decode(before_1970).timestamps_us == [-6]  # floored, as Python does
    assert frames.decode(non_ascii_id).ids == ["\ufffd\ufffd" + "0" * 14]


def test_record_batches_from_both_are_equal() -> None:
    """The batch the executor yields is the same whichever decoder made its columns."""
    raw = ANSWERS["odd sizes"]
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("body", pa.binary()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("attempts", pa.int32()),
            ("topic", pa.string()),
            ("channel", pa.string()),
            ("nsqd", pa.string()),
        ]
    )
    assert schema.names == SOURCE_SCHEMA.fieldNames()
    batches = []
    for rows in (frames.decode_columns(raw), frames.decode_rows(raw)):
        assert rows is not None
        part = NsqPartition(
            rows.ids, rows.bodies, rows.timestamps_us, rows.attempts, "t", "c", ["n:4150"]
        )
        batches.append(record_batch(part, schema))
    assert batches[0].equals(batches[1]) and batches[0].num_rows == 500
    assert batches[0].column("nsqd").to_pylist() == ["n:4150"] * 500
