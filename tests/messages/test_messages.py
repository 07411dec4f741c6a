"""Seeing and taking messages over HTTP (ours; nsqd has none of it): peek, receive with a
lease, fin/req/touch by id (one or many), pop, the binary answer, and HTTP and TCP consumers
(pynsq) sharing one channel (the seed documents' RSMQ and PHPMQ operations:
test_seed_queues.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from durability import helpers

from protocol.v2 import FrameDecoder, FrameType, decode_message

from .support import REPO, Q, call, channel_stats, msgs, setup_queue

# -- peek --------------------------------------------------------------------------------------


def test_peek_changes_nothing_and_tcp_then_gets_the_same(daemon: helpers.Daemon) -> None:
    setup_queue(daemon, "q", [b"m%d" % i for i in range(5)])
    first = msgs(daemon, f"/channel/peek?{Q}&n=3", "GET")
    again = msgs(daemon, f"/channel/peek?{Q}&n=3", "GET")
    assert [m["id"] for m in first] == [m["id"] for m in again]
    assert [m["body"] for m in first] == [b"m0", b"m1", b"m2"]
    assert all(m["attempts"] == 0 and "due" not in m for m in first)
    assert channel_stats(daemon, "q", "c")["depth"] == 5
    with daemon.client() as conn:
        conn.sub("q", "c", rdy=3)
        got = conn.messages(3)
    assert [m.id.decode() for m in got] == [m["id"] for m in first]
    assert [m.attempts for m in got] == [1, 1, 1]  # peeking counted no attempt


def test_peek_reads_queued_messages_on_disk(data_dir: Path) -> None:
    with helpers.running("ours", data_dir, "--mem-queue-size=2") as daemon:
        setup_queue(daemon, "q", [b"d%d" % i for i in range(6)])
        assert channel_stats(daemon, "q", "c")["backend_depth"] == 4
        seen = msgs(daemon, f"/channel/peek?{Q}&n=10", "GET")
        assert [m["body"] for m in seen] == [b"d%d" % i for i in range(6)]
        assert channel_stats(daemon, "q", "c")["backend_depth"] == 4  # nothing read away
        taken = msgs(daemon, f"/channel/pop?{Q}&n=6")
        assert [m["body"] for m in taken] == [b"d%d" % i for i in range(6)]


def test_a_peek_past_one_chunk_on_disk_is_whole_and_in_order(data_dir: Path) -> None:
    """A peek of more than CHUNK (2,048) messages on disk is read a chunk at a time, with a
    turn of the loop between: the answer is the same, each message once, oldest first."""
    bodies = [b"%05d" % i for i in range(5000)]
    with helpers.running("ours", data_dir, "--mem-queue-size=100") as daemon:
        setup_queue(daemon, "q", bodies)
        assert channel_stats(daemon, "q", "c")["backend_depth"] == 4900
        seen = msgs(daemon, f"/channel/peek?{Q}&n=4999", "GET")
        assert [m["body"] for m in seen] == bodies[:4999]
        assert len({m["id"] for m in seen}) == 4999


def test_peek_in_flight_and_deferred_show_due(daemon: helpers.Daemon) -> None:
    setup_queue(daemon, "q", [b"a", b"b"])
    call(daemon, "POST", "/pub?topic=q&defer=5000", b"later")
    now_ms = time.time() * 1000
    received = msgs(daemon, f"/channel/receive?{Q}&n=1&vt=2000")
    in_flight = msgs(daemon, f"/channel/peek?{Q}&state=in_flight", "GET")
    assert [m["id"] for m in in_flight] == [received[0]["id"]]
    assert now_ms + 1500 < in_flight[0]["due"] < now_ms + 3000
    deferred = msgs(daemon, f"/channel/peek?{Q}&state=deferred", "GET")
    assert [m["body"] for m in deferred] == [b"later"]
    assert now_ms + 4000 < deferred[0]["due"] < now_ms + 6000
    assert call(daemon, "GET", f"/channel/peek?{Q}&state=gone")[1]["message"] == "INVALID_STATE"


# -- receive, fin, req, touch, pop --------------------------------------------------------------


def test_receive_lease_expires_and_redelivers_with_an_attempt(daemon: helpers.Daemon) -> None:
    setup_queue(daemon, "q", [b"x"])
    first = msgs(daemon, f"/channel/receive?{Q}&vt=1000")
    assert first[0]["attempts"] == 1
    assert msgs(daemon, f"/channel/receive?{Q}") == []  # leased: not given twice
    time.sleep(1.3)
    second = msgs(daemon, f"/channel/receive?{Q}&vt=60000")
    assert (second[0]["id"], second[0]["attempts"]) == (first[0]["id"], 2)
    assert channel_stats(daemon, "q", "c")["timeout_count"] == 1
    assert call(daemon, "POST", f"/message/fin?{Q}&id={first[0]['id']}") == (200, "OK")
    status, doc = call(daemon, "POST", f"/message/fin?{Q}&id={first[0]['id']}")
    assert (status, doc["message"]) == (404, "MESSAGE_NOT_IN_FLIGHT"), doc
    assert channel_stats(daemon, "q", "c")["depth"] == 0


def test_req_with_delay_and_touch(daemon: helpers.Daemon) -> None:
    setup_queue(daemon, "q", [b"r", b"t"])
    r, t = msgs(daemon, f"/channel/receive?{Q}&n=2&vt=1000")
    assert call(daemon, "POST", f"/message/req?{Q}&id={r['id']}&delay=1500") == (200, "OK")
    assert call(daemon, "POST", f"/message/touch?{Q}&id={t['id']}&vt=3000") == (200, "OK")
    time.sleep(1.2)  # past the first lease: the touched one is still held
    assert channel_stats(daemon, "q", "c")["in_flight_count"] == 1
    assert channel_stats(daemon, "q", "c")["deferred_count"] == 1
    assert msgs(daemon, f"/channel/receive?{Q}") == []
    time.sleep(0.6)
    back = msgs(daemon, f"/channel/receive?{Q}")
    assert (back[0]["body"], back[0]["attempts"]) == (b"r", 2)
    for path in (
        f"/message/req?{Q}&id={r['id']}&delay=-1",
        f"/message/touch?{Q}&id={t['id']}&vt=0",
        f"/channel/receive?{Q}&vt=99999999999",
        f"/channel/receive?{Q}&n=0",
        f"/message/fin?{Q}&id=nothex",
    ):
        assert call(daemon, "POST", path)[0] == 400, path


def test_pop_and_the_binary_answer(daemon: helpers.Daemon) -> None:
    setup_queue(daemon, "q", [b"p%d" % i for i in range(4)])
    status, raw = call(
        daemon, "POST", f"/channel/pop?{Q}&n=3", headers={"Accept": "application/octet-stream"}
    )
    assert status == 200
    decoder = FrameDecoder()
    frames = decoder.feed(raw)
    assert [f.frame_type for f in frames] == [FrameType.MESSAGE] * 3
    assert [decode_message(f.data).body for f in frames] == [b"p0", b"p1", b"p2"]
    ch = channel_stats(daemon, "q", "c")
    assert (ch["depth"], ch["in_flight_count"]) == (1, 0)  # popped: finished at once


def test_finishing_ten_thousand_ids_in_one_request(daemon: helpers.Daemon) -> None:
    setup_queue(daemon, "q", [])
    body = b"\n".join(b"%05d" % i for i in range(10_000))
    assert call(daemon, "POST", "/mpub?topic=q", body) == (200, "OK")
    got = msgs(daemon, f"/channel/receive?{Q}&n=10000")
    assert len(got) == 10_000
    ids = "\n".join(m["id"] for m in got).encode() + b"\n0000000000000000"
    start = time.monotonic()
    status, doc = call(daemon, "POST", f"/message/fin?{Q}", ids)
    elapsed = time.monotonic() - start
    assert status == 200 and doc["ok"] == 10_000, doc
    assert [f["id"] for f in doc["failed"]] == ["0000000000000000"]
    ch = channel_stats(daemon, "q", "c")
    assert (ch["depth"], ch["in_flight_count"]) == (0, 0)
    print(f"10,000 FINs in one request: {elapsed * 1000:.0f} ms")


def test_http_and_a_pynsq_consumer_share_a_channel(daemon: helpers.Daemon) -> None:
    n = 2000
    setup_queue(daemon, "py", [])
    assert call(daemon, "POST", "/topic/create?topic=py")[0] == 200
    assert call(daemon, "POST", "/channel/create?topic=py&channel=ch")[0] == 200
    body = b"\n".join(b"%04d" % i for i in range(n))
    assert call(daemon, "POST", "/mpub?topic=py", body) == (200, "OK")
    worker = REPO / "tests" / "durability" / "pynsq_worker.py"
    argv = [sys.executable, str(worker), "--nsqd", f"{helpers.HOST}:{daemon.tcp_port}"]
    argv += ["--topic", "py", "--channel", "ch", "--n", str(n), "--timeout", "12"]
    argv += ["--max-in-flight", "20"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert helpers.wait_for(lambda: channel_stats(daemon, "py", "ch")["client_count"] == 1, 10)
    http_ids: list[str] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        got = msgs(daemon, "/channel/receive?topic=py&channel=ch&n=20&vt=60000")
        if got:
            http_ids += [m["id"] for m in got]
            fin = "\n".join(m["id"] for m in got).encode()
            _, doc = call(daemon, "POST", "/message/fin?topic=py&channel=ch", fin)
            assert doc["ok"] == len(got), doc
            time.sleep(0.01)
        elif proc.poll() is not None or channel_stats(daemon, "py", "ch")["depth"] == 0:
            break
    out, err = proc.communicate(timeout=30)
    tcp_bodies = [line.split()[0] for line in out.splitlines()]
    ch = channel_stats(daemon, "py", "ch")
    assert (ch["depth"], ch["in_flight_count"]) == (0, 0), ch
    assert http_ids and tcp_bodies, (len(http_ids), len(tcp_bodies), err[-500:])
    assert len(http_ids) + len(tcp_bodies) == n  # every message once, none to both
    assert len(set(http_ids)) == len(http_ids)


def test_named_leases_are_finished_whole_by_another_caller(daemon: helpers.Daemon) -> None:
    """Two readers take batches under one named lease (Spark executors); a third caller
    finishes the lease whole (the driver after its commit); another lease is untouched."""
    setup_queue(daemon, "q", [b"m%d" % i for i in range(10)])
    a = msgs(daemon, f"/channel/receive?{Q}&n=3&lease=batch-7")
    b = msgs(daemon, f"/channel/receive?{Q}&n=3&lease=batch-7")
    other = msgs(daemon, f"/channel/receive?{Q}&n=2&lease=batch-8")
    plain = msgs(daemon, f"/channel/receive?{Q}&n=1")
    status, doc = call(daemon, "POST", f"/message/fin?{Q}&lease=batch-7")
    assert (status, doc) == (200, {"ok": 6, "failed": []}), doc
    held = msgs(daemon, f"/channel/peek?{Q}&state=in_flight&n=10", "GET")
    assert sorted(m["id"] for m in held) == sorted(m["id"] for m in other + plain)
    assert len({m["id"] for m in a + b}) == 6
    # by id, without a lease: whichever HTTP lease holds it
    assert call(daemon, "POST", f"/message/fin?{Q}&id={other[0]['id']}") == (200, "OK")
    assert call(daemon, "POST", f"/message/req?{Q}&lease=batch-8")[1] == {"ok": 1, "failed": []}
    assert channel_stats(daemon, "q", "c")["depth"] == 10 - 6 - 2 - 1 + 1


def test_a_retried_receive_gets_what_its_lease_holds_first(daemon: helpers.Daemon) -> None:
    """`again=true`: a Spark task run twice under one lease name gets the same messages back
    (attempts unchanged, the lease renewed), then queued ones up to n; another lease's
    messages are not touched, and without `again` a receive takes a second set."""
    setup_queue(daemon, "q", [b"m%d" % i for i in range(12)])
    first = msgs(daemon, f"/channel/receive?{Q}&n=3&vt=1000&lease=tok-4-0")
    other = msgs(daemon, f"/channel/receive?{Q}&n=2&lease=tok-4-1")
    time.sleep(0.6)
    again = msgs(daemon, f"/channel/receive?{Q}&n=5&vt=1000&lease=tok-4-0&again=true")
    assert [m["id"] for m in again[:3]] == [m["id"] for m in first]
    assert [m["attempts"] for m in again] == [1] * 5
    assert not {m["id"] for m in again} & {m["id"] for m in other}
    time.sleep(0.6)  # past the first receive's vt, not the renewed one
    assert channel_stats(daemon, "q", "c")["timeout_count"] == 0
    # the same again with n below what the lease holds: only the oldest n, nothing taken
    assert [m["id"] for m in msgs(daemon, f"/channel/receive?{Q}&n=2&lease=tok-4-0&again=1")] == [
        m["id"] for m in first[:2]
    ]
    second = msgs(daemon, f"/channel/receive?{Q}&n=2&lease=tok-4-0")
    assert not {m["id"] for m in second} & {m["id"] for m in again}
    # `again=held`: what the lease holds, nothing new (a group gathers it from every worker)
    held = msgs(daemon, f"/channel/receive?{Q}&n=100&lease=tok-4-0&again=held")
    assert {m["id"] for m in held} == {m["id"] for m in again + second}
    assert call(daemon, "POST", f"/message/fin?{Q}&lease=tok-4-0")[1] == {"ok": 7, "failed": []}
    status, doc = call(daemon, "POST", f"/channel/receive?{Q}&lease=x&again=maybe")
    assert (status, doc["message"]) == (400, "INVALID_AGAIN")


def test_receive_stops_at_max_bytes(daemon: helpers.Daemon) -> None:
    """`max_bytes`: taking stops once the bodies reach the cap (here one message past it,
    the bodies being of one size); the binary answer, as a Spark executor reads it."""
    setup_queue(daemon, "q", [b"%03d" % i + b"x" * 97 for i in range(20)])
    got = msgs(daemon, f"/channel/receive?{Q}&n=20&max_bytes=350&lease=b")
    assert len(got) == 4
    status, raw = call(
        daemon,
        "POST",
        f"/channel/receive?{Q}&n=20&max_bytes=1000&lease=b&again=true",
        headers={"Accept": "application/octet-stream"},
    )
    decoder = FrameDecoder()
    frames = decoder.feed(raw)
    bodies = [decode_message(f.data).body for f in frames if f.frame_type == FrameType.MESSAGE]
    assert status == 200 and len(bodies) == 10
    assert bodies[:4] == [m["body"] for m in got]
    assert call(daemon, "POST", f"/channel/receive?{Q}&max_bytes=-1")[0] == 400


def test_batch_answers_count_each_id_once_and_name_the_bad_line(daemon: helpers.Daemon) -> None:
    """/message/fin (and req, touch) with many ids: an id given twice is acted on and counted
    once; a body with one bad line among thousands is refused whole, naming that line."""
    setup_queue(daemon, "dup", [b"a", b"b"])
    got = msgs(daemon, "/channel/receive?topic=dup&channel=c&n=2&vt=60000")
    a, b = (m["id"].encode() for m in got)
    absent = b"0123456789abcdef"
    # nothing of these is in flight: nothing is finished, and each failure is listed once
    status, doc = call(daemon, "POST", "/message/fin?topic=dup&channel=c", absent + b"\n" + absent)
    assert status == 200, doc
    assert doc["ok"] == 0
    assert [f["id"] for f in doc["failed"]] == [absent.decode()]
    # one held id twice, one absent id: one finished, one failed
    body = b"\n".join([a, a, absent])
    status, doc = call(daemon, "POST", "/message/fin?topic=dup&channel=c", body)
    assert (status, doc["ok"], [f["id"] for f in doc["failed"]]) == (200, 1, [absent.decode()])
    assert "ID not in flight" in doc["failed"][0]["error"]
    status, doc = call(daemon, "POST", "/message/touch?topic=dup&channel=c&vt=5000", b + b"\n" + b)
    assert (status, doc) == (200, {"ok": 1, "failed": []})
    # 10,000 lines, the 7,778th bad: refused whole, that line named, nothing finished
    lines = [b"%016x" % i for i in range(10_000)]
    lines[7777] = b"not-an-id"
    status, doc = call(daemon, "POST", "/message/fin?topic=dup&channel=c", b"\n".join(lines))
    assert (status, doc) == (400, {"message": "INVALID_ID", "line": 7778, "id": "not-an-id"})
    assert channel_stats(daemon, "dup", "c")["in_flight_count"] == 1
    status, doc = call(daemon, "POST", "/message/fin?topic=dup&channel=c", b + b"\n" + b)
    assert (status, doc) == (200, {"ok": 1, "failed": []})


def test_answers_past_one_chunk_are_whole_and_in_order(daemon: helpers.Daemon) -> None:
    """receive, pop and peek of more than CHUNK (2,048) messages: taken and encoded a chunk
    at a time (a turn of the loop between), one answer holding each message once, oldest
    first, as JSON and as frames; max_bytes counted across the chunks."""
    n = 5000
    bodies = [b"%05d" % i for i in range(n)]
    setup_queue(daemon, "q", bodies[:2500])
    assert call(daemon, "POST", "/mpub?topic=q", b"\n".join(bodies[2500:])) == (200, "OK")
    peeked = msgs(daemon, f"/channel/peek?{Q}&n={n}", "GET")
    assert [m["body"] for m in peeked] == bodies
    got = msgs(daemon, f"/channel/receive?{Q}&n=4500&max_bytes={2100 * 5}&lease=b")
    assert [m["body"] for m in got] == bodies[:2100]  # bodies of 5 bytes: stops at 2,100
    status, raw = call(
        daemon, "POST", f"/channel/pop?{Q}&n={n}", headers={"Accept": "application/octet-stream"}
    )
    popped = [decode_message(f.data) for f in FrameDecoder().feed(raw)]
    assert status == 200 and [m.body for m in popped] == bodies[2100:]
    assert len({m.id for m in popped}) == n - 2100
    status, doc = call(daemon, "POST", f"/message/fin?{Q}&lease=b")
    assert (status, doc["ok"]) == (200, 2100)


def test_a_large_pop_leaves_other_clients_served(daemon: helpers.Daemon) -> None:
    """A pop of 60,000 messages as JSON (about half a second of work) is taken and encoded
    in chunks: other clients' requests are answered while it is under way (before, none was:
    every client waited for the whole answer)."""
    setup_queue(daemon, "q", [])
    with daemon.client() as producer:
        producer.mpub_many("q", [[b"x" * 200] * 500 for _ in range(120)])
    done: list[float] = []
    stop = threading.Event()

    def pinger() -> None:
        while not stop.is_set():
            call(daemon, "GET", "/ping")
            done.append(time.monotonic())

    thread = threading.Thread(target=pinger)
    thread.start()
    try:
        time.sleep(0.2)
        with socket.create_connection((helpers.HOST, daemon.http_port), timeout=30) as sock:
            start = time.monotonic()
            sock.sendall(f"POST /channel/pop?{Q}&n=60000 HTTP/1.0\r\n\r\n".encode())
            raw = sock.recv(1 << 16)  # the answer's head: the work on it is done
            end = time.monotonic()
            while chunk := sock.recv(1 << 20):
                raw += chunk
    finally:
        stop.set()
        thread.join()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 OK") and len(json.loads(body)["messages"]) == 60000
    during = [t for t in done if start < t < end]
    assert len(during) >= 3, f"{len(during)} pings answered in the pop's {end - start:.2f}s"
