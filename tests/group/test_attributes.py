"""Queue attributes in a group (POST/GET /topic/config, /channel/config): set in every worker
whichever worker got the request, a refusal changes nothing anywhere, and a read is the group's
(what the policies did summed, RSMQ's queue figures summed, a queue only a peer has found)."""

from __future__ import annotations

import json
import os
import signal
import urllib.request

from tests.ops.conftest import START_TIMEOUT, http_get, http_post, wait_until

from .conftest import PEER_HEADER, Group

LOOKUPD = b'["127.0.0.1:9"]'  # nobody there: the group's set, whether or not one answers


def worker_view(group: Group, k: int, path: str) -> dict | None:
    """Worker k's own answer (asked as a peer asks), None when it lacks the queue."""
    req = urllib.request.Request(
        f"http://{group.private_http(k)}{path}", headers={PEER_HEADER: "1"}
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        assert exc.code == 404, exc.read()
        return None


def test_set_in_every_worker_and_read_as_the_groups(group: Group) -> None:
    group.start()
    base = f"http://127.0.0.1:{group.http}"
    status, body = http_post(f"{base}/topic/config?topic=t&max_depth=1&overflow=drop_oldest")
    assert status == 200, body
    path = "/channel/config?topic=q&channel=c&max_attempts=3&msg_timeout=5000"
    assert http_post(base + path)[0] == 200
    for k in (0, 1):
        topic = worker_view(group, k, "/topic/config?topic=t")
        assert topic["attributes"]["max_depth"] == 1, (k, topic)
        assert topic["attributes"]["overflow"] == "drop_oldest", (k, topic)
        channel = worker_view(group, k, "/channel/config?topic=q&channel=c")
        assert (channel["attributes"]["max_attempts"], channel["queue"]["vt"]) == (3, 5000)

    # refused in the first worker asked: nothing changed anywhere
    status, body = http_post(f"{base}/topic/config?topic=t&max_depth=1&ttl=-5")
    assert (status, json.loads(body)["message"]) == (400, "INVALID_VALUE"), body
    status, body = http_post(f"{base}/topic/config?topic=other&nonsense=1")
    assert (status, json.loads(body)["message"]) == (400, "INVALID_ATTRIBUTE"), body
    for k in (0, 1):
        assert worker_view(group, k, "/topic/config?topic=t")["attributes"]["ttl"] == 0
        assert worker_view(group, k, "/topic/config?topic=other") is None

    # what each worker's policies did, summed: 3 published in each worker, 2 dropped in each
    for k in (0, 1):
        with group.pin(k) as pub:
            for i in range(3):
                pub.pub("t", b"%d" % i)
            pub.pub("q", b"a")
    for _ in range(4):  # whichever worker answers
        status, body = http_get(f"{base}/topic/config?topic=t")
        assert status == 200, body
        assert json.loads(body)["counts"] == {"expired": 0, "dropped": 4}, body
        status, body = http_get(f"{base}/channel/config?topic=q&channel=c")
        queue = json.loads(body)["queue"]
        assert (queue["msgs"], queue["totalsent"], queue["hiddenmsgs"]) == (2, 2, 0), queue


def test_a_queue_only_a_peer_has(group: Group) -> None:
    group.start()
    with group.pin(1) as pub:
        pub.pub("only1", b"x")
    base = f"http://{group.private_http(0)}"  # worker 0, asked for the group (no peer header)
    status, body = http_get(f"{base}/topic/config?topic=only1")
    assert status == 200, body
    assert json.loads(body)["attributes"]["ttl"] == 0
    status, body = http_post(f"{base}/topic/config?topic=only1&ttl=60000")
    assert status == 200, body
    assert worker_view(group, 1, "/topic/config?topic=only1")["attributes"]["ttl"] == 60000
    # a POST makes the queue where it is missing (RSMQ's createQueue), here in every worker
    assert worker_view(group, 0, "/topic/config?topic=only1")["attributes"]["ttl"] == 60000
    status, body = http_get(f"{base}/topic/config?topic=none")
    assert (status, body) == (404, b'{"message":"TOPIC_NOT_FOUND"}'), body
    status, body = http_get(f"{base}/channel/config?topic=only1&channel=none")
    assert (status, body) == (404, b'{"message":"CHANNEL_NOT_FOUND"}'), body


def test_a_worker_down_takes_the_attributes_set_meanwhile(group: Group) -> None:
    """Set while worker 1 was down (its supervisor held, so it is not started again yet):
    worker 1 takes them, and the log level, from its peers at its next start, as it takes a
    pause, and the nsqlookupd addresses from its supervisor."""
    group.start()
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/channel/config?topic=t&channel=c&max_attempts=4")[0] == 200
    assert worker_view(group, 1, "/channel/config?topic=t&channel=c") is not None
    assert group.proc is not None
    group.proc.send_signal(signal.SIGSTOP)
    try:
        worker = group.pids()[1]
        os.kill(worker, signal.SIGKILL)
        wait_until(lambda: _exited(worker), START_TIMEOUT, "worker 1 exited, its ports closed")
        assert http_post(f"{base}/topic/config?topic=t&ttl=60000")[0] == 200
        assert http_post(f"{base}/channel/config?topic=t&channel=c&max_attempts=")[0] == 200
        for option, value in (("log_level", b"debug"), ("nsqlookupd_tcp_addresses", LOOKUPD)):
            url = f"{base}/config/{option}"
            req = urllib.request.Request(url, data=value, method="PUT")
            with urllib.request.urlopen(req, timeout=5) as resp:
                assert resp.status == 200
    finally:
        group.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: group.listened(1) == 2, START_TIMEOUT, "worker 1 started and caught up")
    topic = worker_view(group, 1, "/topic/config?topic=t")
    assert topic["attributes"]["ttl"] == 60000, topic
    channel = worker_view(group, 1, "/channel/config?topic=t&channel=c")
    assert channel["attributes"]["max_attempts"] == 0, channel
    assert worker_view(group, 1, "/config/log_level") == 1  # nsqd's number for debug
    # the supervisor may start worker 1 (its first word: the old addresses) before it reads
    # worker 0's report of the PUT; the report's word follows it then
    wanted = json.loads(LOOKUPD)
    addresses = "/config/nsqlookupd_tcp_addresses"
    wait_until(lambda: worker_view(group, 1, addresses) == wanted, 5, "worker 1's addresses")


def _exited(pid: int) -> bool:
    """Whether every thread of `pid` has exited (its files closed, its listeners among them):
    its main thread is a zombie before the others have exited."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        with open(f"/proc/{pid}/stat") as f:
            zombie = f.read().rpartition(") ")[2].startswith("Z")
    except FileNotFoundError:
        return True
    return zombie and tasks == [str(pid)]
