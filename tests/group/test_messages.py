"""The message endpoints over HTTP (ours: docs/http-access.md) answer for the group: a
request reaches one worker (here each is sent to one worker's own HTTP listener, as the shared
port would hand it over), and that worker gives what it holds and asks its peers for the rest.
receive, pop and peek see every worker's messages; fin, req, touch, cancel and defer reach the
worker that holds the message, by one id, by many and by a lease's name."""

from __future__ import annotations

import base64
import json
import os
import signal
import struct
import urllib.request

from tests.ops.conftest import http_post, wait_until

from .conftest import PEER_HEADER, Group

Q = "topic=t&channel=c"


def _ask(
    group: Group, k: int, path: str, body: bytes = b"", binary: bool = False, wait: float = 5.0
):
    """POST (GET for peek and stats) to worker k's own HTTP listener, as a group's client."""
    method = "GET" if path.startswith(("/channel/peek", "/stats")) else "POST"
    headers = {"Accept": "application/octet-stream"} if binary else {}
    req = urllib.request.Request(
        f"http://{group.private_http(k)}{path}", data=body or None, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(req, timeout=wait) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _fill(group: Group, per_worker: int = 5) -> set[bytes]:
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?{Q}")[0] == 200
    bodies = set()
    for k in (0, 1):
        with group.pin(k) as pub:
            for i in range(per_worker):
                pub.pub("t", b"w%d-%d" % (k, i))
                bodies.add(b"w%d-%d" % (k, i))
    return bodies


def _bodies(answer: bytes) -> dict[str, bytes]:
    return {m["id"]: base64.b64decode(m["body"]) for m in json.loads(answer)["messages"]}


def test_receive_pop_and_peek_see_every_worker(group: Group) -> None:
    group.start()
    bodies = _fill(group)
    status, answer = _ask(group, 0, f"/channel/peek?{Q}&n=100")
    assert status == 200 and set(_bodies(answer).values()) == bodies
    status, answer = _ask(group, 1, f"/channel/receive?{Q}&n=7&vt=60000")
    got = _bodies(answer)
    assert status == 200 and len(got) == 7  # worker 1's five, then two of worker 0's
    assert {b for b in got.values() if b.startswith(b"w1")} == {b"w1-%d" % i for i in range(5)}
    status, frames = _ask(group, 1, f"/channel/pop?{Q}&n=100", binary=True)
    popped, pos = set(), 0
    while pos < len(frames):
        (size,) = struct.unpack_from(">i", frames, pos)
        popped.add(frames[pos + 34 : pos + 4 + size])
        pos += 4 + size
    assert status == 200 and popped == bodies - set(got.values())  # the three left, frames
    status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=100")
    assert status == 200 and _bodies(answer) == {}  # nothing queued anywhere


def test_receive_within_max_bytes_takes_the_rest_from_the_peers(group: Group) -> None:
    group.start()
    _fill(group, 3)  # bodies of 4 bytes, three in each worker
    status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=100&max_bytes=20")
    got = sorted(_bodies(answer).values())
    assert status == 200 and got[:3] == [b"w0-0", b"w0-1", b"w0-2"]  # this worker's first
    assert len(got) == 5  # 12 bytes here, then 8 more from worker 1 (the last may pass it)


def test_fin_req_and_touch_reach_the_worker_that_holds_the_message(group: Group) -> None:
    group.start()
    bodies = _fill(group, 3)
    status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=100&vt=60000")
    held = _bodies(answer)
    assert set(held.values()) == bodies
    ids = sorted(held)
    for k, msg_id in enumerate(ids[:2]):  # one id each, to either worker
        assert _ask(group, k % 2, f"/message/touch?{Q}&id={msg_id}&vt=30000") == (200, b"OK")
        assert _ask(group, (k + 1) % 2, f"/message/fin?{Q}&id={msg_id}") == (200, b"OK")
    status, answer = _ask(group, 1, f"/message/fin?{Q}&id={ids[0]}")
    assert status == 404 and json.loads(answer)["message"] == "MESSAGE_NOT_IN_FLIGHT"
    assert _ask(group, 0, f"/message/req?{Q}&id={ids[2]}") == (200, b"OK")
    rest = "\n".join([*ids[3:], "0123456789abcdef", ids[0]]).encode()
    status, answer = _ask(group, 1, f"/message/fin?{Q}", rest)
    doc = json.loads(answer)
    assert status == 200 and doc["ok"] == len(ids) - 3, doc
    assert sorted(f["id"] for f in doc["failed"]) == ["0123456789abcdef", ids[0]]
    status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=100")
    assert set(_bodies(answer).values()) == {held[ids[2]]}  # the one requeued, and only it


def test_a_named_lease_is_finished_in_every_worker(group: Group) -> None:
    group.start()
    bodies = _fill(group, 4)
    status, answer = _ask(group, 1, f"/channel/receive?{Q}&n=100&lease=batch-1")
    assert status == 200 and set(_bodies(answer).values()) == bodies
    status, answer = _ask(group, 0, f"/message/fin?{Q}&lease=batch-1")
    assert status == 200 and json.loads(answer) == {"ok": len(bodies), "failed": []}
    (topic,) = json.loads(_ask(group, 0, "/stats?format=json")[1])["topics"]
    (channel,) = topic["channels"]
    assert (channel["depth"], channel["in_flight_count"]) == (0, 0)


def test_a_deferred_message_is_cancelled_and_moved_where_it_waits(group: Group) -> None:
    group.start()
    _fill(group, 0)
    with group.pin(1) as sub:
        sub.sub("t", "c")
        for body in (b"x", b"y"):
            with group.pin(1) as pub:
                pub.pub("t", body)
            sub.rdy(1)
            kind, data = sub.frame()
            assert kind == 2
            sub.req(data[10:26], 600_000)  # deferred in worker 1
            sub.rdy(0)

        def both_deferred() -> list[str]:
            # REQ has no answer: worker 1 may read the last one after this peek reaches it
            status, answer = _ask(group, 0, f"/channel/peek?{Q}&state=deferred&n=10")
            assert status == 200
            return sorted(_bodies(answer)) if len(_bodies(answer)) == 2 else []

        deferred = wait_until(both_deferred, 5, "both messages deferred in worker 1")
        assert _ask(group, 0, f"/message/cancel?{Q}&id={deferred[0]}") == (200, b"OK")
        assert _ask(group, 0, f"/message/defer?{Q}&id={deferred[1]}&ms=0") == (200, b"OK")
        status, answer = _ask(group, 0, f"/message/cancel?{Q}&id={deferred[0]}")
        assert status == 404 and json.loads(answer)["message"] == "MESSAGE_NOT_FOUND"


def test_a_topic_only_a_peer_has_is_read_from_that_peer(group: Group) -> None:
    """A topic and channel made in worker 1 alone (as while worker 0 was down, before it
    caught up): peek and receive reaching worker 0 give worker 1's messages, not a 404; one no
    worker has is still a 404."""
    group.start()
    for target in ("/topic/create?topic=only", "/channel/create?topic=only&channel=c"):
        req = urllib.request.Request(
            f"http://{group.private_http(1)}{target}", data=b"", headers={PEER_HEADER: "1"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200
    assert group.worker_stats(0, "&topic=only")["topics"] is None
    with group.pin(1) as pub:
        pub.pub("only", b"there")
    status, answer = _ask(group, 0, "/channel/peek?topic=only&channel=c&n=10")
    assert status == 200 and list(_bodies(answer).values()) == [b"there"]
    status, answer = _ask(group, 0, "/channel/receive?topic=only&channel=c&n=10", binary=True)
    assert status == 200 and answer.endswith(b"there")
    status, answer = _ask(group, 0, "/channel/peek?topic=none&channel=c")
    assert (status, json.loads(answer)) == (404, {"message": "TOPIC_NOT_FOUND"})


def test_a_query_value_that_is_not_utf8_is_passed_on_as_it_came(group: Group) -> None:
    """A %ff in a request a worker passes on to its peers was written back with urlencode's
    strict UTF-8: 500 and "error in ..." (found by fuzzing). As one nsqd: answered."""
    group.start()
    bodies = _fill(group, 1)
    status, answer = _ask(group, 0, "/stats?format=json&topic=%ff")
    assert status == 200 and json.loads(answer)["topics"] in (None, [])
    status, answer = _ask(group, 1, f"/channel/receive?{Q}&n=5&vt=60000&x=%ff")
    assert status == 200 and set(_bodies(answer).values()) == bodies  # its own and its peer's
    status, answer = _ask(group, 0, f"/message/fin?{Q}&id=%ff")
    assert (status, json.loads(answer)) == (400, {"message": "INVALID_ID"})
    assert "error in" not in group.log_text()


def test_a_queue_only_a_peer_has_acts_and_refuses_as_one_nsqd(group: Group) -> None:
    """A topic and channel worker 0 lacks (a topic published in worker 1 alone): fin by many ids
    and by a lease's name reaching worker 0 were refused whole with worker 0's 404
    TOPIC_NOT_FOUND, nothing finished (the messages came again after their timeout), and so was
    a fin of one id; a bad argument got that 404 where one nsqd answers 400 (found by a
    campaign). The peer that has the queue acts, and judges the arguments."""
    group.start()
    for target in ("/topic/create?topic=t", f"/channel/create?{Q}"):
        req = urllib.request.Request(
            f"http://{group.private_http(1)}{target}", data=b"", headers={PEER_HEADER: "1"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200
    with group.pin(1) as pub:
        for i in range(5):
            pub.pub("t", b"m%d" % i)
    assert group.worker_stats(0, "&topic=t")["topics"] is None
    status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=2")
    assert status == 200
    ids = list(_bodies(answer))
    status, answer = _ask(group, 0, f"/message/fin?{Q}", "\n".join(ids).encode())
    assert (status, json.loads(answer)) == (200, {"ok": 2, "failed": []})
    status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=2&lease=L")
    assert status == 200 and len(_bodies(answer)) == 2
    status, answer = _ask(group, 0, f"/message/fin?{Q}&lease=L")
    assert (status, json.loads(answer)) == (200, {"ok": 2, "failed": []})
    status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=1")
    (one,) = _bodies(answer)
    assert _ask(group, 0, f"/message/fin?{Q}&id={one}") == (200, b"OK")
    (topic,) = group.worker_stats(1, "&topic=t")["topics"]
    (channel,) = topic["channels"]
    assert (channel["depth"], channel["in_flight_count"]) == (0, 0)
    none = "0000000000000000"
    for target, refusal in (
        (f"/channel/receive?{Q}&n=0", (400, {"message": "INVALID_N"})),
        (f"/channel/peek?{Q}&state=x", (400, {"message": "INVALID_STATE"})),
        (f"/message/touch?{Q}&id={none}&vt=0", (400, {"message": "INVALID_VT"})),
        (f"/message/defer?{Q}&id={none}&ms=-1", (400, {"message": "INVALID_MS"})),
        (f"/message/cancel?{Q}&id={none}", (404, {"message": "MESSAGE_NOT_FOUND"})),
    ):
        status, answer = _ask(group, 0, target)
        assert (status, json.loads(answer)) == refusal, target
    for target in (
        f"/message/fin?topic=t&channel=none&id={none}",
        "/channel/pop?topic=t&channel=none",
    ):
        status, answer = _ask(group, 0, target)
        assert (status, json.loads(answer)) == (404, {"message": "CHANNEL_NOT_FOUND"}), target


def test_a_pop_whose_peer_answers_too_late_loses_nothing(group: Group) -> None:
    """An HTTP pop asks worker 1 while it does not answer (stopped): it gives up after the
    ask's timeout, and worker 1 serves the request once it runs again. What worker 1 took must
    come back to its channel (received under a lease, then finished), not be finished there
    and left out of the answer (a `/channel/pop` at the peer lost it). The answer of a pop
    that reaches the peer in time is a pop's: finished there, no `due`."""
    group.start("--msg-timeout=3s")
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?{Q}")[0] == 200
    with group.pin(1) as pub:
        pub.pub("t", b"w1-late")
    worker_1 = group.pids()[1]
    os.kill(worker_1, signal.SIGSTOP)
    try:
        status, answer = _ask(group, 0, f"/channel/pop?{Q}&n=5")
        assert status == 200 and _bodies(answer) == {}  # worker 1 did not answer in time
    finally:
        os.kill(worker_1, signal.SIGCONT)
    got: dict[str, bytes] = {}
    wait_until(
        lambda: got.update(_bodies(_ask(group, 0, f"/channel/pop?{Q}&n=5")[1])) or got,
        30,
        "the message back",
    )
    assert list(got.values()) == [b"w1-late"]
    status, answer = _ask(group, 0, f"/channel/peek?{Q}&n=5&state=in_flight")
    assert status == 200 and _bodies(answer) == {}  # finished where it was
    with group.pin(1) as pub:
        pub.pub("t", b"w1-in-time")
    status, answer = _ask(group, 0, f"/channel/pop?{Q}&n=5")
    assert [set(m) for m in json.loads(answer)["messages"]] == [
        {"id", "timestamp", "attempts", "body"}
    ]


def test_a_receive_asked_again_elsewhere_gets_back_what_its_lease_holds(group: Group) -> None:
    """A receive under a lease, asked again (`again=true`, a Spark task run twice) of another
    worker, gets back what the lease holds in every worker before any new message: worker 1,
    asked again with a backlog of its own, filled `n` with new messages and never asked worker
    0 for the ones the lease held there, which the lease's FIN then finished unread."""
    group.start()
    _fill(group, 6)
    status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=6&lease=L&again=true")
    held = _bodies(answer)
    assert status == 200 and {b[:2] for b in held.values()} == {b"w0"}  # worker 0's own six
    status, frames = _ask(group, 1, f"/channel/receive?{Q}&n=8&lease=L&again=true", binary=True)
    again, pos = [], 0
    while pos < len(frames):  # nsqd's frames: size, type, timestamp, attempts, id, body
        (size,) = struct.unpack_from(">i", frames, pos)
        again.append(frames[pos + 18 : pos + 34].decode())
        pos += 4 + size
    assert status == 200 and sorted(again[:6]) == sorted(held) and len(again) == 8  # + 2 new
    status, answer = _ask(group, 0, f"/message/fin?{Q}&lease=L")
    assert json.loads(answer) == {"ok": 8, "failed": []}  # every one of them was read


def test_a_leased_receive_whose_peer_answers_too_late_is_refused(group: Group) -> None:
    """A receive under a named lease whose peer does not answer in time (stopped; 10 s) is
    refused (503): the peer takes under the lease once it runs again, and an answer that left
    those out (a 200 with worker 0's messages alone) had them finished with the lease unread.
    Asked again once the peer answers, the lease's messages come back from both workers."""
    group.start()
    bodies = _fill(group, 3)
    worker_1 = group.pids()[1]
    os.kill(worker_1, signal.SIGSTOP)
    try:
        status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=6&lease=L&again=true", wait=30)
        assert (status, json.loads(answer)) == (503, {"message": "PEER_UNAVAILABLE"})
    finally:
        os.kill(worker_1, signal.SIGCONT)
    status, answer = _ask(group, 0, f"/channel/receive?{Q}&n=6&lease=L&again=true")
    assert status == 200 and set(_bodies(answer).values()) == bodies
