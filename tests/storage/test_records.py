"""The record log (nsqd/storage/records.py) on real files, no daemon: every byte of a file
flipped in turn loses only the record that holds it, a torn tail is cut where the last intact
record ends, garbage between records is stepped over, an empty or half-headed file holds
nothing, and the framing before records.py still reads."""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path

import pytest

from nsqd.storage import records
from nsqd.storage.records import FILE_MAGIC, HEAD_SIZE, RecordLog, frame, legacy_framing, read

# sizes that put a MARK-like pair, zero lengths and bodies of all sizes in play
PAYLOADS = [b"H" + bytes(range(40)), b"", b"R\x00\x00\x00\x01" + b"\xe7\x5a" * 8, b"x" * 300, b"D"]


def _file(payloads: list[bytes]) -> tuple[bytes, list[tuple[int, int]]]:
    """A file's bytes and where each record lies in it."""
    data, spans = bytearray(FILE_MAGIC), []
    for p in payloads:
        spans.append((len(data), len(data) + HEAD_SIZE + len(p)))
        data += frame(p)
    return bytes(data), spans


def test_every_byte_flipped_loses_only_its_record(caplog: pytest.LogCaptureFixture) -> None:
    data, spans = _file(PAYLOADS)
    for k, (start, stop) in enumerate(spans):
        for pos in range(start, stop):
            for bit in (0x01, 0x80):
                damaged = bytearray(data)
                damaged[pos] ^= bit
                with caplog.at_level(logging.ERROR, logger="nsqd"):
                    scan = read(bytes(damaged), "test")
                expected = PAYLOADS[:k] + PAYLOADS[k + 1 :]
                assert scan.payloads == expected, (k, pos - start, bit)
                assert scan.damaged == 1
    assert "bytes skipped" in caplog.text


def test_a_damaged_length_no_longer_swallows_what_follows() -> None:
    """The issue's case: a length made larger than the file used to read as a torn tail."""
    data, spans = _file([b"D" + bytes(30)] * 30)
    damaged = bytearray(data)
    damaged[spans[15][0] + 2] ^= 0x40  # the top byte of record 15's length
    scan = read(bytes(damaged), "test")
    assert len(scan.payloads) == 29 and scan.end == len(data)


def test_torn_tail_is_cut_where_the_last_intact_record_ends() -> None:
    data, spans = _file(PAYLOADS)
    last_start = spans[-1][0]
    for cut in range(last_start + 1, len(data)):
        scan = read(data[:cut], "test")
        assert scan.payloads == PAYLOADS[:-1], cut
        assert scan.end == last_start and scan.damaged == 1


def test_garbage_between_records_is_stepped_over() -> None:
    garbage = [b"\x00" * 7, b"\xe7\x5a\xff\xff\xff\xff", b"\xe7", os.urandom(64), b"\xe7\x5a"]
    data = bytearray(FILE_MAGIC)
    for p, junk in zip(PAYLOADS, garbage, strict=True):
        data += junk + frame(p)
    scan = read(bytes(data), "test")
    assert scan.payloads == PAYLOADS and scan.damaged == len(garbage)


def test_empty_and_half_written_files_hold_nothing() -> None:
    assert read(b"", "test") == records.Scan()
    for cut in range(1, len(FILE_MAGIC)):  # a crash while the header was being written
        scan = read(FILE_MAGIC[:cut], "test")
        assert scan.payloads == [] and scan.end == 0 and not scan.legacy
    assert read(FILE_MAGIC, "test").payloads == []


