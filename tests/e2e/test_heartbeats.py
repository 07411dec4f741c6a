"""Heartbeats on the wire: `_heartbeat_` about every interval, silence closes, NOP keeps alive.

The three scenarios run side by side on one daemon (IDENTIFY heartbeat_interval=1000) to keep
the wall time at one scenario's length."""

from __future__ import annotations

import itertools

import trio

from protocol.v2 import FrameType

from .conftest import Daemon
from .wire import HEARTBEAT, Conn, ConnectionClosed

WINDOW = 3.5  # seconds: about three heartbeats


async def _identified(daemon: Daemon) -> tuple[Conn, float]:
    conn = await Conn.open(daemon.addr, answer_heartbeats=False)
    await conn.identify(heartbeat_interval=1000)
    return conn, trio.current_time()


async def answering_with_nop_stays_open(daemon: Daemon) -> None:
    conn, start = await _identified(daemon)
    async with conn:
        beats: list[float] = []
        with trio.move_on_after(WINDOW):
            while True:
                frame = await conn.read_frame(3)
                assert (frame.frame_type, frame.data) == (FrameType.RESPONSE, HEARTBEAT), frame
                beats.append(trio.current_time() - start)
                await conn.cmd("NOP")
        assert len(beats) >= 3, beats
        assert 0.5 <= beats[0] <= 1.6, beats
        gaps = [b - a for a, b in itertools.pairwise(beats)]
        assert all(0.6 <= g <= 1.6 for g in gaps), beats
        await conn.expect_open()


async def silent_client_is_closed(daemon: Daemon) -> None:
    conn, start = await _identified(daemon)
    async with conn:
        beats = 0
        with trio.fail_after(WINDOW + 1):
            try:
                while True:
                    frame = await conn.read_frame(WINDOW + 1)
                    # only heartbeats: the close comes without an error frame
                    assert (frame.frame_type, frame.data) == (FrameType.RESPONSE, HEARTBEAT)
                    beats += 1
            except ConnectionClosed:
                pass
        closed_after = trio.current_time() - start
        assert beats >= 1
        assert 1.7 <= closed_after <= 3.5, closed_after


async def subscriber_answering_with_rdy_stays_open(daemon: Daemon, topic: str) -> None:
    """A consumer gets heartbeats too, and any command (here RDY) resets the read deadline."""
    conn, _ = await _identified(daemon)
    async with conn:
        await conn.sub(topic, "ch", rdy=0)
        beats = 0
        with trio.move_on_after(WINDOW):
            while True:
                frame = await conn.read_frame(3)
                assert frame.data == HEARTBEAT, frame
                beats += 1
                await conn.rdy(1)
        assert beats >= 3
        conn.answer_heartbeats = True
        async with await Conn.open(daemon.addr) as producer:
            await producer.pub(topic, b"after heartbeats")
        msg = await conn.expect_message()
        assert msg.body == b"after heartbeats"


async def test_heartbeats(daemon: Daemon, topic: str) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answering_with_nop_stays_open, daemon)
        nursery.start_soon(silent_client_is_closed, daemon)
        nursery.start_soon(subscriber_answering_with_rdy_stays_open, daemon, topic)
