"""DiskQueue against real files: go-diskqueue v1.1.0 layout, recovery, corruption (the Go
nsqd on the same files: test_diskqueue_gonsqd.py)."""

from __future__ import annotations

import logging
import struct
import threading
import time
from pathlib import Path

import pytest
from diskqueue_helpers import (
    MAX_SIZE,
    MIN_SIZE,
    data_files,
    drain,
    make_queue,
    meta_text,
    payload,
    record,
)

from nsqd.storage.diskqueue import DiskQueue, MessageSizeError, QueueClosedError


def test_round_trip_across_file_rolls(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    sent = [payload(i) for i in range(100)]
    for data in sent:
        dq.put(data)
    assert dq.depth() == 100
    # 7 records of 14 bytes fit in 100 bytes: the 8th would pass the limit, so it rolls first.
    files = data_files(tmp_path)
    assert files[0] == "q.diskqueue.000000.dat"
    assert len(files) == 15
    assert (tmp_path / files[0]).read_bytes() == b"".join(record(d) for d in sent[:7])
    got = []
    for i in range(100):
        got.append(dq.read())
        assert dq.depth() == 99 - i
    assert got == sent
    assert dq.read() is None
    # every finished file was deleted as its last record was read; only the write file is left
    assert data_files(tmp_path) == ["q.diskqueue.000014.dat"]
    dq.close()


def test_interleaved_put_and_read(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    got = []
    for i in range(60):
        dq.put(payload(i))
        if i % 3 == 2:
            got.append(dq.read())
    got += drain(dq)
    assert got == [payload(i) for i in range(60)]
    assert dq.depth() == 0
    assert list(tmp_path.glob("*.bad")) == []
    dq.close()


def test_reader_at_end_of_file_when_writer_rolls(tmp_path: Path) -> None:
    """Reader caught up at the exact end of a file that then becomes finished: no .bad file."""
    dq = make_queue(tmp_path)
    for i in range(7):
        dq.put(payload(i))
    assert drain(dq) == [payload(i) for i in range(7)]
    dq.put(payload(7))  # rolls to file 1
    assert dq.read() == payload(7)
    assert list(tmp_path.glob("*.bad")) == []
    assert data_files(tmp_path) == ["q.diskqueue.000001.dat"]
    dq.close()


def test_oversized_record_gets_its_own_file(tmp_path: Path) -> None:
    dq = make_queue(tmp_path, max_bytes=50)
    big, small = b"x" * 200, payload(1)
    dq.put(small)
    dq.put(big)
    dq.put(small)
    assert data_files(tmp_path) == [f"q.diskqueue.00000{i}.dat" for i in range(3)]
    assert drain(dq) == [small, big, small]
    dq.close()


def test_metadata_bytes(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(10):
        dq.put(payload(i))
    for _ in range(3):
        dq.read()
    dq.sync()
    # 10 records: 7 in file 0, 3 in file 1 (42 bytes); 3 read (42 bytes into file 0)
    assert meta_text(tmp_path) == "7\n0,42\n1,42\n"
    assert list(tmp_path.glob("*.tmp")) == []
    dq.close()
    assert (tmp_path / "q.diskqueue.meta.dat").read_bytes() == b"7\n0,42\n1,42\n"


def test_channel_style_name(tmp_path: Path) -> None:
    dq = make_queue(tmp_path, name="topic:chan")
    dq.put(payload(0))
    dq.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "topic:chan.diskqueue.000000.dat",
        "topic:chan.diskqueue.meta.dat",
    ]
    assert meta_text(tmp_path, "topic:chan") == "1\n0,0\n0,14\n"


def test_reopen_after_close_continues(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(20):
        dq.put(payload(i))
    assert [dq.read() for _ in range(9)] == [payload(i) for i in range(9)]
    dq.close()
    dq = make_queue(tmp_path)
    assert dq.depth() == 11
    dq.put(payload(20))
    assert drain(dq) == [payload(i) for i in range(9, 21)]
    assert dq.depth() == 0
    dq.close()


def test_reopen_with_stale_metadata_loses_nothing(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(5):
        dq.put(payload(i))
    dq.sync()
    for i in range(5, 12):  # rolls into file 1; metadata still says file 0
        dq.put(payload(i))
    del dq  # simulated kill -9: no close(), no sync(); the page cache keeps the writes
    dq = make_queue(tmp_path)
    assert dq.depth() == 12
    dq.put(payload(12))  # must not land on top of anything written before the crash
    assert drain(dq) == [payload(i) for i in range(13)]
    assert dq.depth() == 0
    assert list(tmp_path.glob("*.bad")) == []
    dq.close()


def test_crash_before_any_metadata(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(10):
        dq.put(payload(i))
    del dq
    assert not (tmp_path / "q.diskqueue.meta.dat").exists()
    dq = make_queue(tmp_path)
    assert dq.depth() == 10
    dq.put(payload(10))
    assert drain(dq) == [payload(i) for i in range(11)]
    dq.close()


def test_crash_after_reads_redelivers_unsynced_reads(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(5):
        dq.put(payload(i))
    dq.sync()
    dq.read()
    dq.read()
    del dq
    dq = make_queue(tmp_path)
    assert drain(dq) == [payload(i) for i in range(5)]  # at-least-once
    dq.close()


def test_truncated_file_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dq = make_queue(tmp_path)
    for i in range(14):  # files 0 and 1 full, file 2 being written
        dq.put(payload(i))
    dq.close()
    first = tmp_path / "q.diskqueue.000000.dat"
    first.write_bytes(first.read_bytes()[:-5])  # tear the last record of file 0
    dq = make_queue(tmp_path)
    with caplog.at_level(logging.ERROR):
        got = drain(dq)
    assert got == [payload(i) for i in range(6)] + [payload(i) for i in range(7, 14)]
    assert (tmp_path / "q.diskqueue.000000.dat.bad").exists()
    assert "unexpected end of file" in caplog.text
    assert dq.depth() == 0  # one record lost: the depth was corrected at the tail
    dq.close()


def test_garbage_length_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dq = make_queue(tmp_path)
    for i in range(10):
        dq.put(payload(i))
    dq.close()
    first = tmp_path / "q.diskqueue.000000.dat"
    raw = bytearray(first.read_bytes())
    raw[14:18] = struct.pack(">i", 0x7FFFFFF0)  # length of the 2nd record
    first.write_bytes(bytes(raw))
    dq = make_queue(tmp_path)
    with caplog.at_level(logging.ERROR):
        got = drain(dq)
    assert got == [payload(0)] + [payload(i) for i in range(7, 10)]
    assert "invalid message read size (2147483632)" in caplog.text
    assert (tmp_path / "q.diskqueue.000000.dat.bad").exists()
    assert dq.depth() == 0
    dq.close()


def test_corrupt_write_file_moves_writer_on(tmp_path: Path) -> None:
    dq = make_queue(tmp_path, max_bytes=1000)
    for i in range(3):
        dq.put(payload(i))
    dq.close()
    f = tmp_path / "q.diskqueue.000000.dat"
    f.write_bytes(struct.pack(">i", -1) + f.read_bytes()[4:])
    dq = make_queue(tmp_path, max_bytes=1000)
    assert dq.read() is None
    assert dq.depth() == 0
    dq.put(payload(9))
    assert data_files(tmp_path) == ["q.diskqueue.000001.dat"]
    assert drain(dq) == [payload(9)]
    dq.close()


def test_missing_read_file_is_skipped(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(10):
        dq.put(payload(i))
    dq.close()
    (tmp_path / "q.diskqueue.000000.dat").unlink()
    dq = make_queue(tmp_path)
    assert drain(dq) == [payload(i) for i in range(7, 10)]
    assert dq.depth() == 0
    dq.close()


def test_depth_reset_at_tail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dq = make_queue(tmp_path)
    for i in range(3):
        dq.put(payload(i))
    dq.close()
    (tmp_path / "q.diskqueue.meta.dat").write_text("-5\n0,0\n0,42\n")
    dq = make_queue(tmp_path)
    assert dq.depth() == -5
    with caplog.at_level(logging.ERROR):
        assert len(drain(dq)) == 3
    assert dq.depth() == 0
    assert "negative depth at tail" in caplog.text
    dq.close()
    (tmp_path / "q.diskqueue.meta.dat").write_text("4\n0,42\n0,42\n")
    dq = make_queue(tmp_path)
    assert dq.depth() == 0  # reader already at the writer: corrected at open
    dq.close()


def test_size_limits(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    with pytest.raises(MessageSizeError):
        dq.put(b"abc")
    with pytest.raises(MessageSizeError):
        dq.put(b"x" * (MAX_SIZE + 1))
    dq.put(b"x" * MAX_SIZE)
    dq.put(b"abcd")
    assert drain(dq) == [b"x" * MAX_SIZE, b"abcd"]
    dq.close()


def test_needs_sync(tmp_path: Path) -> None:
    dq = make_queue(tmp_path, max_bytes=10_000, sync_every=4)
    assert not dq.needs_sync()
    dq.put(payload(0))
    dq.put(payload(1))
    dq.read()
    assert not dq.needs_sync()
    dq.read()
    assert dq.needs_sync()  # 4 reads + writes
    dq.sync()
    assert not dq.needs_sync()
    assert meta_text(tmp_path) == "0\n0,28\n0,28\n"
    dq.close()
    dq = DiskQueue("q", tmp_path, 10_000, MIN_SIZE, MAX_SIZE, 2500, 0.05)
    dq.put(payload(2))
    assert not dq.needs_sync()
    time.sleep(0.06)
    assert dq.needs_sync()  # sync_timeout passed with activity
    dq.sync()
    time.sleep(0.06)
    assert not dq.needs_sync()  # no activity since
    dq.close()


def test_roll_asks_for_sync(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(8):
        dq.put(payload(i))
    assert dq.needs_sync()  # a new write file: persist it soon
    dq.sync()
    assert meta_text(tmp_path) == "8\n0,0\n1,14\n"
    dq.close()


def test_empty(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(20):
        dq.put(payload(i))
    dq.sync()
    dq.empty()
    assert dq.depth() == 0
    assert dq.read() is None
    assert data_files(tmp_path) == []
    assert not (tmp_path / "q.diskqueue.meta.dat").exists()
    dq.put(payload(99))
    assert drain(dq) == [payload(99)]
    dq.close()
    dq = make_queue(tmp_path)
    dq.put(payload(100))
    assert drain(dq) == [payload(100)]
    dq.close()


def test_delete(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(20):
        dq.put(payload(i))
    dq.sync()
    dq.read()
    dq.delete()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(QueueClosedError):
        dq.put(payload(0))
    with pytest.raises(QueueClosedError):
        dq.read()


def test_reads_files_written_with_a_larger_limit(tmp_path: Path) -> None:
    """Finished files are read to their real size, whatever max_bytes_per_file is now."""
    dq = make_queue(tmp_path, max_bytes=1000)
    for i in range(80):
        dq.put(payload(i))
    dq.close()
    dq = make_queue(tmp_path, max_bytes=50)
    assert drain(dq) == [payload(i) for i in range(80)]
    dq.close()


def test_sync_in_a_thread_beside_put_and_read(tmp_path: Path) -> None:
    dq = make_queue(tmp_path, max_bytes=200)
    stop = threading.Event()
    errors: list[BaseException] = []

    def syncer() -> None:
        try:
            while not stop.is_set():
                dq.sync()
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=syncer)
    thread.start()
    got = []
    try:
        for i in range(3000):
            dq.put(payload(i))
            if i % 2:
                got.append(dq.read())
    finally:
        stop.set()
        thread.join()
    assert errors == []
    dq.close()
    assert list(tmp_path.glob("*.tmp")) == []
    dq = make_queue(tmp_path, max_bytes=200)
    assert dq.depth() == 1500
    got += drain(dq)
    assert got == [payload(i) for i in range(3000)]
    dq.close()


def test_missing_metadata_resumes_at_oldest_file(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    dq.put(payload(0))
    dq.empty()  # continues in file 1 and removes the metadata
    for i in range(1, 12):
        dq.put(payload(i))
    del dq  # crash before the metadata was written again
    dq = make_queue(tmp_path)
    assert dq.depth() == 11
    dq.put(payload(12))
    assert drain(dq) == [payload(i) for i in range(1, 13)]
    dq.close()


def test_write_file_shorter_than_metadata(tmp_path: Path) -> None:
    dq = make_queue(tmp_path)
    for i in range(3):
        dq.put(payload(i))
    dq.close()
    f = tmp_path / "q.diskqueue.000000.dat"
    f.write_bytes(f.read_bytes()[:28])  # the 3rd record vanished behind our back
    dq = make_queue(tmp_path)
    dq.put(payload(3))  # must not be appended at offset 28 while writePos says 42
    assert drain(dq) == [payload(0), payload(1), payload(3)]
    assert dq.depth() == 0
    dq.close()


def test_a_peek_in_parts_reads_on_from_where_it_stopped(tmp_path: Path) -> None:
    """peek_at: parts across file rolls (100-byte files, 14-byte records) give what one peek
    gives; a part's end that reads have passed since counts as the read position; nothing
    moves."""
    dq = make_queue(tmp_path)
    for i in range(40):
        dq.put(payload(i))
    whole = dq.peek(40)
    assert whole == [payload(i) for i in range(40)]
    parts, at = [], None
    while True:
        part, at = dq.peek_at(3, at)
        if not part:
            break
        parts += part
    assert parts == whole
    first, at = dq.peek_at(10, None)
    assert first == whole[:10]
    for _ in range(15):  # reads pass the part's end: the next part starts at the head
        dq.read()
    assert dq.peek_at(5, at)[0] == whole[15:20]
    assert drain(dq) == whole[15:]
    assert dq.peek_at(5, at)[0] == []
    dq.close()
    with pytest.raises(QueueClosedError):
        dq.peek_at(5, None)


def test_sync_every_1_writes_the_read_position_after_the_pass_before_what_was_read_leaves(
    tmp_path: Path,
) -> None:
    """--sync-every=1: the syncer's thread wrote a read's position after what was read had
    left, and a kill -9 right after its FINs gave it all back. Written at the read itself
    (this campaign's first fix), it came before the pass's write of where the records went (a
    channel's queue, a journal's delivered batch): a kill -9 between lost them (kill -9
    chaos: 1 of 19,433). It is written when the pass's write is on file, before the pass's
    later callbacks (the deliveries)."""
    from nsqd.storage.commit import GroupCommit

    commit = GroupCommit()
    queue = make_queue(tmp_path, max_bytes=1 << 20, commit=commit, sync_every=1)
    queue.put(payload(0))
    queue.put(payload(1))
    queue.sync()
    meta = tmp_path / "q.diskqueue.meta.dat"
    before = meta.read_text()
    seen: list[str] = []
    commit.hold()
    assert queue.read() == payload(0)
    assert meta.read_text() == before, "the read position went to file before the pass's write"
    commit.later(lambda error: seen.append(meta.read_text()))  # a delivery of the pass
    assert commit.release() is None
    assert seen == ["1\n0,14\n0,28\n"], "the read position was not on file before it left"
    queue.close()
