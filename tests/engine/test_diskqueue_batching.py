"""DiskQueue's batching against real files: group commit (what a hold buffers is one write,
in go-diskqueue's bytes and rolls; a torn or failed batch) and read-ahead (read_many gives what
read gives, whatever the damage). The layout and recovery are test_diskqueue.py's."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from diskqueue_helpers import REPO_ROOT, data_files, drain, make_queue, meta_text, payload

from nsqd.storage import diskqueue_reader
from nsqd.storage.commit import GroupCommit

# -- group commit ------------------------------------------------------------------------------


def file_bytes(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.glob("q.diskqueue.*"))}


def test_group_commit_writes_go_diskqueue_bytes_and_rolls(tmp_path: Path) -> None:
    """Held, puts reach no file until the release; then the files (rolls included) and the
    metadata are byte for byte those of a queue that wrote each record at once."""
    one, batched = tmp_path / "one", tmp_path / "batched"
    one.mkdir()
    batched.mkdir()
    plain = make_queue(one)
    commit = GroupCommit()
    dq = make_queue(batched, commit=commit)
    sizes = [10, 30, 3, 50, 20, 20, 20, 7, 90, 4, 40]  # records of 9..95 bytes, 100-byte files
    payloads = [b"%d" % i + b"z" * n for i, n in enumerate(sizes)]
    for data in payloads[:2]:
        plain.put(data)
        dq.put(data)
    commit.hold()
    for data in payloads[2:]:
        plain.put(data)
        dq.put(data)
    # before the release only what had to leave for a roll is in a file
    written = sum(len(b) for b in file_bytes(batched).values())
    assert written < sum(len(b) for b in file_bytes(one).values())
    assert commit.appended == len(payloads) - 2
    assert commit.release() is None
    plain.close()
    dq.close()
    assert file_bytes(batched) == file_bytes(one)
    assert len(data_files(batched)) > 3


def test_sync_while_held_claims_no_buffered_record(tmp_path: Path) -> None:
    commit = GroupCommit()
    dq = make_queue(tmp_path, max_bytes=1000, commit=commit)
    dq.put(payload(0))
    commit.hold()
    dq.put(payload(1))
    dq.put(payload(2))
    dq.sync()  # the syncer's thread, mid-pass
    assert meta_text(tmp_path) == "1\n0,0\n0,14\n"
    del dq  # kill -9 before the release: the buffered records were never acknowledged
    dq = make_queue(tmp_path, max_bytes=1000)
    assert drain(dq) == [payload(0)]
    assert list(tmp_path.glob("*.bad")) == []
    dq.close()


def test_read_while_held_flushes_first(tmp_path: Path) -> None:
    commit = GroupCommit()
    dq = make_queue(tmp_path, commit=commit)
    commit.hold()
    for i in range(3):
        dq.put(payload(i))
    assert dq.peek(5) == [payload(i) for i in range(3)]
    dq.put(payload(3))
    assert drain(dq) == [payload(i) for i in range(4)]
    assert commit.release() is None
    dq.close()


def test_empty_while_held_drops_the_buffer(tmp_path: Path) -> None:
    commit = GroupCommit()
    dq = make_queue(tmp_path, commit=commit)
    commit.hold()
    dq.put(payload(0))
    dq.empty()
    dq.put(payload(1))
    assert commit.release() is None
    assert drain(dq) == [payload(1)]
    assert dq.depth() == 0
    dq.close()


def test_torn_batch_at_the_tail_recovered(tmp_path: Path) -> None:
    """A batch cut short by a power loss (a prefix of its one write on disk): the whole
    records before the tear are delivered, the rest is gone, new records go to a new file."""
    commit = GroupCommit()
    dq = make_queue(tmp_path, max_bytes=1000, commit=commit)
    dq.put(payload(0))
    dq.sync()
    commit.hold()
    for i in range(1, 6):
        dq.put(payload(i))
    assert commit.release() is None
    del dq  # no sync: the metadata says 1 record
    f = tmp_path / "q.diskqueue.000000.dat"
    f.write_bytes(f.read_bytes()[: 14 * 3 + 9])  # records 0-2 whole, 3 torn, 4-5 never written
    dq = make_queue(tmp_path, max_bytes=1000)
    assert dq.depth() == 3
    dq.put(payload(6))
    assert drain(dq) == [payload(0), payload(1), payload(2), payload(6)]
    assert dq.depth() == 0
    dq.close()


_FULL_DISK = """
import json, os, resource, signal, sys
from nsqd.storage.commit import GroupCommit
from nsqd.storage.diskqueue import DiskQueue
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
lost = []
commit = GroupCommit()
dq = DiskQueue("q", sys.argv[1], 10_000, 4, 1024, 2500, 2.0, commit=commit,
               on_lost=lambda n, reason: lost.append(n))
dq.put(b"msg-000000")
resource.setrlimit(resource.RLIMIT_FSIZE, (14 * 3 + 5, resource.RLIM_INFINITY))
commit.hold()
if sys.argv[2] == "put":
    for i in range(1, 6):
        dq.put(b"msg-%06d" % i)
