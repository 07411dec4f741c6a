"""Admin changes a worker missed: a topic or channel deleted, emptied, paused or unpaused in the
group while a worker was down (killed, not yet started again) is written to that worker's
`worker-K.missed` in the group's --data-path, and the worker makes it at its next start, once
its partition is loaded and before it reports its state to the supervisor. Without it the
worker's nsqd.dat, written before the change, brought a deleted topic or channel back (with its
disk queue's messages) and registered it again with nsqlookupd, an emptied queue kept that
worker's messages, and a pause was lost, where one nsqd's change holds.

A down worker's topics and channels are what its next start loads (partition.py: its
nsqd.dat, and the disk queues made just before a kill -9 that nsqd.dat does not list yet): a
change of one that only a down worker holds (its partition alone got publishes into it) is
answered 200, as one nsqd holding it would, and written for that worker.

Who gets a line: a peer that is down (no link file, or its private HTTP refused the
connection: the request never reached it), checked again under the file's lock; and for a
pause or an unpause, a peer that did not answer within ASK_TIMEOUT (hung: the watchdog may
kill it before it serves the request). A deletion or an empty is waited for in each peer that
is up (fanout.PATIENT: served late, after the answer, it would remove what that peer took
since): a peer whose connection broke meanwhile (killed: the watchdog's, a crash) or that did
not answer it at all is down, and gets the line under the lock, or is up again (started anew,
another address) and is asked again, waited for in turn.

The file holds the lines not yet made, in the order they were written: no clock decides what
applies. Every access holds the file's flock: a peer appends under it (after checking the
worker is still down: a worker opens its private listener before it reads its file, so a
line written under the lock while nothing listens there is read at that start); the worker's
start makes the lines, writes nsqd.dat and removes the file under it; a worker that serves a
peer's request late (or answers it as overruled by a newer change here: pause_clock.py) drops
the pending lines that request supersedes (the same change, or an
older one of the same kind on that queue: one left would be made again at its next start,
over what came since); and one that makes a topic or channel anew drops the pending deletion
of it, which it made already (the peer wrote the line after the late serve: `remade`). A
waiter whose file was removed meanwhile opens the new one.

A line is one record of the record log all our files use (storage/records.py: checksummed; a
damaged record is skipped with a log line); its payload is the JSON [action, topic,
channel-or-null]. A line of an earlier version ([time, action, topic, channel], kept after
the start that made it until a start found none newer than nsqd.dat) is skipped: a group is
stopped with its workers running, so such a line was made."""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING

import trio

from ..engine.api import Refused
from ..log import log
from ..storage import atomic, metadata, records
from . import partition
from .identity import link_address
from .kept import ASK_ERRORS

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..http.v1 import Request
    from .identity import Identity

Change = tuple[str, str, str | None]  # action, topic, channel
Peer = tuple[str, int]  # a peer's private HTTP address

_TRIES = 8  # opens of a file its worker removed meanwhile (each a start or a late serve)
PROBE_TIMEOUT = 0.5  # seconds a connect to a peer's private HTTP may take under the lock


def _delete(broker: Broker, topic: str, channel: str | None) -> None:
    if channel is None:
        broker.delete_topic(topic)
    else:
        broker.remove_channel(topic, channel)


# action -> (what it makes at the start, whether a peer that did not answer gets the line,
# its kind: a served change drops the pending lines of its kind on its queue)
ACTIONS: dict[str, tuple[Callable[[Broker, str, str | None], None], bool, str]] = {
    "delete": (_delete, True, "delete"),
    "empty": (lambda broker, topic, channel: broker.empty(topic, channel), False, "empty"),
    "pause": (lambda broker, topic, channel: broker.pause(topic, channel, True), True, "pause"),
    "unpause": (lambda broker, topic, channel: broker.pause(topic, channel, False), True, "pause"),
}


# the admin paths whose change a peer that missed it makes at its next start: the action, and
# whether the path names a channel
PATHS = {
    f"/{kind}/{action}": (action, kind == "channel")
    for kind in ("topic", "channel")
    for action in ("delete", "empty", "pause", "unpause")
}


def change_of(req: Request) -> Change | None:
    """The change an admin request makes (None: one no peer needs to make later)."""
    found = PATHS.get(req.path)
    if found is None:
        return None
    action, names_channel = found
    return action, req.arg("topic") or "", req.arg("channel") if names_channel else None


def file_of(group_path: str, index: int) -> str:
    return os.path.join(group_path, f"worker-{index}.missed")


def on_disk(data_path: str, change: Change) -> bool:
    """Whether a down worker's partition holds the topic, or the channel, that `change` names,
    as its next start loads it (partition.py: nsqd.dat, and the disk queues it lacks)."""
    _, topic, channel = change
    try:
        return (topic, channel) in partition.held(data_path)
    except metadata.MetadataError as exc:  # its start refuses it too, in nsqd's words
        log.warning("group: %s: %s", data_path, exc)
        return False


