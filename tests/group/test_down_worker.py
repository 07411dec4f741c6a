"""A group's admin changes made while a worker is down (killed, not yet started again): once
it is back the group answers as one nsqd would have after the same change. A topic or channel
deleted meanwhile stays deleted (its partition's nsqd.dat still lists it), in the group's
/stats and in nsqlookupd; one emptied meanwhile (here by nsqadmin) holds none of the
messages that worker had. The worker is held down by stopping the supervisor (SIGSTOP), so
the change is made while it is surely down, then the supervisor goes on and starts it again."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.ops.conftest import (  # noqa: F401 (a fixture)
    START_TIMEOUT,
    Launcher,
    http_json,
    http_post,
    launcher,
    port_open,
    wait_until,
)
from tests.ops.test_lookupd import WAIT

from .conftest import Group
from .test_lookupd import rows


def _while_down(group: Group, change: Callable[[], None]) -> None:
    """`change` made while worker 1 is down; returns once it is back (listening again)."""
    assert group.proc is not None
    before, link = group.pids()[1], group.link(1)
    group.proc.send_signal(signal.SIGSTOP)  # it starts nobody again until SIGCONT
    try:
        os.kill(before, signal.SIGKILL)
        # its sockets closed: no connection to the shared ports lands in its listener now
        wait_until(lambda: not port_open(link), START_TIMEOUT, "worker 1 gone")
        change()
    finally:
        group.proc.send_signal(signal.SIGCONT)
    listened = group.listened(1)
    wait_until(lambda: group.listened(1) > listened, START_TIMEOUT, "worker 1 back")
    assert group.pids()[1] != before


def _on_disk(group: Group, k: int) -> dict[str, list[str]]:
    """Worker k's nsqd.dat: what a kill -9 of it keeps (written soon after each change)."""
    doc = json.loads((group.data / f"worker-{k}" / "nsqd.dat").read_bytes())
    found = doc["topics"] or []
    return {t["name"]: sorted(c["name"] for c in t["channels"] or []) for t in found}


def _depths(stats: dict) -> dict[str, int]:
    found = {}
    for topic in stats["topics"]:
        found[topic["topic_name"]] = topic["depth"]
        for channel in topic["channels"]:
            found[f"{topic['topic_name']}:{channel['channel_name']}"] = channel["depth"]
    return found


def _queues(stats: dict) -> dict[str, list[str]]:
    topics = stats["topics"]
    return {t["topic_name"]: sorted(c["channel_name"] for c in t["channels"]) for t in topics}


def test_a_deletion_made_while_a_worker_is_down_holds_once_it_is_back(
    launcher: Launcher,  # noqa: F811
    group: Group,
) -> None:
    lookupd = launcher.nsqlookupd()
    group.start(f"--lookupd-tcp-address={lookupd.addr('tcp')}", "--broadcast-address=127.0.0.1")
    url = f"http://127.0.0.1:{group.http}"
    for target in ("topic/create?topic=gone", "topic/create?topic=kept"):
        assert http_post(f"{url}/{target}")[0] == 200
    assert http_post(f"{url}/channel/create?topic=kept&channel=c")[0] == 200
    assert http_post(f"{url}/channel/create?topic=kept&channel=d")[0] == 200
    with group.pin(1) as pub:  # worker 1's partition holds messages of both
        pub.pub("gone", b"x")
        pub.pub("kept", b"y")
    wanted = {"client::": 1, "topic:gone:": 1, "topic:kept:": 1, "channel:kept:c": 1}
    wanted["channel:kept:d"] = 1
    wait_until(lambda: rows(lookupd) == wanted, WAIT, "registered")

    wanted_disk = {"gone": [], "kept": ["c", "d"]}
    wait_until(lambda: _on_disk(group, 1) == wanted_disk, WAIT, "worker 1's nsqd.dat")

    def delete() -> None:
        assert http_post(f"{url}/topic/delete?topic=gone")[0] == 200
        assert http_post(f"{url}/channel/delete?topic=kept&channel=c")[0] == 200

    _while_down(group, delete)
    expected = {"kept": ["d"]}
    assert _queues(group.worker_stats(1)) == expected  # not back from its nsqd.dat
    assert _queues(http_json(f"{url}/stats?format=json")) == expected
    wanted = {"client::": 1, "topic:kept:": 1, "channel:kept:d": 1}
    wait_until(lambda: rows(lookupd) == wanted, WAIT, "unregistered")
    # and at worker 1's next start: what it deleted is off its disk too
    listened = group.listened(1)
    os.kill(group.pids()[1], signal.SIGKILL)
    wait_until(lambda: group.listened(1) > listened, START_TIMEOUT, "worker 1 back again")
    assert _queues(group.worker_stats(1)) == expected
    assert rows(lookupd) == wanted
    assert not (group.data / "worker-1.missed").exists()  # made, and older than its nsqd.dat