else:  # one framed run of the five records
    dq.put_framed(b"".join(b"\\0\\0\\0\\x0amsg-%06d" % i for i in range(1, 6)), 5)
error = commit.release()
depth = dq.depth()
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
dq.put(b"msg-000009")
got = []
while (data := dq.read()) is not None:
    got.append(data.decode())
dq.close()
print(json.dumps({"error": error, "lost": lost, "depth": depth, "got": got}))
"""


@pytest.mark.parametrize("how", ["put", "framed"])
def test_failed_batch_write_is_undone_and_reported(tmp_path: Path, how: str) -> None:
    """A disk that takes part of the batch (a real EFBIG from RLIMIT_FSIZE): the file is cut
    back to its last whole record, the release says why, none of the batch is counted (its
    records one by one, or one framed run of them)."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    out = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(tmp_path), how],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=True,
    )
    result = json.loads(out.stdout)
    assert "write failed" in result["error"], result
    assert result["lost"] == [5]
    assert result["depth"] == 1
    assert result["got"] == ["msg-000000", "msg-000009"]


# -- read-ahead (read_many) --------------------------------------------------------------------


def _damage(kind: str, path: Path) -> None:
    first = path / "q.diskqueue.000000.dat"
    raw = bytearray(first.read_bytes())
    if kind == "torn":
        del raw[-5:]  # the last record of file 0 cut short
    elif kind == "garbage":
        raw[14:18] = struct.pack(">i", 0x7FFFFFF0)  # the length of the 2nd record
    elif kind == "negative":
        raw[14:18] = struct.pack(">i", -5)
    elif kind == "misaligned":
        raw[28:32] = struct.pack(">i", 30)  # a length that runs past the file's records
    first.write_bytes(bytes(raw))


@pytest.mark.parametrize("chunk", [64 * 1024, 40, 17])
@pytest.mark.parametrize("damage", ["none", "torn", "garbage", "negative", "misaligned"])
@pytest.mark.parametrize("n", [1, 4, 100])
def test_read_many_gives_what_read_gives(
    tmp_path: Path, damage: str, n: int, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of n (across rolls and damaged records) give the records, files and metadata
    that reading one at a time gives, whatever the chunk a run is read with (runs cut by a
    chunk's end; 17 bytes: records longer than a chunk, read one at a time)."""
    monkeypatch.setattr(diskqueue_reader, "_RUN_CHUNK", chunk)
    one, many = tmp_path / "one", tmp_path / "many"
    for path in (one, many):
        path.mkdir()
        dq = make_queue(path)
        for i in range(30):  # 7 records a file: several rolls
            dq.put(payload(i))
        dq.close()
        if damage != "none":
            _damage(damage, path)
    dq = make_queue(one)
    singles = drain(dq)
    dq.put(payload(99))
    singles += drain(dq)
    dq.close()
    dq = make_queue(many)
    batches: list[bytes] = []
    while got := dq.read_many(n, 1 << 30):
        assert len(got) <= n
        batches += got
    dq.put(payload(99))
    batches += dq.read_many(n, 1 << 30)
    assert dq.read_many(n, 1 << 30) == []
    dq.close()
    assert batches == singles
    assert file_bytes(many) == file_bytes(one)
    assert sorted(p.name for p in many.iterdir()) == sorted(p.name for p in one.iterdir())


@pytest.mark.parametrize("how", ["read", "read_many"])
def test_reading_while_a_hold_buffers(tmp_path: Path, how: str) -> None:
    """The reader reaches the buffered records (also by finishing the file before them):
    they are written first, never taken for a damaged file."""
    commit = GroupCommit()
    dq = make_queue(tmp_path, commit=commit)
    got: list[bytes] = []
    for i in range(40):
        commit.hold()
        dq.put(payload(2 * i))
        dq.put(payload(2 * i + 1))
        if how == "read":
            got += [d for _ in range(3) if (d := dq.read()) is not None]
        else:
            got += dq.read_many(3, 1 << 30)
        assert commit.release() is None
    got += drain(dq)
    assert got == [payload(i) for i in range(80)]
    assert dq.depth() == 0
    assert list(tmp_path.glob("*.bad")) == []
    dq.close()


def test_sync_every_counts_messages_not_writes(tmp_path: Path) -> None:
    """--sync-every counts each message put and each read, as go-diskqueue does, however
    many share a write or a read-ahead."""
    commit = GroupCommit()
    dq = make_queue(tmp_path, max_bytes=10_000, sync_every=6, commit=commit)
    commit.hold()
    for i in range(5):
        dq.put(payload(i))
    assert not dq.needs_sync()
    dq.put(payload(5))
    assert dq.needs_sync()  # 6 messages, not yet one write
    assert commit.release() is None
    dq.sync()
    assert dq.read_many(5, 1 << 30) == [payload(i) for i in range(5)]
    assert not dq.needs_sync()
    assert dq.read_many(5, 1 << 30) == [payload(5)]
    assert dq.needs_sync()
    dq.close()
