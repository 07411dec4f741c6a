"""A group answers HTTP as one nsqd: /stats and /metrics sum every worker's partition (a
peer's pulling link is no client, and what it moved counts once), topic/channel create,
pause, empty and delete act in every worker, whichever worker got the request, and so does
PUT /config."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from protocol.v2 import encoders
from tests.ops.conftest import START_TIMEOUT, http_get, http_post, wait_until

from .conftest import Group


def _stats(group: Group, query: str = "") -> dict:
    status, body = http_get(f"http://127.0.0.1:{group.http}/stats?format=json{query}")
    assert status == 200, body
    return json.loads(body)


def _fill(group: Group) -> None:
    """3 messages taken by worker 0, 4 by worker 1, topic t."""
    for k, n in ((0, 3), (1, 4)):
        with group.pin(k) as pub:
            for i in range(n):
                pub.pub("t", b"%d-%d" % (k, i))


def test_stats_sum_every_partition(group: Group) -> None:
    group.start()
    _fill(group)
    assert [t["depth"] for t in group.worker_stats(0)["topics"]] == [3]
    for _ in range(10):  # whichever worker accepts the request
        (topic,) = _stats(group)["topics"]
        assert (topic["topic_name"], topic["depth"], topic["message_count"]) == ("t", 7, 7)
        assert topic["message_bytes"] == 7 * 3


def test_a_moved_message_counts_once_and_links_are_no_clients(group: Group) -> None:
    group.start()
    _fill(group)
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(10)
        for _ in range(7):
            kind, data = sub.frame()
            assert kind == 2
            sub.fin(data[10:26])

        def settled() -> bool:  # FIN has no answer: worker 1 may not have read the last yet
            (channel,) = _stats(group)["topics"][0]["channels"]
            return (channel["depth"], channel["in_flight_count"]) == (0, 0)

        wait_until(settled, 5, "the seven FINs in worker 1")
        for _ in range(10):
            (topic,) = _stats(group)["topics"]
            (channel,) = topic["channels"]
            assert channel["message_count"] == 7, channel
            assert channel["client_count"] == 1
            assert [c["user_agent"] for c in channel["clients"]] == [""]
            assert (channel["depth"], channel["in_flight_count"]) == (0, 0)
        # worker 0 has the link as its only consumer: the group's page hides it
        (mine,) = group.worker_stats(0)["topics"][0]["channels"]
        assert mine["clients"][0]["user_agent"] == "trio-nsqd-group-link"


def test_a_message_that_moved_back_after_a_timeout_counts_once(group: Group) -> None:
    """Published in worker 0, moved to a consumer in worker 1 that left holding it; timed out
    there and moved back to a consumer in worker 0: the channel's message_count is nsqd's 3,
    though worker 1's link in worker 0 was gone by then (once it counted 6), and RSMQ's
    totalrecv is one nsqd's 6 (once 12: each delivery to a link counted too)."""
    group.start()
    with group.pin(1) as holder:
        holder.send(encoders.identify({"msg_timeout": 1000}))
        holder.expect_ok()
        holder.sub("t", "c")
        holder.rdy(3)
        time.sleep(0.3)  # worker 0 has the channel (made in every worker after the SUB)
        with group.pin(0) as pub:
            for i in range(3):
                pub.pub("t", b"%d" % i)
        assert len({holder.message()[0] for _ in range(3)}) == 3
    with group.pin(0) as sub:
        sub.sub("t", "c")
        sub.rdy(3)
        for _ in range(3):  # after worker 1 timed them out (1 s) and worker 0's link took them
            msg_id, _ = sub.message()
            sub.fin(msg_id)

        def settled() -> bool:
            (channel,) = _stats(group)["topics"][0]["channels"]
            return (channel["depth"], channel["in_flight_count"]) == (0, 0)

        wait_until(settled, 10, "the three FINs in worker 0")

        def link_gone() -> bool:  # worker 1's pull stops 2 s after its last consumer left
            (mine,) = group.worker_stats(0)["topics"][0]["channels"]
            return all(c["user_agent"] != "trio-nsqd-group-link" for c in mine["clients"])

        wait_until(link_gone, 10, "worker 1's link leaving worker 0's channel")
        base = f"http://127.0.0.1:{group.http}"
        for _ in range(6):  # whichever worker answers
            (channel,) = _stats(group)["topics"][0]["channels"]
            assert (channel["message_count"], channel["timeout_count"]) == (3, 3), channel
            # RSMQ's figures: sent 3, received 6 (each delivered twice), as one nsqd counts
            status, body = http_get(f"{base}/channel/config?topic=t&channel=c")
            queue = json.loads(body)["queue"]
            assert (status, queue["totalsent"], queue["totalrecv"]) == (200, 3, 6), queue


