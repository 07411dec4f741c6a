"""Answers of a group that the HTTP differential fuzz (test_http_fuzz.py) found unlike one
nsqd's, each where a topic is in one worker alone (published there) and the request lands in
the other: asked of a worker's private HTTP without the peer header, which answers for the
group as the shared port does, so the test picks the worker."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.ops.conftest import http_get, http_post, wait_until

from .conftest import PEER_HEADER, Group


def _in_worker(group: Group, k: int, topic: str, *bodies: bytes) -> None:
    with group.pin(k) as pub:
        for body in bodies:
            pub.pub(topic, body)


def _stats(group: Group, k: int, query: str = "") -> dict:
    status, body = http_get(f"http://{group.private_http(k)}/stats?format=json{query}")
    assert status == 200, body
    return json.loads(body)


def test_a_missing_channel_of_a_topic_a_peer_has_is_channel_not_found(group: Group) -> None:
    """nsqd's CHANNEL_NOT_FOUND: the group has the topic (worker 1's), though worker 0, which
    got the request, does not (it said TOPIC_NOT_FOUND)."""
    group.start()
    _in_worker(group, 1, "only1", b"x")
    base = f"http://{group.private_http(0)}"
    for action in ("delete", "empty", "pause", "unpause"):
        answer = http_post(f"{base}/channel/{action}?topic=only1&channel=nope")
        assert answer == (404, b'{"message":"CHANNEL_NOT_FOUND"}'), (action, answer)
    answer = http_post(f"{base}/channel/delete?topic=none&channel=nope")
    assert answer == (404, b'{"message":"TOPIC_NOT_FOUND"}'), answer


def test_a_channel_filter_of_a_topic_a_peer_has_lists_no_topic(group: Group) -> None:
    """/stats?topic=T&channel=C where the group has T but not C: nsqd's empty list, not the
    null of a topic no worker has (worker 0's own answer was null)."""
    group.start()
    _in_worker(group, 1, "only1", b"x")
    assert _stats(group, 0, "&topic=only1&channel=nope")["topics"] == []
    assert _stats(group, 0, "&topic=none&channel=nope")["topics"] is None
    assert _stats(group, 0, "&topic=none")["topics"] is None


def test_a_channel_made_where_its_topic_is_not_is_made_in_every_worker(group: Group) -> None:
    """A channel create of a topic that one worker alone has, asked of either worker, makes
    the topic and the channel in both: what either takes afterwards reaches the channel
    (worker 0 refused the create before, and its publishes stayed in its topic)."""
    group.start()
    _in_worker(group, 1, "a", b"1")  # asked of worker 0, which lacks it
    _in_worker(group, 0, "b", b"1")  # asked of worker 0, which has it
    base = f"http://{group.private_http(0)}"
    for topic in ("a", "b"):
        assert http_post(f"{base}/channel/create?topic={topic}&channel=c")[0] == 200
    for k in (0, 1):
        topics = group.worker_stats(k)["topics"]
        names = {t["topic_name"]: [c["channel_name"] for c in t["channels"]] for t in topics}
        assert names == {"a": ["c"], "b": ["c"]}, (k, names)
    for k in (0, 1):
        _in_worker(group, k, "a", b"2")
        _in_worker(group, k, "b", b"2")

    def settled() -> bool:
        topics = _stats(group, 1)["topics"]
        return all((t["depth"], t["channels"][0]["depth"]) == (0, 3) for t in topics)

    wait_until(settled, 5, "every message in channel c")


def test_a_channel_made_under_a_paused_topic_takes_none_of_its_messages(group: Group) -> None:
    """Topic t paused in the group while worker 0 lacked it; a publish then made worker 0's
    copy, unpaused. A channel create now pauses that copy before making the channel: as in
    one nsqd, the paused topic keeps its messages (worker 0's went into the channel)."""
    group.start()
    _in_worker(group, 1, "t", b"1")
    assert http_post(f"http://{group.private_http(1)}/topic/pause?topic=t")[0] == 200
    _in_worker(group, 0, "t", b"2")
    made = http_post(f"http://{group.private_http(0)}/channel/create?topic=t&channel=c")
    assert made[0] == 200, made
    for k in (0, 1):
        (topic,) = group.worker_stats(k)["topics"]
        assert (topic["paused"], topic["depth"], topic["channels"][0]["depth"]) == (True, 1, 0)
    (topic,) = _stats(group, 0)["topics"]
    assert (topic["paused"], topic["depth"], topic["channels"][0]["depth"]) == (True, 2, 0)


def test_a_topic_made_in_a_worker_after_the_pause_takes_it(group: Group) -> None:
    """Topic t made in worker 0 alone and paused in the group; a PUB into worker 1, which
    lacked it, makes worker 1's copy: paused too, as one nsqd's paused topic keeps every
    message until the unpause (it was made unpaused, and its channel delivered at once)."""
    group.start()
    _in_worker(group, 0, "t", b"0")
    assert http_post(f"http://{group.private_http(0)}/topic/pause?topic=t")[0] == 200
    _in_worker(group, 1, "t", b"1")
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(10)
        sub.sock.settimeout(1.0)
        with pytest.raises(TimeoutError):
            kind, data = sub.frame()
            raise AssertionError(f"delivered while paused: {kind} {data[26:]!r}")
        sub.sock.settimeout(5.0)
        assert http_post(f"http://{group.private_http(0)}/topic/unpause?topic=t")[0] == 200
        bodies = []
        for _ in range(2):
            msg_id, body = sub.message()
            sub.fin(msg_id)
            bodies.append(body)
        assert sorted(bodies) == [b"0", b"1"]
        sub.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sub.frame()  # each once


@pytest.mark.parametrize("path", ["/group/queues", "/group/paused?topic=t"])
@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "OPTIONS"])
def test_the_paths_workers_ask_each_other_are_not_a_clients(
    group: Group, path: str, method: str
) -> None:
    """A client's request to a path only the workers ask each other gets the Go nsqd's answer
    to a path it has not, whatever the method (a POST got 405 with `Allow: GET`, an OPTIONS
    200, naming a route one nsqd lacks); a peer still gets its answer."""
    group.start()
    for url in (f"http://127.0.0.1:{group.http}{path}", f"http://{group.private_http(0)}{path}"):
        req = urllib.request.Request(url, data=b"" if method != "GET" else None, method=method)
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                answer = (resp.status, resp.read(), resp.headers.get("Allow"))
        except urllib.error.HTTPError as exc:
            answer = (exc.code, exc.read(), exc.headers.get("Allow"))
        assert answer == (404, b'{"message":"NOT_FOUND"}', None), (url, answer)
    req = urllib.request.Request(f"http://{group.private_http(0)}{path}")
    req.add_header(PEER_HEADER, "1")
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200