def refused(address: Peer | None) -> bool:
    """Whether nothing listens at a peer's private HTTP (None: no link file): it is down."""
    if address is None:
        return True
    try:
        socket.create_connection(address, PROBE_TIMEOUT).close()
    except ConnectionRefusedError:
        return True
    except OSError:  # slow or odd, but not surely down
        return False
    return False


def superseded(served: Change, pending: Change) -> bool:
    """Whether a pending line is made moot by a change the worker served since it was written:
    the same kind on the same queue, or any line under a queue it deleted."""
    action, topic, channel = served
    if pending[1] != topic:
        return False
    if action == "delete" and (channel is None or pending[2] == channel):
        return True
    return pending[2] == channel and ACTIONS[pending[0]][2] == ACTIONS[action][2]


@contextmanager
def _locked(path: str, create: bool) -> Iterator[int | None]:
    """The file at `path`, open and flocked (None: there is none and `create` is false). A
    file removed (or replaced) while this waited for its lock is opened again."""
    flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    for _ in range(_TRIES):
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink:  # still the file at `path`
                yield fd
                return
        finally:
            os.close(fd)  # the lock goes with it
    raise OSError(f"{path}: removed {_TRIES} times while waiting for its lock")


def record(path: str, change: Change, down: Callable[[], bool] | None = None) -> bool:
    """Add one to a worker's file, synced (the change's answer says it holds), if `down()`
    says, under the lock, that the worker is still down; whether it was written."""
    payload = _payload(change)
    with _locked(path, create=True) as fd:
        assert fd is not None
        new = os.fstat(fd).st_size == 0
        if down is not None and not down():
            if new:  # made by this open: nothing pending
                os.unlink(path)
            return False
        os.lseek(fd, 0, os.SEEK_END)
        atomic.write_all(fd, (records.FILE_MAGIC if new else b"") + records.frame(payload))
        os.fsync(fd)
        if new:
            atomic.fsync_dir(os.path.dirname(path))
    return True


def _payload(change: Change) -> bytes:
    return json.dumps(list(change), separators=(",", ":")).encode()


def _read(fd: int, path: str) -> list[Change]:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    found: list[Change] = []
    for payload in records.read(b"".join(chunks), path).payloads:  # damaged ones skipped, logged
        try:
            line = json.loads(payload)
            if len(line) == 4:  # an earlier version's [time, ...]: made at the start after it
                log.info("group: %s: an earlier version's record, made then: %r", path, line)
                continue
            action, topic, channel = line
            ACTIONS[action]
            found.append((action, str(topic), None if channel is None else str(channel)))
        except (ValueError, TypeError, KeyError):  # intact but not ours to read: logged, left
            log.warning("group: %s: a record that is not a change: %r", path, payload[:100])
    return found


def read(path: str) -> list[Change]:
    """The lines pending in a worker's file."""
    with _locked(path, create=False) as fd:
        return [] if fd is None else _read(fd, path)


def make(path: str, broker: Broker, persist: Callable[[], None]) -> bool:
    """At a worker's start, after its partition is loaded (its private listener open): the
    pending lines made here in their order, then nsqd.dat written (`persist`) and the file
    removed. A crash before the removal makes them again at the next start, over the same
    state: nothing was served in between. Whether there was a file."""
    with _locked(path, create=False) as fd:
        if fd is None:
            return False
        for action, topic, channel in _read(fd, path):
            name = topic if channel is None else f"{topic}:{channel}"
            log.info("group: %s: %s made while this worker was down", name, action)
            try:
                ACTIONS[action][0](broker, topic, channel)
            except Refused as exc:  # not here (deleted since, or never published here)
                log.info("group: %s: %s not made - %s", name, action, exc)
        persist()
        os.unlink(path)
        atomic.fsync_dir(os.path.dirname(path))
    return True


def served(path: str, change: Change) -> None:
    """A peer's request for `change` served here (late: the peer may have written it down for
    this worker meanwhile): the pending lines it supersedes are dropped."""
    _drop(path, lambda pending: [line for line in pending if not superseded(change, line)])


def remade(path: str, topic: str, channel: str | None) -> None:
    """A topic or channel made anew here while this worker runs (not restored at its start):
    a worker that held it would not make it, so a pending deletion of it was made here already
    (served before the peer that saw no answer wrote the line) or had nothing here to delete.
    Its lines up to its last pending deletion go (for a topic, its channels' too): left, the
    next start deleted the queue made since, with what was published into it. A line after
    that deletion (a pause of the queue made again in the group) stays. One stat when there
    is no file; otherwise made before the creation is answered (a kill -9 right after it must
    not find the line)."""
    if not os.path.exists(path):
        return
    made = ("delete", topic, channel)

    def kept(pending: list[Change]) -> list[Change]:
        under = [superseded(made, line) for line in pending]
        deleted = [i for i, line in enumerate(pending) if under[i] and line[0] == "delete"]
        last = deleted[-1] if deleted else -1
        return [line for i, line in enumerate(pending) if i > last or not under[i]]

    _drop(path, kept)