def test_a_topic_filter_for_a_topic_only_a_peer_has(group: Group) -> None:
    group.start()
    with group.pin(0) as pub:
        pub.pub("only0", b"x")
    for _ in range(10):
        assert [t["topic_name"] for t in _stats(group, "&topic=only0")["topics"]] == ["only0"]
        assert _stats(group, "&topic=none")["topics"] is None


def test_text_stats_and_metrics_are_the_groups(group: Group) -> None:
    group.start()
    _fill(group)
    for _ in range(6):
        status, text = http_get(f"http://127.0.0.1:{group.http}/stats")
        assert status == 200 and b"[t              ] depth: 7 " in text, text
        status, metrics = http_get(f"http://127.0.0.1:{group.http}/metrics")
        assert status == 200 and b'nsq_topic_depth{topic="t"} 7' in metrics, metrics


def test_metrics_count_every_workers_clients_and_no_link(group: Group) -> None:
    """nsq_client_connections and nsq_topic_channels are the group's, whichever worker
    answers: a consumer in each worker, and the pulling links between them left out."""
    group.start()
    _fill(group)
    with group.pin(0) as a, group.pin(1) as b:
        for conn in (a, b):
            conn.sub("t", "c")
            conn.rdy(1)

        def links_up() -> bool:
            for k in (0, 1):
                (channel,) = group.worker_stats(k, "&topic=t")["topics"][0]["channels"]
                if len(channel["clients"]) < 2:  # its consumer and the peer's link
                    return False
            return True

        wait_until(links_up, START_TIMEOUT, "each worker pulling from the other")
        for k in (0, 1):
            status, metrics = http_get(f"http://{group.private_http(k)}/metrics")
            assert status == 200
            assert b"\nnsq_client_connections 2\n" in metrics, (k, metrics)
            assert b'\nnsq_topic_channels{topic="t"} 1\n' in metrics, (k, metrics)


def test_admin_acts_in_every_worker(group: Group) -> None:
    group.start()
    _fill(group)
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/channel/create?topic=t&channel=c")[0] == 200
    assert http_post(f"{base}/channel/pause?topic=t&channel=c")[0] == 200
    for k in (0, 1):
        (channel,) = group.worker_stats(k)["topics"][0]["channels"]
        assert (channel["channel_name"], channel["paused"]) == ("c", True)
    assert http_post(f"{base}/channel/empty?topic=t&channel=c")[0] == 200
    assert http_post(f"{base}/topic/create?topic=new")[0] == 200
    for k in (0, 1):
        topics = {t["topic_name"]: t for t in group.worker_stats(k)["topics"]}
        assert set(topics) == {"t", "new"}
        assert topics["t"]["channels"][0]["depth"] == 0
    assert http_post(f"{base}/topic/delete?topic=t")[0] == 200
    for k in (0, 1):
        assert [t["topic_name"] for t in group.worker_stats(k)["topics"]] == ["new"]
    status, body = http_post(f"{base}/topic/delete?topic=t")
    assert (status, body) == (404, b'{"message":"TOPIC_NOT_FOUND"}'), body
    status, _ = http_post(f"{base}/topic/create")
    assert status == 400


def test_admin_of_a_topic_only_a_peer_has(group: Group) -> None:
    """Asked of worker 0 (its private HTTP, without the peer header: the group's answer), a
    topic that worker 1 alone has is paused, emptied and deleted there, not refused with
    worker 0's TOPIC_NOT_FOUND; a topic no worker has is still a 404."""
    group.start()
    with group.pin(1) as pub:
        pub.pub("only1", b"x")
    base = f"http://{group.private_http(0)}"

    def only1() -> dict | None:
        found = [t for t in group.worker_stats(1)["topics"] if t["topic_name"] == "only1"]
        return found[0] if found else None

    assert http_post(f"{base}/topic/pause?topic=only1")[0] == 200
    assert only1()["paused"] is True
    assert http_post(f"{base}/topic/empty?topic=only1")[0] == 200
    assert only1()["depth"] == 0
    assert http_post(f"{base}/topic/delete?topic=only1")[0] == 200
    assert only1() is None
    assert [t["topic_name"] for t in group.worker_stats(0)["topics"]] == []
    status, body = http_post(f"{base}/topic/delete?topic=only1")
    assert (status, body) == (404, b'{"message":"TOPIC_NOT_FOUND"}'), body


