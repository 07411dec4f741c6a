"""A subscriber's footprint is bounded as Redis bounds it: one that never reads is closed past
client-output-buffer-limit pubsub's hard limit (32 MB), and a subscriber that disconnects
leaves its channels and patterns at once (INFO's pubsub_channels and pubsub_patterns count
them). Both were found by fuzzing: a silent subscriber of 100 matching patterns turned a
publisher's 4 MB into GBs, and 200,000 channels of closed clients stayed for ever."""

from __future__ import annotations

import socket
import time

import redis

from conformance.resp.wire import Conn, encode


def _info(r: redis.Redis) -> dict:
    return r.info("stats")


def test_a_subscriber_that_never_reads_is_closed_past_the_hard_limit(ours) -> None:
    server = ours.start()
    r = redis.Redis(port=server.port)
    silent = socket.create_connection(("127.0.0.1", server.port))
    silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    patterns = [b"news" + b"*" * k for k in range(1, 51)]  # 50 patterns, all matching
    silent.sendall(encode([b"PSUBSCRIBE", *patterns]))
    deadline = time.monotonic() + 10
    while _info(r)["pubsub_patterns"] < len(patterns):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    message = b"x" * 65536
    # each PUBLISH queues one copy per matching pattern: 50 x 64 KiB = 3.2 MB a message, so
    # the hard limit (32 MB) is passed after about 10; 40 are sent (2.6 MB of input)
    receivers = [r.publish("news.1", message) for _ in range(40)]
    assert receivers[0] >= 1
    assert receivers[-1] == 0, "the silent subscriber was never closed"
    assert _info(r)["pubsub_patterns"] == 0
    assert "client-output-buffer-limit pubsub" in server.log()
    silent.close()
    assert r.ping()


def test_a_closed_subscriber_leaves_its_channels_and_patterns_at_once(ours) -> None:
    server = ours.start()
    r = redis.Redis(port=server.port)
    for n in range(10):
        c = Conn(server.port)
        channels = [b"result:%d:%d" % (n, i) for i in range(500)]
        c.send(encode([b"SUBSCRIBE", *channels]) + encode([b"PSUBSCRIBE", b"job:%d:*" % n]))
        for _ in range(501):
            c.reply()
        c.close()
    deadline = time.monotonic() + 10
    while (stats := _info(r))["pubsub_channels"] or stats["pubsub_patterns"]:
        assert time.monotonic() < deadline, stats
        time.sleep(0.02)
    # and a live one still counts
    live = r.pubsub()
    live.subscribe("one")
    live.get_message(timeout=5)
    assert _info(r)["pubsub_channels"] == 1
    live.close()