def test_a_half_written_header_is_cut_and_the_file_starts_anew(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(FILE_MAGIC[:5])
    log = log_at(path)
    assert log.load().payloads == []
    log.write(b"first")
    log.close()
    assert path.read_bytes() == FILE_MAGIC + frame(b"first")


def test_a_damaged_header_still_finds_the_records() -> None:
    data, _ = _file(PAYLOADS)
    damaged = b"X" + data[1:]
    old = legacy_framing(struct.Struct(">II"))
    for legacy in (None, old):
        scan = read(damaged, "test", legacy)
        assert scan.payloads == PAYLOADS and scan.legacy  # the owner rewrites it


@pytest.mark.parametrize("order", [">II", "<II"])
def test_the_framing_before_records_still_reads(order: str) -> None:
    head = struct.Struct(order)
    payloads = [p for p in PAYLOADS if p]  # the old framing had no empty records
    blobs = [head.pack(len(p), zlib.crc32(p)) + p for p in payloads]
    bad = bytearray(blobs[1])
    bad[-1] ^= 0xFF
    data = b"".join([blobs[0], bytes(bad), *blobs[2:]])
    scan = read(data + blobs[0][:5], "test", legacy_framing(head))
    assert scan.legacy and scan.payloads == [payloads[0], *payloads[2:]]
    assert scan.end == len(data)


def log_at(path: Path, sync_every: int = 1) -> RecordLog:
    return RecordLog(str(path), "test", sync_every, 2.0)


def test_appends_are_gathered_until_flushed(tmp_path: Path) -> None:
    path = tmp_path / "log"
    log = log_at(path)
    log.append(b"one")
    log.append(b"two")
    assert not path.exists()  # nothing written before the flush
    log.flush()
    log.write(b"three")
    assert read(path.read_bytes(), "test").payloads == [b"one", b"two", b"three"]
    log.close()


def test_take_back_returns_only_what_is_not_written(tmp_path: Path) -> None:
    """resp.log's seal asks for a command's records; a flush in the command (DEBUG LOADAOF in
    an EXEC) wrote the first ones already: only the rest come back, the written stay."""
    path = tmp_path / "log"
    log = log_at(path)
    log.append(b"before")
    log.append(b"one")
    log.flush()
    log.append(b"two")
    log.append(b"three")
    assert log.take_back(4) == [b"two", b"three"]
    assert log.take_back(1) == []
    log.append(b"four")
    log.append(b"five")
    assert log.take_back(1) == [b"five"]
    log.flush()
    assert read(path.read_bytes(), "test").payloads == [b"before", b"one", b"four"]
    log.close()


def test_load_cuts_a_damaged_tail_and_appends_after_the_last_record(tmp_path: Path) -> None:
    path = tmp_path / "log"
    data, spans = _file(PAYLOADS)
    path.write_bytes(data[: spans[-1][0] + 3])
    log = log_at(path)
    assert log.load().payloads == PAYLOADS[:-1]
    assert path.stat().st_size == spans[-1][0]
    log.write(b"after")
    log.close()
    assert read(path.read_bytes(), "test").payloads == [*PAYLOADS[:-1], b"after"]


def test_replace_holds_just_the_new_records(tmp_path: Path) -> None:
    path = tmp_path / "log"
    log = log_at(path)
    for p in PAYLOADS:
        log.write(p)
    log.append(b"gathered, then covered by the rewrite")
    size = log.replace(iter([b"a", b"b"]))
    log.write(b"c")
    log.close()
    assert size == len(FILE_MAGIC) + 2 * (HEAD_SIZE + 1)
    assert read(path.read_bytes(), "test").payloads == [b"a", b"b", b"c"]
    assert sorted(os.listdir(tmp_path)) == ["log"]  # no temporary file left


def test_sync_policy_counts_writes(tmp_path: Path) -> None:
    due: list[int] = []
    log = RecordLog(str(tmp_path / "log"), "test", 3, 3600.0, sync_due=lambda: due.append(1))
    for i in range(2):
        log.write(b"%d" % i)
    assert not log.needs_sync() and not due
    log.append(b"a")
    log.append(b"b")
    log.flush()  # one write for both: the third write
    assert log.needs_sync() and due == [1]
    log.sync()
    assert not log.needs_sync()
    log.remove()
    assert not (tmp_path / "log").exists()
