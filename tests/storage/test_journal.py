"""The in-flight journal (nsqd/storage/journal.py) on a real file, no daemon: what a run held,
deferred and released comes back from the file; releases are gathered and written with one
flush; inside a held group commit the held and deferred records of the pass are one write at
its release, and what waits for it runs after; a flipped byte anywhere in one record loses only
that record's messages."""

from __future__ import annotations

from pathlib import Path

from nsqd.engine.message import Message
from nsqd.storage import records
from nsqd.storage.commit import GroupCommit
from nsqd.storage.journal import SUFFIX, ChannelJournal


def msg(i: int, attempts: int = 1) -> Message:
    return Message(b"%016x" % i, b"body-%d" % i, 1_700_000_000_000_000_000 + i, attempts)


class Calls:
    def __init__(self) -> None:
        self.flush: list[ChannelJournal] = []
        self.sync = 0
        self.commit = GroupCommit()
        self.last_error: str | None = None  # the journal's health sink

    def journal(self, path: Path, sync_every: int = 1) -> ChannelJournal:
        return ChannelJournal(
            str(path), sync_every, 2.0, self.flush.append, self._sync, self.commit, self
        )

    def _sync(self) -> None:
        self.sync += 1


def view(got: tuple[list[Message], list[tuple[Message, int]]]) -> tuple[list, list]:
    in_flight, deferred = got
    return (
        sorted((m.id, m.body, m.timestamp, m.attempts) for m in in_flight),
        sorted((m.id, m.body, due) for m, due in deferred),
    )


def test_held_deferred_and_released_come_back(tmp_path: Path) -> None:
    path = tmp_path / ("t:c" + SUFFIX)
    calls = Calls()
    journal = calls.journal(path)
    assert journal.recover() == ([], [])
    journal.held([msg(1), msg(2, attempts=3)])
    journal.deferred([msg(3)], 1_800_000_000_000)
    journal.released([msg(1).id])  # --sync-every=1: written at once
    again = calls.journal(path).recover()
    assert view(again) == view(([msg(2, attempts=3)], [(msg(3), 1_800_000_000_000)]))
    assert calls.sync >= 1 and not calls.flush


def test_releases_are_gathered_until_the_flush(tmp_path: Path) -> None:
    path = tmp_path / ("t:c" + SUFFIX)
    calls = Calls()
    journal = calls.journal(path, sync_every=100)
    journal.held([msg(i) for i in range(4)])
    size = path.stat().st_size
    journal.released([msg(0).id])
    journal.released([msg(1).id])
    assert calls.flush == [journal]  # asked once for the pass
    assert path.stat().st_size == size  # nothing written yet
    journal.flush()  # the store's flusher: one write for both
    assert len(records.read(path.read_bytes(), "test").payloads) == 3
    assert view(calls.journal(path).recover())[0] == view(([msg(2), msg(3)], []))[0]


def test_a_damaged_record_loses_only_its_messages(tmp_path: Path) -> None:
    path = tmp_path / ("t:c" + SUFFIX)
    calls = Calls()
    journal = calls.journal(path)
    for i in range(5):
        journal.deferred([msg(i)], 1_800_000_000_000 + i)
    intact = path.read_bytes()
    starts = [len(records.FILE_MAGIC)]
    for _ in range(4):
        pos = starts[-1]
        starts.append(pos + records.HEAD_SIZE + int.from_bytes(intact[pos + 2 : pos + 6], "big"))
    for pos in range(starts[2], starts[3]):  # every byte of the third record in turn
        damaged = bytearray(intact)
        damaged[pos] ^= 0x04
        path.write_bytes(bytes(damaged))
        _, deferred = calls.journal(path).recover()
        assert sorted(m.body for m, _ in deferred) == [b"body-%d" % i for i in (0, 1, 3, 4)]


def test_a_clean_stop_keeps_only_the_deferred(tmp_path: Path) -> None:
    path = tmp_path / ("t:c" + SUFFIX)
    calls = Calls()
    journal = calls.journal(path)
    journal.held([msg(1)])
    journal.close([(msg(2), 1_800_000_000_000)])
    assert view(calls.journal(path).recover()) == view(([], [(msg(2), 1_800_000_000_000)]))
    emptied = calls.journal(path)
    emptied.recover()
    emptied.close([])
    assert not path.exists()


