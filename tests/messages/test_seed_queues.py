"""The RSMQ and PHPMQ operations of the seed documents (000, 002), one test each, written
against our HTTP and TCP API (docs/http-access.md's table)."""

from __future__ import annotations

import time

from durability import helpers

from .support import call, channel_stats, msgs, setup_queue

# -- RSMQ (seed 000), one operation per test ---------------------------------------------------


def test_rsmq_create_queue_with_vt_delay_maxsize(daemon: helpers.Daemon) -> None:
    """createQueue(qname, vt=30, delay=0, maxsize=65535)."""
    status, doc = call(daemon, "POST", "/channel/config?topic=rq&channel=c&msg_timeout=30000")
    assert status == 200
    call(daemon, "POST", "/topic/config?topic=rq&max_msg_size=65535&delay=0")
    doc = call(daemon, "GET", "/channel/config?topic=rq&channel=c")[1]["queue"]
    assert (doc["vt"], doc["delay"], doc["maxsize"]) == (30000, 0, 65535)
    assert abs(doc["created"] - time.time()) < 5 and doc["modified"] >= doc["created"]


def test_rsmq_list_queues(daemon: helpers.Daemon) -> None:
    """listQueues(): the channels of /stats (a queue is a topic's channel)."""
    for name in ("a", "b"):
        call(daemon, "POST", f"/channel/config?topic={name}&channel=c&msg_timeout=30000")
    _, doc = call(daemon, "GET", "/stats?format=json")
    queues = sorted(
        f"{t['topic_name']}:{c['channel_name']}" for t in doc["topics"] for c in t["channels"]
    )
    assert queues == ["a:c", "b:c"]


def test_rsmq_send_message(daemon: helpers.Daemon) -> None:
    """sendMessage(qname, message, delay): /pub (and /pub?defer=MS for a delay)."""
    setup_queue(daemon, "rq", [])
    assert call(daemon, "POST", "/pub?topic=rq", b"Hello, World") == (200, "OK")
    assert call(daemon, "POST", "/pub?topic=rq&defer=60000", b"later") == (200, "OK")
    queue = call(daemon, "GET", "/channel/config?topic=rq&channel=c")[1]["queue"]
    assert (queue["totalsent"], queue["msgs"], queue["hiddenmsgs"]) == (2, 2, 1)


def test_rsmq_receive_message(daemon: helpers.Daemon) -> None:
    """receiveMessage(qname, vt): id, message, rc (receive count), ts (sent)."""
    setup_queue(daemon, "rq", [b"Hello, World"])
    (m,) = msgs(daemon, "/channel/receive?topic=rq&channel=c&vt=30000")
    assert (m["body"], m["attempts"]) == (b"Hello, World", 1)
    assert abs(m["timestamp"] / 1e9 - time.time()) < 5
    assert call(daemon, "GET", "/channel/config?topic=rq&channel=c")[1]["queue"]["totalrecv"] == 1


def test_rsmq_change_message_visibility(daemon: helpers.Daemon) -> None:
    """changeMessageVisibility(qname, id, vt): the lease becomes now + vt."""
    setup_queue(daemon, "rq", [b"m"])
    (m,) = msgs(daemon, "/channel/receive?topic=rq&channel=c&vt=1000")
    assert (
        call(daemon, "POST", f"/message/touch?topic=rq&channel=c&id={m['id']}&vt=600000")[0] == 200
    )
    (held,) = msgs(daemon, "/channel/peek?topic=rq&channel=c&state=in_flight", "GET")
    assert held["due"] > time.time() * 1000 + 500_000


def test_rsmq_delete_message(daemon: helpers.Daemon) -> None:
    """deleteMessage(qname, id)."""
    setup_queue(daemon, "rq", [b"m"])
    (m,) = msgs(daemon, "/channel/receive?topic=rq&channel=c")
    assert call(daemon, "POST", f"/message/fin?topic=rq&channel=c&id={m['id']}") == (200, "OK")
    assert call(daemon, "GET", "/channel/config?topic=rq&channel=c")[1]["queue"]["msgs"] == 0


def test_rsmq_pop_message(daemon: helpers.Daemon) -> None:
    """popMessage(qname): receive and delete at once."""
    setup_queue(daemon, "rq", [b"one", b"two"])
    assert [m["body"] for m in msgs(daemon, "/channel/pop?topic=rq&channel=c")] == [b"one"]
    assert call(daemon, "GET", "/channel/config?topic=rq&channel=c")[1]["queue"]["msgs"] == 1