def test_an_empty_made_while_a_worker_is_down_holds_once_it_is_back(
    launcher: Launcher,  # noqa: F811
    group: Group,
) -> None:
    lookupd = launcher.nsqlookupd()
    flags = ("--mem-queue-size=0", "--broadcast-address=127.0.0.1")  # on disk: kill -9 keeps it
    group.start(f"--lookupd-tcp-address={lookupd.addr('tcp')}", *flags)
    admin = launcher.nsqadmin(lookupd)
    url = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{url}/topic/create?topic=lone")[0] == 200
    assert http_post(f"{url}/topic/create?topic=t")[0] == 200
    assert http_post(f"{url}/channel/create?topic=t&channel=c")[0] == 200
    for k in (0, 1):
        with group.pin(k) as pub:
            pub.pub("lone", b"x")
            pub.pub("t", b"y")
    wait_until(lambda: _on_disk(group, 1) == {"lone": [], "t": ["c"]}, WAIT, "worker 1's nsqd.dat")
    registered = {"client::": 1, "topic:lone:": 1, "topic:t:": 1, "channel:t:c": 1}
    wait_until(lambda: rows(lookupd) == registered, WAIT, "registered")  # nsqadmin asks there
    wanted = {"lone": 2, "t": 0, "t:c": 2}
    assert _depths(http_json(f"{url}/stats?format=json")) == wanted

    def empty() -> None:  # nsqadmin asks nsqlookupd for the producers, then the group
        for path in ("topics/lone", "topics/t/c"):
            body = json.dumps({"action": "empty"}).encode()
            req = urllib.request.Request(
                f"http://{admin.addr('http')}/api/{path}", data=body, method="POST"
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status == 200

    _while_down(group, empty)
    assert _depths(group.worker_stats(1)) == {"lone": 0, "t": 0, "t:c": 0}
    assert _depths(http_json(f"{url}/stats?format=json")) == {"lone": 0, "t": 0, "t:c": 0}


def _only_in_worker_1(group: Group) -> None:
    """Topic `solo` (published in worker 1 alone) and channel `t:c` (made in worker 1 alone;
    topic t is in both), each with a message, on worker 1's disk."""
    with group.pin(0) as pub:
        pub.pub("t", b"z")
    assert group.post(1, "topic/create?topic=t") == 200
    assert group.post(1, "channel/create?topic=t&channel=c") == 200
    with group.pin(1) as pub:
        pub.pub("solo", b"x")
        pub.pub("t", b"y")
    wait_until(lambda: _on_disk(group, 1) == {"solo": [], "t": ["c"]}, WAIT, "worker 1's nsqd.dat")
    # topic t handed y to channel c, and says so on disk (--sync-timeout's 2 s at most): a
    # kill -9 before that reads y again at the next start, into c after an empty made there
    wait_until(lambda: _handed_on(group, 1, "t"), WAIT, "worker 1's t.diskqueue.meta.dat")
    assert _queues(group.worker_stats(0)) == {"t": []}


def _handed_on(group: Group, k: int, topic: str) -> bool:
    """Worker k's disk queue of `topic` has read all it wrote, as its synced metadata says
    (or it never wrote: a topic with a channel and no hold hands messages on in memory)."""
    data = group.data / f"worker-{k}"
    meta = data / f"{topic}.diskqueue.meta.dat"
    if not meta.exists():
        return not any(data.glob(f"{topic}.diskqueue.[0-9]*.dat"))
    depth, read, write = meta.read_text().split()
    num, pos = (int(x) for x in write.split(","))
    written = data / f"{topic}.diskqueue.{num:06d}.dat"
    size = written.stat().st_size if written.exists() else 0
    return depth == "0" and read == write and size == pos


def test_a_queue_only_a_down_worker_holds_is_deleted_and_stays_deleted(
    group: Group,
) -> None:
    """One nsqd holding a topic or channel deletes it: the group does too when only a down
    worker's partition holds it (its nsqd.dat), answering 200, and the worker deletes it at
    its next start. A topic nobody holds is still 404, in nsqd's bytes."""
    group.start("--mem-queue-size=0")
    url = f"http://127.0.0.1:{group.http}"
    _only_in_worker_1(group)
    answers = {}

    def delete() -> None:
        for target in ("topic/delete?topic=solo", "channel/delete?topic=t&channel=c"):
            answers[target] = http_post(f"{url}/{target}")
        answers["nowhere"] = http_post(f"{url}/topic/delete?topic=nowhere")
        answers["no channel"] = http_post(f"{url}/channel/delete?topic=t&channel=none")

    _while_down(group, delete)
    assert answers["topic/delete?topic=solo"] == (200, b"")
    assert answers["channel/delete?topic=t&channel=c"] == (200, b"")
    assert answers["nowhere"] == (404, b'{"message":"TOPIC_NOT_FOUND"}')
    assert answers["no channel"] == (404, b'{"message":"CHANNEL_NOT_FOUND"}')
    assert _queues(group.worker_stats(1)) == {"t": []}  # not back from its nsqd.dat
    assert _queues(http_json(f"{url}/stats?format=json")) == {"t": []}
    assert _on_disk(group, 1) == {"t": []}
    assert not (group.data / "worker-1.missed").exists()  # made, nsqd.dat written, removed
    listened = group.listened(1)
    os.kill(group.pids()[1], signal.SIGKILL)  # and at its next start too
    wait_until(lambda: group.listened(1) > listened, START_TIMEOUT, "worker 1 back again")
    assert _queues(group.worker_stats(1)) == {"t": []}


def test_an_empty_or_pause_of_a_queue_only_a_down_worker_holds_holds(group: Group) -> None:
    """Empty, pause and unpause have the same hole: each answers 200 for a queue only a down
    worker holds, and the worker makes it at its next start, in the order they were made."""
    group.start("--mem-queue-size=0")
    url = f"http://127.0.0.1:{group.http}"
    _only_in_worker_1(group)
    assert _depths(group.worker_stats(1)) == {"solo": 1, "t": 0, "t:c": 1}
    targets = ["topic/empty?topic=solo", "channel/empty?topic=t&channel=c"]
    targets += ["topic/pause?topic=solo", "channel/pause?topic=t&channel=c"]
    targets += ["channel/unpause?topic=t&channel=c"]
    statuses = []
    _while_down(group, lambda: statuses.extend(http_post(f"{url}/{t}")[0] for t in targets))
    assert statuses == [200] * len(targets)
    stats = group.worker_stats(1)
    assert _depths(stats) == {"solo": 0, "t": 0, "t:c": 0}
    topics = {t["topic_name"]: t for t in stats["topics"]}
    assert topics["solo"]["paused"] is True
    assert topics["t"]["channels"][0]["paused"] is False  # paused, then unpaused


def test_a_clock_step_does_not_drop_a_missed_deletion(group: Group) -> None:
    """What a down worker makes at its start is what its file holds, whatever the clock did:
    its nsqd.dat's time an hour ahead of the deletion (a clock stepped back an hour since it
    was written) lost the deletion when the times were compared."""
    group.start()
    url = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{url}/topic/create?topic=gone")[0] == 200
    wait_until(lambda: _on_disk(group, 1) == {"gone": []}, WAIT, "worker 1's nsqd.dat")

    def delete() -> None:
        assert http_post(f"{url}/topic/delete?topic=gone")[0] == 200
        dat = group.data / "worker-1" / "nsqd.dat"
        ahead = time.time_ns() + 3600 * 10**9
        os.utime(dat, ns=(ahead, ahead))

    _while_down(group, delete)
    assert _queues(group.worker_stats(1)) == {}


def test_a_pause_a_hung_worker_serves_late_is_not_made_again(group: Group) -> None:
    """A worker that does not answer a pause in time (stopped: hung) gets a line, since the
    watchdog may kill it before it serves the request; when it serves it late, the line goes,
    so its next start does not make it again over what came since. (A deletion or an empty
    is not answered before such a worker served it: test_late_change.py.)"""
    group.start()
    url = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{url}/topic/create?topic=t")[0] == 200
    missed_file = group.data / "worker-1.missed"
    assert group.proc is not None
    group.proc.send_signal(signal.SIGSTOP)  # no watchdog meanwhile
    os.kill(group.pids()[1], signal.SIGSTOP)
    try:
        # worker 0's private HTTP without the peer header: the group's answer, after worker
        # 1's 2 s (the shared port could land in stopped worker 1)
        assert http_post(f"http://{group.private_http(0)}/topic/pause?topic=t")[0] == 200
        assert missed_file.exists()
    finally:
        os.kill(group.pids()[1], signal.SIGCONT)
        group.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: not missed_file.exists(), WAIT, "the line dropped by the late serve")
    topics = group.worker_stats(1, "&topic=t")["topics"]
    assert [(t["topic_name"], t["paused"]) for t in topics] == [("t", True)]


