"""The bridge both ways, with pynsq: a Redis producer (RPUSH topic:<t>) feeds NSQ consumers,
an NSQ producer feeds Redis consumers (LPOP/RPOP/BLPOP/BLMOVE from channel:<t>:<c>), and a
pop takes and finishes the message (nothing stays in flight or comes back)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
import redis

from tests.e2e.pynsq_harness import Consumer, Publisher, run, settle
from tests.ops.conftest import stats_channel

from .helpers import client

CH = "channel:orders:billing"


def test_redis_producer_feeds_pynsq_consumer(ours) -> None:
    server = ours.start()
    r = client(server.port)

    async def scenario() -> list[bytes]:
        c = Consumer(f"127.0.0.1:{server.tcp_port}", "jobs", "workers", max_in_flight=10)
        await c.start().subscribed()
        assert r.rpush("topic:jobs", "a", "b") == 2
        assert r.lpush("topic:jobs", "c") == 1
        assert r.lmove("local", "topic:jobs", "LEFT", "RIGHT") is None  # empty source
        r.rpush("local", "d")
        assert r.lmove("local", "topic:jobs", "LEFT", "RIGHT") == b"d"
        await settle([c], 4, 10)
        c.close()
        return c.bodies

    assert run(scenario, 30) == [b"a", b"b", b"c", b"d"]
    assert r.exists("local", "topic:jobs") == 0
    r.close()


def _stats(http_port: int) -> dict:
    url = f"http://127.0.0.1:{http_port}/stats?format=json"
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


def test_pynsq_producer_feeds_redis_consumers(ours) -> None:
    server = ours.start()
    r = client(server.port)
    assert r.lpop(CH) is None  # the first pop subscribes the channel
    assert r.lpop(CH, 3) is None

    async def publish(bodies: list[bytes]) -> None:
        pub = Publisher(f"127.0.0.1:{server.tcp_port}")  # one per event loop
        await pub.connected()
        pub.mpub("orders", bodies)
        await pub.all_acknowledged()
        pub.close()

    run(lambda: publish([b"o1", b"o2", b"o3", b"o4", b"o5"]), 20)
    assert r.llen(CH) == 5
    assert r.type(CH) == b"list"
    assert r.lpop(CH) == b"o1"
    assert r.rpop(CH, 2) == [b"o2", b"o3"]  # a channel key has one FIFO: both ends alike
    assert r.blpop(["empty-list", CH], 1) == (CH.encode(), b"o4")
    assert r.blmove(CH, "processing", 1, "LEFT", "LEFT") == b"o5"
    assert r.lrange("processing", 0, -1) == [b"o5"]
    assert r.lrem("processing", 1, "o5") == 1
    assert r.blpop([CH], 0.2) is None

    # a blocked Redis consumer is served by the next NSQ publish
    got: dict[str, object] = {}
    waiter = threading.Thread(
        target=lambda: got.update(v=client(server.port).blpop(["nothing", CH], 10))
    )
    waiter.start()
    time.sleep(0.3)
    run(lambda: publish([b"late"]), 20)
    waiter.join(10)
    assert got["v"] == (CH.encode(), b"late")

    # every pop finished its message: nothing queued, in flight, or still subscribed
    channel = stats_channel(_stats(server.http_port), "orders", "billing")
    assert channel["depth"] == 0 and channel["in_flight_count"] == 0, channel
    assert channel["message_count"] == 6 and channel["client_count"] == 0, channel
    r.close()


def test_bridge_errors(ours) -> None:
    server = ours.start()
    r = client(server.port)
    with pytest.raises(redis.ResponseError, match="push to topic:<topic>"):
        r.rpush(CH, "x")
    with pytest.raises(redis.ResponseError, match="pop from channel:<topic>:<channel>"):
        r.lpop("topic:orders")
    with pytest.raises(redis.ResponseError, match="invalid topic name"):
        r.rpush("topic:bad name", "x")
    with pytest.raises(redis.ResponseError, match="invalid channel name"):
        r.lpop("channel:orders:")
    with pytest.raises(redis.ResponseError, match="cannot be empty"):
        r.rpush("topic:orders", "")
    with pytest.raises(redis.ResponseError, match="pop from channel"):
        r.blpop(["a", "topic:orders"], 0.1)
    # a move to a key that takes no push is refused before anything is taken
    assert r.lpop(CH) is None  # the channel exists
    assert r.rpush("topic:orders", "stays") == 1
    with pytest.raises(redis.ResponseError, match="push to topic:<topic>"):
        r.lmove(CH, CH, "LEFT", "LEFT")
    with pytest.raises(redis.ResponseError, match="invalid topic name"):
        r.rpoplpush(CH, "topic:bad name")
    assert r.lpop(CH) == b"stays"
    assert r.ping()
    r.close()


def _configure(http_port: int, path: str) -> None:
    req = urllib.request.Request(f"http://127.0.0.1:{http_port}{path}", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200


def test_a_refused_push_is_answered_and_the_client_stays(ours) -> None:
    """RPUSH to a bridged topic that a policy refuses (a channel's max_depth with
    overflow=reject, the topic's max_msg_size) answers -ERR on the same connection; the
    connection goes on, and nothing of the refused push was stored."""
    server = ours.start()
    _configure(server.http_port, "/channel/config?topic=jobs&channel=c&max_depth=2")
    _configure(server.http_port, "/topic/config?topic=jobs&max_msg_size=8")
    r = client(server.port, single_connection_client=True)
    first = r.client_id()  # a new connection would have another id
    assert r.rpush("topic:jobs", "a", "b") == 2
    with pytest.raises(redis.ResponseError) as full:
        r.rpush("topic:jobs", "c")
    assert str(full.value) == "bridge: publish failed channel jobs:c is full (2 of max_depth 2)"
    assert r.lpop("channel:jobs:c") == b"a"  # room for one more now
    with pytest.raises(redis.ResponseError) as big:
        r.rpush("topic:jobs", "123456789")
    assert str(big.value) == "bridge: message too big 9 > 8"
    assert r.ping() is True
    assert r.llen("channel:jobs:c") == 1
    assert r.rpush("topic:jobs", "d") == 1
    assert r.lpop("channel:jobs:c", 5) == [b"b", b"d"]
    assert r.client_id() == first
    r.close()


def test_a_blocked_move_from_a_channel_to_a_wrong_type_keeps_the_message(ours) -> None:
    """BLMOVE channel:<t>:<c> dst, and dst becomes a string while the client waits: as Redis,
    that client gets WRONGTYPE and the element stays where it was: here, in the channel (it was
    lost: the pop had finished it before the move failed)."""
    server = ours.start()
    r = client(server.port)
    assert r.lpop(CH) is None  # the channel exists
    got: dict[str, object] = {}

    def blocked() -> None:
        try:
            got["v"] = client(server.port).blmove(CH, "dst", 10, "LEFT", "LEFT")
        except redis.ResponseError as exc:
            got["error"] = str(exc)

    waiter = threading.Thread(target=blocked)
    waiter.start()
    time.sleep(0.3)
    r.set("dst", "a string")
    assert r.rpush("topic:orders", "kept") == 1
    waiter.join(10)
    assert str(got.get("error", "")).startswith("WRONGTYPE"), got
    assert r.llen(CH) == 1
    assert r.lpop(CH) == b"kept"
    channel = stats_channel(_stats(server.http_port), "orders", "billing")
    assert channel["depth"] == 0 and channel["in_flight_count"] == 0, channel
    r.close()
