"""The files built on the record log, on real files and no daemon: the de-duplication keys
and the TTLs beside a disk queue lose only a damaged record, and their files from before
records.py are read once and rewritten in its framing."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from nsqd.engine.dedupe import KeyRange
from nsqd.engine.message import Message
from nsqd.storage import records
from nsqd.storage.commit import GroupCommit
from nsqd.storage.dedupe import KeyFile
from nsqd.storage.diskqueue import DiskQueue
from nsqd.storage.expiries import ExpiryFile
from nsqd.storage.journal import ChannelJournal

IDS = [bytes([i]) * 16 for i in range(1, 6)]


def _flip_in_record(path: Path, index: int) -> None:
    data = bytearray(path.read_bytes())
    pos = len(records.FILE_MAGIC)
    for _ in range(index):
        pos += records.HEAD_SIZE + int.from_bytes(data[pos + 2 : pos + 6], "big")
    data[pos + 3] ^= 0x10  # in the record's length
    path.write_bytes(bytes(data))


def test_dedupe_keys_lose_only_the_damaged_record(tmp_path: Path) -> None:
    keys = KeyFile(str(tmp_path), 1, 2.0, lambda: None, GroupCommit(), _Health())
    keys.remembered("t", ["a"], 1, False)
    keys.remembered("t", ["b", "c"], 2, False)  # one record a key, one write
    keys.remembered("u", KeyRange("p", 0, 3), 3, False)
    keys.close()
    _flip_in_record(tmp_path / "trio-nsqd.dedupe", 1)
    again = KeyFile(str(tmp_path), 1, 2.0, lambda: None, GroupCommit(), _Health())
    got = list(again.load())
    assert got == [("t", "a", 1), ("t", "c", 2), ("u", "p/0", 3), ("u", "p/1", 3), ("u", "p/2", 3)]


def test_dedupe_keys_in_the_old_framing_still_load(tmp_path: Path) -> None:
    fresh = KeyFile(str(tmp_path), 1, 2.0, lambda: None, GroupCommit(), _Health())
    fresh.remembered("t", ["a", "b"], 7, False)
    fresh.close()
    path = tmp_path / "trio-nsqd.dedupe"
    payloads = records.read(path.read_bytes(), "test").payloads
    path.write_bytes(b"".join(struct.pack(">II", len(p), zlib.crc32(p)) + p for p in payloads))
    keys = KeyFile(str(tmp_path), 1, 2.0, lambda: None, GroupCommit(), _Health())
    entries = list(keys.load())
    assert entries == [("t", "a", 7), ("t", "b", 7)]
    keys.rewrite(entries)  # what Deduper.attach does next
    keys.close()
    assert path.read_bytes().startswith(records.FILE_MAGIC)


def _keyed_pass(tmp_path: Path, journal_first: bool) -> list[tuple[str, str, int]]:
    """One held pass: another channel's delivery (a journal record) and a keyed publish whose
    message is buffered for its disk queue (`journal_first`: the journal record comes before
    the publish, as another connection's hand-out in the same pass; else the publish's own
    hand-out made it), the pass's write made, then the key file read back at a start whose
    queue file was cut back to before that message (as if the kill came between the writes)."""
    commit = GroupCommit()
    queue = DiskQueue("t", tmp_path, 1 << 20, 0, 1 << 20, 2500, 2.0, commit=commit)
    journal = ChannelJournal(
        str(tmp_path / "u:c.inflight.journal"), 2500, 2.0, _nothing, _nothing, commit, _Health()
    )
    keys = KeyFile(str(tmp_path), 2500, 2.0, _nothing, commit, _Health())
    msg = Message(IDS[0], b"delivered", 1)
    commit.hold()
    if journal_first:
        journal.held([msg])
    journaled = commit.journaled
    queue.put(b"keyed message")
    if not journal_first:
        journal.held([msg])
    keys.remembered("t", ["k"], 5, after=commit.journaled != journaled)
    assert commit.release() is None
    keys.close()  # the queue is not closed (nor its metadata written): a kill -9
    (tmp_path / "t.diskqueue.000000.dat").write_bytes(b"")  # its message never written
    again = KeyFile(str(tmp_path), 2500, 2.0, _nothing, GroupCommit(), _Health())
    again.scan()
    return list(again.load())


def test_a_key_names_its_message_s_queue_position_beside_another_channel_s_journal(
    tmp_path: Path,
) -> None:
    """Another connection's delivery journaled in the same pass leaves the keys first, naming
    where their message ends: a start that finds it missing forgets the key."""
    assert _keyed_pass(tmp_path, journal_first=True) == []


def test_a_key_whose_publish_journaled_its_message_is_written_after_it(tmp_path: Path) -> None:
    """The publish's own hand-out journaled (no queue position names that copy): the key is
    written after every file, without positions, and a start keeps it."""
    assert _keyed_pass(tmp_path, journal_first=False) == [("t", "k", 5)]


def _nothing(*args: object) -> None:
    pass


def test_ttls_lose_only_the_damaged_record(tmp_path: Path) -> None:
    path = tmp_path / "q.diskqueue.ttl"
    ttl = ExpiryFile(str(path))
    for i, msg_id in enumerate(IDS):
        ttl.add(msg_id, 1000 + i)
    ttl.close()
    _flip_in_record(path, 2)
    again = ExpiryFile(str(path))
    assert again.expires == {m: 1000 + i for i, m in enumerate(IDS) if i != 2}
    again.close()


def test_ttls_in_the_old_layout_are_read_and_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "q.diskqueue.ttl"
    old = b""
    for i, msg_id in enumerate(IDS):
        head = msg_id + (1000 + i).to_bytes(8, "big", signed=True)
        old += head + zlib.crc32(head).to_bytes(4, "big")
    path.write_bytes(old)
    ttl = ExpiryFile(str(path))
    assert ttl.expires == {m: 1000 + i for i, m in enumerate(IDS)}
    assert path.read_bytes().startswith(records.FILE_MAGIC)
    ttl.add(b"\x09" * 16, 5)
    ttl.close()
    assert len(ExpiryFile(str(path)).expires) == 6
    for msg_id in [*IDS, b"\x09" * 16]:
        ttl.pop(msg_id)
    assert not path.exists()  # gone with the last TTL


class _Health:
    last_error: str | None = None