def _message(sock: socket.socket) -> bytes:
    """One HTTP message read whole (its head, then Content-Length bytes); b"" at the end."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head = data.partition(b"\r\n\r\n")[0]
    fields = dict(line.partition(b":")[::2] for line in head.split(b"\r\n")[1:])
    length = int({k.strip().lower(): v for k, v in fields.items()}.get(b"content-length", 0))
    while len(data) - len(head) - 4 < length:
        chunk = sock.recv(65536)
        if not chunk:
            return b""
        data += chunk
    return data


class _Unanswered:
    """A relay put in place of worker k's private HTTP in its link file: requests go through
    and answers come back, but for a request whose first line holds `drop` the worker's answer
    is read and not passed on (the connection closed). The worker made the change, and the
    peer that asked saw no answer and wrote the worker's line after it was served: what a
    worker that answered a pause just past the peer's ASK_TIMEOUT leaves, or one whose answers
    to a deletion were lost each time the peer asked it again (missed.py: a few tries)."""

    def __init__(self, group: Group, k: int, drop: bytes) -> None:
        self.link = group.data / f"worker-{k}.link"
        self.text = self.link.read_text()
        host, _, port = self.text.split()[1].rpartition(":")
        self.upstream, self.drop = (host, int(port)), drop
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.closing = False
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> _Unanswered:
        self.thread.start()
        relay = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self._write(f"{self.text.split()[0]}\n{relay}\n")
        return self

    def __exit__(self, *exc: object) -> None:
        self._write(self.text)
        self.closing = True
        self.thread.join(5)
        self.listener.close()

    def _write(self, text: str) -> None:  # whole, then renamed, as the worker writes it
        tmp = self.link.with_name(self.link.name + ".relay")
        tmp.write_text(text)
        os.replace(tmp, self.link)

    def _accept(self) -> None:
        while not self.closing:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        with conn, socket.create_connection(self.upstream, 5) as up:
            conn.settimeout(5)
            while request := _message(conn):
                up.sendall(request)
                answer = _message(up)
                if self.drop in request.partition(b"\r\n")[0]:
                    return
                conn.sendall(answer)


def test_a_deletion_served_before_its_line_was_written_spares_the_queue_made_again(
    group: Group,
) -> None:
    """A worker that served a deletion but whose answer the asking peer did not see gets its
    line after it made the change: nothing serves it late to drop it. A topic, or a channel,
    made again in that worker since (a client published to it there) was deleted at its next
    start, with the messages published into it after the deletion. Making a queue anew drops
    the pending deletion of it (that worker had already made it)."""
    group.start("--mem-queue-size=0")
    url = f"http://127.0.0.1:{group.http}"
    for target in ("topic/create?topic=t", "topic/create?topic=u"):
        assert http_post(f"{url}/{target}")[0] == 200
    assert http_post(f"{url}/channel/create?topic=u&channel=c")[0] == 200
    missed_file = group.data / "worker-1.missed"
    with _Unanswered(group, 1, b"/delete?"):
        for target in ("topic/delete?topic=t", "channel/delete?topic=u&channel=c"):
            # worker 0's private HTTP without the peer header: the group's answer
            assert http_post(f"http://{group.private_http(0)}/{target}")[0] == 200
    from nsqd.group import missed

    pending = missed.read(str(missed_file))
    assert pending == [("delete", "t", None), ("delete", "u", "c")]
    assert _queues(group.worker_stats(1)) == {"u": []}  # served: made there
    assert http_post(f"{url}/channel/create?topic=u&channel=c")[0] == 200
    with group.pin(1) as pub:
        pub.pub("t", b"again")
        pub.pub("u", b"again")
    assert not missed_file.exists()
    wait_until(lambda: _on_disk(group, 1) == {"t": [], "u": ["c"]}, WAIT, "worker 1's nsqd.dat")
    listened = group.listened(1)
    os.kill(group.pids()[1], signal.SIGKILL)
    wait_until(lambda: group.listened(1) > listened, START_TIMEOUT, "worker 1 back")
    assert _depths(group.worker_stats(1)) == {"t": 1, "u": 0, "u:c": 1}


def test_a_queue_made_just_before_a_kill_9_is_held_while_down_and_after(group: Group) -> None:
    """A topic or channel made in a worker a moment before a kill -9 of it, before its
    nsqd.dat listed it (written just after the PUB's answer), is the group's as one nsqd's
    until deleted: a delete of it while that worker is down answers 200 (it answered 404), and
    its start makes it from its disk queue's files, so it is in /stats with its message (it
    was not), and a deleted one does not bring its message back when its name is made again
    (it did). The window is a few ms: the test puts back the nsqd.dat the worker wrote before
    the queues were made, with its time, which is what a kill -9 in that window leaves."""
    group.start("--mem-queue-size=0")
    url = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{url}/topic/create?topic=t")[0] == 200
    wait_until(lambda: _on_disk(group, 1) == {"t": []}, WAIT, "worker 1's nsqd.dat")
    dat = group.data / "worker-1" / "nsqd.dat"
    before, written = dat.read_bytes(), dat.stat()
    assert group.post(1, "channel/create?topic=t&channel=c") == 200  # in worker 1 alone
    with group.pin(1) as pub:
        for topic in ("gone", "kept", "t"):
            pub.pub(topic, b"x")
    lists = {"gone": [], "kept": [], "t": ["c"]}
    wait_until(lambda: _on_disk(group, 1) == lists, WAIT, "worker 1's nsqd.dat")
    answers = {}

    def delete() -> None:
        dat.write_bytes(before)
        os.utime(dat, ns=(written.st_atime_ns, written.st_mtime_ns))
        answers["gone"] = http_post(f"{url}/topic/delete?topic=gone")
        answers["t:c"] = http_post(f"{url}/channel/delete?topic=t&channel=c")

    _while_down(group, delete)
    assert answers == {"gone": (200, b""), "t:c": (200, b"")}
    assert _depths(group.worker_stats(1)) == {"kept": 1, "t": 0}
    assert not list((group.data / "worker-1").glob("gone.diskqueue.*"))
    with group.pin(1) as pub:
        pub.pub("gone", b"again")
    assert _depths(group.worker_stats(1)) == {"gone": 1, "kept": 1, "t": 0}


def test_a_damaged_missed_record_is_skipped_alone(tmp_path: Path) -> None:
    """worker-K.missed is a record log of ours (storage/records.py): a flipped byte in one
    record loses that record alone, with a log line; the records after it are still made."""
    from nsqd.group import missed

    path = str(tmp_path / "worker-1.missed")
    for topic in ("first", "second", "third"):
        missed.record(path, ("delete", topic, None))
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[data.index(b"second")] ^= 0x01  # inside the second record's payload
    with open(path, "wb") as f:
        f.write(bytes(data))
    assert [change[1] for change in missed.read(path)] == ["first", "third"]