def test_a_pass_writes_its_held_and_deferred_records_once(tmp_path: Path, monkeypatch) -> None:
    """Inside a hold: buffered (a deferral counted as a publisher's record), one write() at
    the release, after which the deliveries that waited may go; a lease's record is written
    at once. Outside a hold each record is its own write, as before."""
    import os

    path = tmp_path / ("t:c" + SUFFIX)
    calls = Calls()
    journal = calls.journal(path, sync_every=100)
    journal.recover()
    writes: list[int] = []
    real = os.write

    def counted(fd: int, data: bytes) -> int:
        writes.append(len(data))
        return real(fd, data)

    monkeypatch.setattr("nsqd.storage.atomic.os.write", counted)
    commit = calls.commit
    sent: list[int] = []
    commit.hold()
    journal.held([msg(1)])
    journal.held([msg(2), msg(3)])
    journal.deferred([msg(4)], 1_800_000_000_000)
    commit.later(lambda error: sent.append(len(writes)))
    assert commit.appended == 1  # the deferral: its DPUB is answered after the release
    assert writes == [] and sent == []
    journal.held([msg(5)], at_once=True)  # a lease: written now, with what was buffered
    assert len(writes) == 1
    journal.held([msg(6)])
    assert commit.release() is None
    assert len(writes) == 2 and sent == [2]  # the deliveries went after the write
    journal.held([msg(7)])  # no hold: at once
    assert len(writes) == 3
    again = calls.journal(path).recover()
    held = [msg(i) for i in (1, 2, 3, 5, 6, 7)]
    assert view(again) == view((held, [(msg(4), 1_800_000_000_000)]))


def test_a_failed_pass_write_is_the_holders_refusal(tmp_path: Path, monkeypatch) -> None:
    """The release reports a journal write that failed (its DPUB is refused), as a disk
    queue's; the next pass writes again."""
    import errno
    import os

    path = tmp_path / ("t:c" + SUFFIX)
    calls = Calls()
    journal = calls.journal(path, sync_every=100)
    journal.recover()
    real = os.write

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    commit = calls.commit
    commit.hold()
    journal.deferred([msg(1)], 1_800_000_000_000)
    monkeypatch.setattr("nsqd.storage.atomic.os.write", full)
    error = commit.release()
    assert error is not None and "No space left on device" in error
    monkeypatch.setattr("nsqd.storage.atomic.os.write", real)
    commit.hold()
    journal.deferred([msg(2)], 1_800_000_000_000)
    assert commit.release() is None
    assert view(calls.journal(path).recover()) == view(([], [(msg(2), 1_800_000_000_000)]))


def test_a_clean_stop_changes_the_file_only_after_the_queues_write(tmp_path: Path) -> None:
    """The store's close holds the group commit while every channel puts its in-flight
    messages in its disk queue: a journal emptied before that write, and a kill -9 before it,
    lost them. Until the release the file still holds them; after it, only the deferred; a
    failed write keeps them all."""
    path = tmp_path / ("t:c" + SUFFIX)
    calls = Calls()
    journal = calls.journal(path)
    journal.held([msg(1), msg(2)])
    calls.commit.hold()
    journal.close([(msg(3), 1_800_000_000_000)])
    # (a kill -9 here: the disk queue's records are not written yet)
    assert view(calls.journal(path).recover()) == view(([msg(1), msg(2)], []))
    assert calls.commit.release() is None
    assert view(calls.journal(path).recover()) == view(([], [(msg(3), 1_800_000_000_000)]))

    gone = tmp_path / ("t:d" + SUFFIX)
    emptied = calls.journal(gone)
    emptied.held([msg(4)])
    calls.commit.hold()
    emptied.close([])
    assert gone.exists()
    calls.commit.release()
    assert not gone.exists()

    failed = tmp_path / ("t:e" + SUFFIX)
    kept = calls.journal(failed)
    kept.held([msg(5)])
    calls.commit.hold()
    kept.close([])
    calls.commit.failed("disk full")
    assert calls.commit.release() == "disk full"
    assert view(calls.journal(failed).recover()) == view(([msg(5)], []))


def test_in_a_held_pass_releases_are_written_after_the_queues(tmp_path: Path) -> None:
    """A REQ in a pass puts its message in the queue (buffered for the pass's write) and
    releases it here: written at once, the release reached its file before the queue's
    record did, and a kill -9 in between lost the message (found by a crash-consistency
    campaign). In a held pass the journals are written last, their records in call order."""
    path = tmp_path / ("t:c" + SUFFIX)
    calls = Calls()
    journal = calls.journal(path)  # --sync-every=1: outside a pass a release is written at once
    journal.held([msg(1), msg(2)])
    order: list[str] = []

    def in_flight() -> int:  # read from a copy: recover() rewrites the file it reads
        copy = tmp_path / ("copy:c" + SUFFIX)
        copy.write_bytes(path.read_bytes())
        return len(calls.journal(copy).recover()[0])

    class Queue:
        def flush(self) -> None:
            order.append("queue")
            # what the journal's file says while the queue is written: both still in flight
            order.append(str(in_flight()))

    commit = calls.commit
    commit.hold()
    journal.released([msg(1).id])  # the journal's first record of the pass...
    commit.add(Queue(), False)  # ...and the queue's after it
    assert in_flight() == 2  # nothing written yet
    assert commit.release() is None
    assert order == ["queue", "2"]
    assert view(calls.journal(path).recover()) == view(([msg(2)], []))
