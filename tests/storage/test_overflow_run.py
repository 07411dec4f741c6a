"""DiskOverflow.put_run: the messages of one publish past memory written straight from their ids
and bodies are the records put() writes for the same messages, in order, counted; a refusal
part way leaves the ones before it stored and counted, and the store unhealthy until a write
succeeds. DiskOverflow.put_many (a clean stop's memory): the records put() writes, in order."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from nsqd.engine.guid import GUIDFactory
from nsqd.engine.message import Message
from nsqd.engine.policies.policy import ExpiringMessage
from nsqd.engine.queue import Backlog
from nsqd.storage import overflow as overflow_module
from nsqd.storage.commit import GroupCommit
from nsqd.storage.diskqueue import DiskQueueError
from nsqd.storage.overflow import DiskOverflow

TS = 1_700_000_000_123_456_789


class Health:
    last_error: str | None = None


def overflow(
    path: Path,
    name: str,
    health: Health,
    max_msg_size: int = 1 << 20,
    file_size: int = 1 << 20,
    commit: GroupCommit | None = None,
) -> DiskOverflow:
    return DiskOverflow(
        name, str(path), file_size, max_msg_size, 2500, 2.0, health, lambda: None, commit
    )


def files(path: Path, name: str) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.glob(f"{name}.diskqueue.*.dat")))


def test_a_run_writes_the_records_put_writes(tmp_path: Path) -> None:
    ids = GUIDFactory(7).next_run(5)
    bodies = [b"a", b"bb", b"ccc" * 100, b"d", b"e" * 7]
    by_run, by_put = overflow(tmp_path, "run", Health()), overflow(tmp_path, "put", Health())
    by_run.put_run(ids, bodies, TS)
    for msg_id, body in zip(ids, bodies, strict=True):
        by_put.put(Message(msg_id, body, TS))
    by_run.close()
    by_put.close()
    assert files(tmp_path, "run") == files(tmp_path, "put") != b""
    again = overflow(tmp_path, "run", Health())
    assert len(again) == 5
    got = again.get_many(10)
    assert [(m.id, m.body, m.timestamp, m.attempts) for m in got] == [
        (i, b, TS, 0) for i, b in zip(ids, bodies, strict=True)
    ]


@pytest.mark.parametrize("held", [False, True])
def test_runs_across_file_rolls_write_what_put_writes(tmp_path: Path, held: bool) -> None:
    """A run is framed into one write, but a run that crosses a file's end is rolled record
    by record as put() rolls: the same files, the same metadata, the same messages back."""
    commit = GroupCommit()
    by_run = overflow(tmp_path, "run", Health(), file_size=400, commit=commit)
    by_put = overflow(tmp_path, "put", Health(), file_size=400)
    factory = GUIDFactory(3)
    sent = []
    for n in (1, 3, 7, 2, 9, 1, 5):  # records of 27-76 bytes, 400-byte files: many rolls
        ids = factory.next_run(n)
        bodies = [b"%d" % i + b"x" * (i * 7 % 50) for i in range(n)]
        if held:
            commit.hold()
        by_run.put_run(ids, bodies, TS)
        if held:
            assert commit.release() is None
        for msg_id, body in zip(ids, bodies, strict=True):
            by_put.put(Message(msg_id, body, TS))
        sent += zip(ids, bodies, strict=True)
    assert len(by_run) == len(by_put) == len(sent)
    by_run.close()
    by_put.close()
    names = sorted(p.name.removeprefix("run") for p in tmp_path.glob("run.diskqueue.*"))
    assert names == sorted(p.name.removeprefix("put") for p in tmp_path.glob("put.diskqueue.*"))
    assert len(names) > 4  # several data files and the metadata
    for name in names:
        assert (tmp_path / f"run{name}").read_bytes() == (tmp_path / f"put{name}").read_bytes()
    again = overflow(tmp_path, "run", Health(), file_size=400)
    got = again.get_many(100) + again.get_many(100)
    assert [(m.id, m.body, m.timestamp, m.attempts) for m in got] == [
        (i, b, TS, 0) for i, b in sent
    ]
    assert len(again) == 0


def test_a_backlog_past_memory_puts_the_rest_as_a_run(tmp_path: Path) -> None:
    backlog = Backlog(2, overflow(tmp_path, "t", Health()))
    ids = GUIDFactory(1).next_run(5)
    bodies = [b"%d" % i for i in range(5)]
    backlog.extend_run(ids, bodies, TS)
    assert (len(backlog), len(backlog.overflow)) == (5, 3)
    got = backlog.take(5)
    assert [(m.id, m.body) for m in got] == list(zip(ids, bodies, strict=True))


def test_a_refusal_part_way_keeps_what_was_stored(tmp_path: Path) -> None:
    health = Health()
    store = overflow(tmp_path, "t", health, max_msg_size=4)
    ids = GUIDFactory(1).next_run(3)
    with pytest.raises(DiskQueueError):
        store.put_run(ids, [b"ok", b"too long", b"ok"], TS)
    assert len(store) == 1
    assert health.last_error is not None and "invalid message write size" in health.last_error
    store.put_run(ids[2:], [b"ok"], TS)
    assert (len(store), health.last_error) == (2, None)
    assert [m.id for m in store.get_many(5)] == [ids[0], ids[2]]


@pytest.mark.parametrize("odd", [None, 0, 5, 11])
def test_records_of_one_size_read_back_as_stored(tmp_path: Path, odd: int | None) -> None:
    """Records of one size (cut in C) and a run broken by one of another size (cut one at a
    time) give back every field as stored, whatever bytes the bodies hold (here the frame
    of their own size)."""
    store = overflow(tmp_path, "t", Health())
    ids = GUIDFactory(5).next_run(12)
    frame = (26 + 40).to_bytes(4, "big")
    stored = []
    for i, msg_id in enumerate(ids):
        body = (frame * 10)[: 40 - 1] + bytes([i])
        if i == odd:
            body += b"longer"
        msg = Message(msg_id, body, TS + i, attempts=i % 3)
        store.put(msg)
        stored.append((msg_id, body, TS + i, i % 3))
    got = store.get_many(100)
    assert [(m.id, m.body, m.timestamp, m.attempts) for m in got] == stored
    assert all(m.owner is None and m.deadline == m.delivered_at == 0.0 for m in got)
    assert len(store) == 0


@pytest.mark.parametrize("held", [False, True])
def test_put_many_writes_what_put_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    """A clean stop's messages framed into few writes (chunks of 300 bytes here, files of
    400: many chunks and rolls) are the records put() writes one at a time, in order: the
    attempts kept, a message with its own TTL in its place and in the TTL file."""
    monkeypatch.setattr(overflow_module, "PUT_MANY_CHUNK", 300)
    commit = GroupCommit()
    many = overflow(tmp_path, "many", Health(), file_size=400, commit=commit)
    each = overflow(tmp_path, "each", Health(), file_size=400)
    ids = GUIDFactory(5).next_ids(40)
    msgs = [Message(ids[i], b"%d" % i + b"y" * (i * 11 % 60), TS + i, i % 3) for i in range(40)]
    expiring = ExpiringMessage(ids[17], b"ttl", TS, 1, expires=TS + 10**12)
    msgs[17] = expiring
    if held:
        commit.hold()
    many.put_many(iter(msgs))
    if held:
        assert commit.release() is None
    for msg in msgs:
        each.put(msg)
    assert len(many) == len(each) == 40
    many.close()
    each.close()
    assert files(tmp_path, "many") == files(tmp_path, "each") != b""
    for name in ("many", "each"):
        assert (tmp_path / f"{name}.diskqueue.ttl").exists(), name
    again = overflow(tmp_path, "many", Health())
    got = again.get_many(100)
    assert [(m.id, m.body, m.timestamp, m.attempts) for m in got] == [
        (m.id, m.body, m.timestamp, m.attempts) for m in msgs
    ]
    assert got[17].expires == expiring.expires


def test_a_clean_stop_puts_memory_and_in_flight_in_order(tmp_path: Path) -> None:
    """Backlog.close: runs of a publish, records given back, and the in-flight messages
    after them reach the disk in that order (one put_many, not a put each)."""
    backlog = Backlog(100, overflow(tmp_path, "t", Health()))
    factory = GUIDFactory(2)
    run_ids = factory.next_run(3)
    backlog.extend_run(run_ids, [b"r0", b"r1", b"r2"], TS)
    requeued = Message(factory.next_id(), b"again", TS, 2)
    backlog.put(requeued)
    more = factory.next_run(2)
    backlog.extend_run(more, [b"m0", b"m1"], TS + 1)
    in_flight = [Message(factory.next_id(), b"held", TS, 1)]
    backlog.close(in_flight)
    again = overflow(tmp_path, "t", Health())
    got = [(m.id, m.body, m.attempts) for m in again.get_many(10)]
    assert got == [
        *((i, b, 0) for i, b in zip(run_ids, [b"r0", b"r1", b"r2"], strict=True)),
        (requeued.id, b"again", 2),
        *((i, b, 0) for i, b in zip(more, [b"m0", b"m1"], strict=True)),
        (in_flight[0].id, b"held", 1),
    ]


@pytest.mark.parametrize("end", ["delete", "close"])
def test_an_ended_queue_is_freed_without_a_collection(tmp_path: Path, end: str) -> None:
    """A deleted (or closed) topic or channel's overflow is freed by refcounting: its queue
    held the overflow's bound method, a cycle the daemon's rare full collections (cli.py's
    thresholds) left in memory, one per topic or channel made and deleted."""
    gc.disable()
    try:
        store = overflow(tmp_path, "t:c", Health())
        store.put(Message(b"0" * 16, b"body", TS))
        queue = weakref.ref(store.queue)
        getattr(store, end)()
        del store
        assert queue() is None, "the queue waits for the cyclic garbage collector"
    finally:
        gc.enable()