def _drop(path: str, kept: Callable[[list[Change]], list[Change]]) -> None:
    """The pending lines `kept` leaves written back (the file removed when none is left)."""
    with _locked(path, create=False) as fd:
        if fd is None:
            return
        pending = _read(fd, path)
        left = kept(pending)
        if len(left) == len(pending):
            return
        if left:
            frames = [records.frame(_payload(line)) for line in left]
            atomic.replace_file(path, [records.FILE_MAGIC, *frames], 0o600)
        else:
            os.unlink(path)
            atomic.fsync_dir(os.path.dirname(path))


class Missed:
    """A worker's side of its peers' files: after it made a change and asked every peer, each
    peer that missed it gets a line (and a peer that came up meanwhile the request again);
    when a peer asks a change of it, the lines it supersedes in its own file go."""

    def __init__(
        self,
        identity: Identity,
        ask: Callable[..., Awaitable[tuple[int, bytes]]],
        timeout: float,
    ) -> None:
        self.identity = identity
        self._ask = ask  # one request to a peer's private HTTP (FanOut.ask)
        self._timeout = timeout

    def _address(self, peer: int) -> Peer | None:
        return link_address(self.identity.link_file(peer), 1)

    def _refused(self, peer: int) -> bool:
        return refused(self._address(peer))

    def index_of(self, address: Peer) -> int | None:
        """The peer whose link file names `address` now (None: none does)."""
        return next((p for p in self.identity.peers if self._address(p) == address), None)

    async def written(
        self,
        change: Change,
        request: tuple[str, bytes],
        held: bool,
        answered: set[Peer],
        unreachable: set[Peer],
        *,
        patient: bool = False,
    ) -> bool:
        """Whether the group held what `change` names: `held` (here, or in a peer that answered
        200), or the partition of a down peer; if so, each peer that missed it gets a line.
        `patient` (fanout.PATIENT): every peer was waited for, so one that did not answer (at
        the address it has now) is down, or was (started again since)."""
        me = self.identity
        addresses = {peer: self._address(peer) for peer in me.peers}
        gone = {a for a in addresses.values() if a not in answered} if patient else unreachable
        down = [p for p, address in addresses.items() if address is None or address in gone]
        for peer in down if not held else ():
            data_path = os.path.join(me.group_path, f"worker-{peer}")
            held = await trio.to_thread.run_sync(on_disk, data_path, change)
            if held:
                break
        if not held:
            return False
        for peer, address in addresses.items():
            path = file_of(me.group_path, peer)
            if peer in down:
                if await self._reached(peer, path, change, request, patient):
                    continue
            elif address in answered:
                continue
            if ACTIONS[change[0]][1]:  # a hung peer may be killed before it serves it
                await trio.to_thread.run_sync(record, path, change)
        return True

    async def _reached(
        self, peer: int, path: str, change: Change, request: tuple[str, bytes], patient: bool
    ) -> bool:
        """A down peer told of `change`: a line while it is still down (checked under the
        lock), else the request asked again (up now: its listener takes it); whether either
        held. A patient change's peer lost again meanwhile (killed while asked) is tried
        again, a few times (each is one of its starts)."""
        for _ in range(_TRIES if patient else 1):
            still_down = partial(self._refused, peer)
            if await trio.to_thread.run_sync(record, path, change, still_down):
                return True
            if await self._again(peer, request, patient):
                return True
        if patient:
            method, target = request
            what = f"{method} {target.decode(errors='replace')}"
            log.error("group: worker %d neither down nor answering %s", peer, what)
        return False

    async def _again(self, peer: int, request: tuple[str, bytes], patient: bool) -> bool:
        """The request asked of a peer that came up since: whether it answered (`patient`:
        waited for until it answers or its connection breaks)."""
        address = self._address(peer)
        if address is None:
            return False
        try:
            if patient:
                await self._ask(address, *request, patient=True)
            else:
                with trio.fail_after(self._timeout):
                    await self._ask(address, *request)
        except ASK_ERRORS as exc:
            log.warning("group: peer %s:%d did not answer %s - %s", *address, request[1], exc)
            return False
        return True

    async def served(self, change: Change) -> None:
        """A peer asked `change` of this worker, which made it (or had nothing to make)."""
        path = file_of(self.identity.group_path, self.identity.index)
        await trio.to_thread.run_sync(served, path, change)