def test_rsmq_get_and_set_queue_attributes(daemon: helpers.Daemon) -> None:
    """getQueueAttributes / setQueueAttributes(vt, delay, maxsize)."""
    setup_queue(daemon, "rq", [])
    call(daemon, "POST", "/channel/config?topic=rq&channel=c&msg_timeout=45000&delay=1000")
    queue = call(daemon, "GET", "/channel/config?topic=rq&channel=c")[1]["queue"]
    assert (queue["vt"], queue["delay"]) == (45000, 1000)
    assert set(queue) >= {"totalrecv", "totalsent", "created", "modified", "msgs", "hiddenmsgs"}


def test_rsmq_delete_queue(daemon: helpers.Daemon) -> None:
    """deleteQueue(qname)."""
    setup_queue(daemon, "rq", [b"m"])
    assert call(daemon, "POST", "/channel/delete?topic=rq&channel=c")[0] == 200
    assert call(daemon, "GET", "/channel/config?topic=rq&channel=c")[0] == 404


# -- PHPMQ (seed 002), one operation per test --------------------------------------------------


def test_phpmq_send_with_ttl(daemon: helpers.Daemon) -> None:
    """001 send: queue name, content, TTL (s): /pub?ttl=MS; a consumer sees the TTL left."""
    setup_queue(daemon, "Foo", [])
    assert call(daemon, "POST", "/pub?topic=Foo&ttl=3600000", b"Hello World") == (200, "OK")
    (m,) = msgs(daemon, "/channel/peek?topic=Foo&channel=c", "GET")
    assert 3_500_000 < m["expires"] - time.time() * 1000 <= 3_600_000


def test_phpmq_consume_n(daemon: helpers.Daemon) -> None:
    """002 consume request for 5 messages, 003 the server dispatches them (with id and TTL)."""
    setup_queue(daemon, "Foo", [b"m%d" % i for i in range(7)])
    got = msgs(daemon, "/channel/receive?topic=Foo&channel=c&n=5")
    assert [m["body"] for m in got] == [b"m%d" % i for i in range(5)]
    with daemon.client() as conn:  # the same over TCP: RDY 5
        conn.sub("Foo", "c", rdy=5)
        assert [m.body for m in conn.messages(2)] == [b"m5", b"m6"]


def test_phpmq_acknowledge(daemon: helpers.Daemon) -> None:
    """004 acknowledge by id: /message/fin (TCP: FIN)."""
    setup_queue(daemon, "Foo", [b"m"])
    (m,) = msgs(daemon, "/channel/receive?topic=Foo&channel=c")
    assert call(daemon, "POST", f"/message/fin?topic=Foo&channel=c&id={m['id']}") == (200, "OK")
    assert channel_stats(daemon, "Foo", "c")["in_flight_count"] == 0


def test_phpmq_requeue(daemon: helpers.Daemon) -> None:
    """005 requeue by id (back at the end of the queue): /message/req (TCP: REQ)."""
    setup_queue(daemon, "Foo", [b"first", b"second"])
    first = msgs(daemon, "/channel/receive?topic=Foo&channel=c")[0]
    assert call(daemon, "POST", f"/message/req?topic=Foo&channel=c&id={first['id']}") == (200, "OK")
    assert [m["body"] for m in msgs(daemon, "/channel/pop?topic=Foo&channel=c&n=2")] == [
        b"second",
        b"first",
    ]


def test_phpmq_dead_letter(daemon: helpers.Daemon) -> None:
    """006 dead letter: the message leaves the queue whatever its TTL: /message/fin; with
    max_attempts on the channel, a message that keeps failing goes to its dead-letter topic."""
    call(daemon, "POST", "/channel/config?topic=Foo&channel=c&max_attempts=1")
    call(daemon, "POST", "/pub?topic=Foo&ttl=3600000", b"poison")
    (m,) = msgs(daemon, "/channel/receive?topic=Foo&channel=c")
    assert call(daemon, "POST", f"/message/req?topic=Foo&channel=c&id={m['id']}") == (200, "OK")
    assert channel_stats(daemon, "Foo", "c")["depth"] == 0
    call(daemon, "POST", "/channel/create?topic=Foo.dead&channel=c")
    with daemon.client() as conn:
        conn.sub("Foo.dead", "c", rdy=1)
        assert conn.message().body == b"poison"