def test_the_peer_header_on_a_public_port_is_a_clients(group: Group) -> None:
    """The peer header sent to a shared public port gets the group's answer and makes a change
    in every worker: a worker answers alone only on its private listener, where only its peers
    connect."""
    import urllib.request

    from .conftest import PEER_HEADER

    group.start()
    with group.pin(1) as pub:
        for _ in range(3):
            pub.pub("t", b"x")
    with group.pin(0) as pub:
        pub.pub("t", b"x")
    base = f"http://127.0.0.1:{group.http}"
    for _ in range(8):  # new connections: the kernel spreads them over both workers
        req = urllib.request.Request(f"{base}/stats?format=json", headers={PEER_HEADER: "1"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            (topic,) = json.loads(resp.read())["topics"]
        assert topic["message_count"] == 4, topic
    for k in range(4):
        url = f"{base}/topic/create?topic=made{k}"
        req = urllib.request.Request(url, data=b"", headers={PEER_HEADER: "1"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200
    for k in (0, 1):
        names = {t["topic_name"] for t in group.worker_stats(k)["topics"]}
        assert names == {"t", "made0", "made1", "made2", "made3"}, (k, names)


def test_a_channel_create_asks_each_peer_once(group: Group) -> None:
    """An HTTP channel create is made here and asked of each peer once: the peer that makes it
    on that request asks no one again, nor do this worker's hooks (N^2 requests before: the
    request's fan-out, the hook's, and each peer's hook asking back)."""
    import time

    group.start()
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?topic=t&channel=c")[0] == 200
    time.sleep(0.5)  # any echo is asked within milliseconds
    lines = [ln for ln in group.log_text().splitlines() if "POST /channel/create" in ln]
    assert len(lines) == 2, lines  # the request, and worker 1's from worker 0
    for k in (0, 1):
        (topic,) = group.worker_stats(k)["topics"]
        assert [c["channel_name"] for c in topic["channels"]] == ["c"]


def test_put_config_acts_in_every_worker(group: Group) -> None:
    """PUT /config/nsqlookupd_tcp_addresses (and log_level) on the shared port sets every
    worker's (each would otherwise go on registering with the addresses it had); a bad value
    is refused, and changes none."""
    import urllib.request

    from .conftest import PEER_HEADER

    group.start()
    base = f"http://127.0.0.1:{group.http}"

    def put(option: str, body: bytes) -> tuple[int, bytes]:
        req = urllib.request.Request(f"{base}/config/{option}", data=body, method="PUT")
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def each(option: str) -> list[bytes]:
        out = []
        for k in (0, 1):
            url = f"http://{group.private_http(k)}/config/{option}"
            req = urllib.request.Request(url, headers={PEER_HEADER: "1"})
            with urllib.request.urlopen(req, timeout=5) as resp:
                out.append(resp.read())
        return out

    addresses = b'["127.0.0.1:4160","127.0.0.1:4162"]'
    assert put("nsqlookupd_tcp_addresses", addresses)[0] == 200
    assert each("nsqlookupd_tcp_addresses") == [addresses, addresses]
    assert put("log_level", b"debug")[0] == 200
    assert each("log_level") == [b"1", b"1"]  # nsqd's number for debug
    assert put("nsqlookupd_tcp_addresses", b"not json") == (400, b'{"message":"INVALID_VALUE"}')
    assert each("nsqlookupd_tcp_addresses") == [addresses, addresses]
    assert put("nsqlookupd_tcp_addresses", b"[]")[0] == 200
    assert each("nsqlookupd_tcp_addresses") == [b"[]", b"[]"]
    # nsqd keeps a null as null: the supervisor's word on the group's set ([]) leaves it so
    assert put("nsqlookupd_tcp_addresses", addresses)[0] == 200
    assert put("nsqlookupd_tcp_addresses", b"null")[0] == 200
    time.sleep(0.3)  # the supervisor has told every worker
    assert each("nsqlookupd_tcp_addresses") == [b"null", b"null"]


@pytest.mark.parametrize("peer", ["resets", "closes at once", "answers garbage"])
async def test_asking_a_peer_that_dies_mid_answer_raises_one_of_ask_errors(peer: str) -> None:
    """A worker asks its peers over their private HTTP (fan-out, channel creation, catch-up);
    a peer killed meanwhile resets the connection. Every way it can fail is one of ASK_ERRORS,
    which each asker logs and goes past: a ConnectionResetError reached a worker as
    trio.BrokenResourceError from channel creation's fan-out and ended the whole group."""
    import socket
    import struct
    from functools import partial

    import trio

    from nsqd.group.kept import ASK_ERRORS, KeptConnections

    async def serve(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        if peer == "resets":
            linger = struct.pack("ii", 1, 0)  # close with RST, as a killed process's socket
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        elif peer == "answers garbage":
            await stream.send_all(b"garbage")
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        with pytest.raises(ASK_ERRORS):
            await KeptConnections().request(("127.0.0.1", port), "GET", b"/stats")
        nursery.cancel_scope.cancel()


def test_start_time_is_the_groups_across_a_restart(group: Group) -> None:
    """/stats, /info and /metrics give the group's start, whichever worker answers, a worker
    started again included (its own start is a second or more later here)."""
    group.start()
    time.sleep(1.1)
    before = group.pids()[1]
    os.kill(before, signal.SIGKILL)
    wait_until(lambda: group.listened(1) == 2, START_TIMEOUT, "worker 1 started again")
    started = {group.worker_stats(k)["start_time"] for k in (0, 1)}
    assert len(started) == 1, started
    (start,) = started
    assert time.time() - 30 < start < time.time() - 1
    for k in (0, 1):
        status, body = http_get(f"http://{group.private_http(k)}/info")
        assert status == 200 and json.loads(body)["start_time"] == start, body
        status, body = http_get(f"http://{group.private_http(k)}/metrics")
        assert f"\nnsq_start_time_seconds {start}\n".encode() in body, body[:2000]


def test_health_is_the_worst_workers(group: Group) -> None:
    """A store error in one worker (its file size limit, set from outside, stands in for a
    full disk) is the group's health in /stats, JSON and text, and /ping, whichever worker
    answers."""
    group.start("--mem-queue-size=0")
    with group.pin(1) as pub:
        pub.pub("t", b"x")
    limit = ["prlimit", f"--pid={group.pids()[1]}", "--fsize=1:unlimited"]
    subprocess.run(limit, check=True, timeout=10)
    with group.pin(1) as pub:
        pub.send(b"PUB t\n" + len(b"y" * 100).to_bytes(4, "big") + b"y" * 100)
        kind, data = pub.frame()
        assert (kind, data[:12]) == (1, b"E_PUB_FAILED"), (kind, data)
    assert group.worker_stats(1)["health"].startswith("NOK - ")
    assert group.worker_stats(0)["health"] == "OK"
    for k in (0, 1):
        status, body = http_get(f"http://{group.private_http(k)}/stats?format=json")
        assert status == 200 and json.loads(body)["health"].startswith("NOK - "), (k, body)
        status, body = http_get(f"http://{group.private_http(k)}/stats")
        assert status == 200 and b"\nHealth: NOK - " in body, (k, body)
        status, body = http_get(f"http://{group.private_http(k)}/ping")
        assert status == 500 and body.startswith(b"NOK - "), (k, status, body)


def test_memory_is_every_workers(group: Group) -> None:
    """/stats' and /metrics' memory figures are the group's processes': sizes summed."""
    group.start()
    each = [group.worker_stats(k)["memory"]["heap_in_use_bytes"] for k in (0, 1)]
    memory = _stats(group)["memory"]
    assert memory["heap_in_use_bytes"] > 1.5 * max(each), (memory, each)
    assert memory["heap_objects"] > 0 and set(memory) == set(group.worker_stats(0)["memory"])
    status, metrics = http_get(f"http://127.0.0.1:{group.http}/metrics")
    assert status == 200
    line = next(
        ln for ln in metrics.split(b"\n") if ln.startswith(b"nsq_memory_heap_in_use_bytes ")
    )
    assert float(line.split()[1]) > 1.5 * max(each), (line, each)
