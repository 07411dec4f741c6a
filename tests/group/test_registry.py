"""The group's nsqlookupd registrations (nsqd.group.lookupd.Registry), without sockets: the
union of the workers' topics and channels, and the commands each change sends (a topic or
channel registered when its first worker has it, unregistered when its last lost it; a
worker's whole state at its start changes only what differs)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import trio

from nsqd.config.options import Options
from nsqd.engine.broker import Broker
from nsqd.engine.queue import DropOverflow
from nsqd.engine.settings import Settings
from nsqd.group.lookupd import GroupLookupd, Registry, Uplink
from protocol.lookup import encode_register as reg
from protocol.lookup import encode_unregister as unreg


def test_first_registers_and_last_unregisters() -> None:
    r = Registry()
    assert r.register(0, "t") == [reg("t")]
    assert r.register(1, "t") == []
    assert r.register(0, "t", "c") == [reg("t", "c")]
    assert r.register(1, "t", "c") == []
    assert r.register(1, "t", "c") == []  # told twice: still one worker's
    assert r.unregister(0, "t", "c") == []
    assert r.unregister(1, "t", "c") == [unreg("t", "c")]
    assert r.unregister(1, "t", "c") == []  # not there any more
    assert r.unregister(0, "t") == []
    assert r.unregister(1, "t") == [unreg("t")]
    assert r.union() == {}


def test_a_channel_brings_its_topic() -> None:
    r = Registry()
    assert r.register(2, "t", "c") == [reg("t"), reg("t", "c")]
    assert r.union() == {"t": ["c"]}


def test_a_topic_deleted_in_one_worker_keeps_the_channels_another_has() -> None:
    r = Registry()
    r.register(0, "t", "a")
    r.register(0, "t", "b")
    r.register(1, "t", "a")
    # worker 0 lost the topic: its channel b was its alone, the topic and a are worker 1's
    assert r.unregister(0, "t") == [unreg("t", "b")]
    assert r.union() == {"t": ["a"]}
    # the last worker: one UNREGISTER of the topic takes its channels in nsqlookupd
    assert r.unregister(1, "t") == [unreg("t")]


def test_a_workers_state_changes_only_what_differs() -> None:
    r = Registry()
    r.replace(0, {"kept": {"c"}, "gone": set(), "shared": {"x"}})
    r.register(1, "shared", "x")
    commands = r.replace(0, {"kept": {"c", "new"}, "added": set(), "shared": set()})
    assert commands == [reg("kept", "new"), reg("added"), unreg("gone")]
    assert r.union() == {"kept": ["c", "new"], "shared": ["x"], "added": []}
    assert r.replace(0, {"kept": {"c", "new"}, "added": set(), "shared": set()}) == []
    # worker 1 restarted without the channel: worker 0 no longer has it either
    assert r.replace(1, {"shared": set()}) == [unreg("shared", "x")]
    assert r.replace(1, {}) == []  # worker 0 still has the topic
    assert r.replace(0, {}) == [unreg("kept"), unreg("shared"), unreg("added")]
    assert r.union() == {}


async def test_a_worker_started_again_takes_a_set_changed_after_its_first_word(
    tmp_path: Path,
) -> None:
    """The supervisor's side and a restarted worker's, over a real socket pair: the worker's
    first word carries the old addresses (the supervisor had not read the PUT's report yet);
    the report then changes the group's set, and the word that says so is taken too. Once a
    PUT has reached the worker, no word of the supervisor's changes its value."""
    opts = Options()
    opts.values["lookupd_tcp_address"] = ["127.0.0.1:1"]
    async with trio.open_nursery() as nursery:
        broker = Broker(Settings(), lambda name, ephemeral: DropOverflow(), nursery.start_soon)
        group = GroupLookupd(opts)
        await nursery.start(group.run)  # its nsqlookupds (nothing listens: refused, retried)
        supervisor_end, worker_end = socket.socketpair()
        uplink = Uplink(os.dup(worker_end.fileno()), Options(), broker, hello=True)
        worker_end.close()
        nursery.start_soon(group.serve, 1, supervisor_end)
        await nursery.start(uplink.run)
        assert uplink._opts.lookupd_tcp_address == ["127.0.0.1:1"]  # the first word
        group._take(0, ["addresses", ["127.0.0.1:2"]])  # worker 0's report of a PUT
        await trio.sleep(0.3)  # the word over the socket pair
        assert uplink._opts.lookupd_tcp_address == ["127.0.0.1:2"]
        group._tell_workers()  # a word of the same set (a peer's info changed)
        await trio.sleep(0.1)
        assert uplink._opts.lookupd_tcp_address == ["127.0.0.1:2"]
        # a PUT of null reached this worker (its handler set the value, then reported it);
        # the supervisor's word of another change, sent before that PUT, comes after it:
        # the PUT's value stays (a null stays a null)
        uplink._opts.values["lookupd_tcp_address"] = None
        uplink.set_addresses([])
        group._take(0, ["addresses", ["127.0.0.1:3"]])
        await trio.sleep(0.3)
        assert uplink._opts.lookupd_tcp_address is None
        nursery.cancel_scope.cancel()
