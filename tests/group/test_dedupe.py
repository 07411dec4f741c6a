"""--dedupe-window with --workers (ours: docs/dedupe.md, docs/workers.md): a topic's keys have
one owner, the worker crc32(topic) % N, and a keyed /pub or /mpub that reaches another worker
is made by the owner, so a retry landing on any worker is still a duplicate. Publishes without
a key are made where they arrive. Each request here is sent to one worker's own HTTP listener
(as the shared port would hand it over), or over the shared port itself."""

from __future__ import annotations

import http.client
import json
import os
import signal
import urllib.request

from nsqd.group.keys import owner
from tests.ops.conftest import START_TIMEOUT, http_get, http_post, wait_until

from .conftest import Group


def _topics_owned() -> dict[int, str]:
    """A topic whose keys worker k owns, for k in 0 and 1."""
    found: dict[int, str] = {}
    for i in range(100):
        found.setdefault(owner(f"d{i}", 2), f"d{i}")
    return found


def _post(group: Group, k: int, target: str, body: bytes) -> tuple[int, bytes]:
    return http_post(f"http://{group.private_http(k)}{target}", body)


def _count(group: Group, k: int, topic: str, key: str = "message_count") -> int:
    """Messages made in worker k's partition for `topic` since it started (or those it holds:
    key="depth"), 0 when it has no such topic."""
    topics = group.worker_stats(k, f"&topic={topic}")["topics"] or []
    return sum(t[key] for t in topics)


def _group_count(group: Group, topic: str) -> int:
    status, body = http_get(f"http://127.0.0.1:{group.http}/stats?format=json&topic={topic}")
    assert status == 200
    return sum(t["message_count"] for t in json.loads(body)["topics"] or [])


def test_a_key_is_seen_by_its_topics_owner_whichever_worker_gets_it(group: Group) -> None:
    group.start("--dedupe-window=60s")
    for k, topic in _topics_owned().items():
        other = 1 - k
        for via in (k, other, other, k):  # the owner first, then a retry through the peer
            assert _post(group, via, f"/pub?topic={topic}&dedupe_key=job-1", b"one") == (
                200,
                b"OK",
            )
        for via, body in ((other, b"a\nb\nc"), (k, b"a\nb\nc\nd\ne")):
            assert _post(group, via, f"/mpub?topic={topic}&dedupe_key=b7", body) == (200, b"OK")
        # a deferred one and a refusal: the owner's answer, as it gave it
        for via in (other, k):
            target = f"/pub?topic={topic}&defer=10&dedupe_key=late"
            assert _post(group, via, target, b"l") == (200, b"OK")
        target = f"/mpub?topic={topic}&dedupe_key=p&dedupe_offset=-1"
        status, body = _post(group, other, target, b"x")
        assert (status, json.loads(body)) == (400, {"message": "INVALID_DEDUPE_OFFSET"})
        # every keyed message made once, in the owner; one without a key where it arrived
        assert _post(group, other, f"/pub?topic={topic}", b"plain") == (200, b"OK")
        assert (_count(group, k, topic), _count(group, other, topic)) == (1 + 5 + 1, 1)
        assert _group_count(group, topic) == 8


def test_keyed_publishes_over_the_shared_port_are_made_once(group: Group) -> None:
    """Keep-alive publishers on the shared port: the HTTP reactor's synchronous path hands a
    keyed publish of a topic owned elsewhere to the task that forwards it."""
    group.start("--dedupe-window=60s")
    topics = _topics_owned()
    for _ in range(4):  # four connections: the kernel spreads them over both workers
        conn = http.client.HTTPConnection("127.0.0.1", group.http, timeout=5)
        for i in range(50):
            for topic in topics.values():
                conn.request("POST", f"/pub?topic={topic}&dedupe_key=k{i}", body=b"m%d" % i)
                answer = conn.getresponse()
                assert (answer.status, answer.read()) == (200, b"OK")
        conn.close()
    for k, topic in topics.items():
        assert (_count(group, k, topic), _count(group, 1 - k, topic)) == (50, 0)


def test_an_owner_that_does_not_answer_refuses_the_publish_and_the_key_holds_after(
    group: Group,
) -> None:
    """The owner killed (its supervisor stopped, so it stays down): a keyed publish of its
    topic is refused with a 503 and made nowhere; once it is back, the key seen before the
    kill is still a duplicate (its key file and --mem-queue-size=0's disk queue)."""
    group.start("--dedupe-window=60s", "--mem-queue-size=0")
    topic = _topics_owned()[0]
    assert _post(group, 1, f"/pub?topic={topic}&dedupe_key=a", b"a") == (200, b"OK")
    assert group.proc is not None
    group.proc.send_signal(signal.SIGSTOP)
    before = group.pids()[0]
    os.kill(before, signal.SIGKILL)
    try:
        status, body = _post(group, 1, f"/pub?topic={topic}&dedupe_key=b", b"b")
        assert (status, json.loads(body)) == (503, {"message": "DEDUPE_OWNER_UNAVAILABLE"})
        assert _count(group, 1, topic) == 0
    finally:
        group.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: group.pids()[0] != before, START_TIMEOUT, "worker 0 started again")
    wait_until(lambda: group.link(0), START_TIMEOUT, "worker 0's link")
    for key in ("a", "b", "b"):
        assert _post(group, 1, f"/pub?topic={topic}&dedupe_key={key}", b"x") == (200, b"OK")
    assert (_count(group, 0, topic, "depth"), _count(group, 1, topic, "depth")) == (2, 0)


def test_the_group_metrics_count_every_workers_duplicates(group: Group) -> None:
    group.start("--dedupe-window=60s")
    topics = _topics_owned()
    for topic in topics.values():
        for _ in range(3):
            assert _post(group, 0, f"/pub?topic={topic}&dedupe_key=same", b"x") == (200, b"OK")
    for k in (0, 1):
        url = f"http://{group.private_http(k)}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        for topic in topics.values():
            assert f'nsq_topic_duplicates_total{{topic="{topic}"}} 2' in text, (k, text[-2000:])
