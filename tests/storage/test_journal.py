"""The in-flight journal (nsqd/storage/journal.py) on a real file, no daemon: what a run held,
deferred and released comes back from the file; releases are gathered and written with one
flush; a flipped byte anywhere in one record loses only that record's messages."""

from __future__ import annotations

from pathlib import Path

from nsqd.engine.message import Message
from nsqd.storage import records
from nsqd.storage.journal import SUFFIX, ChannelJournal


def msg(i: int, attempts: int = 1) -> Message:
    return Message(b"%016x" % i, b"body-%d" % i, 1_700_000_000_000_000_000 + i, attempts)


class Calls:
    def __init__(self) -> None:
        self.flush: list[ChannelJournal] = []
        self.sync = 0

    def journal(self, path: Path, sync_every: int = 1) -> ChannelJournal:
        return ChannelJournal(str(path), sync_every, 2.0, self.flush.append, self._sync)

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
