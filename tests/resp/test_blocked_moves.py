"""A blocked BLMOVE/BRPOPLPUSH whose move cannot be done, with real sockets on a real daemon: the
client that pushed to the source is answered as always (one client's blocked command never
closes another's connection), no element is lost (it stays in the source, where a refused
LMOVE leaves it), and the blocked client gets the error LMOVE would have given it: at once,
before it waits, for a destination that never takes a push (channel:<t>:<c>); when the element
arrives, for one the bridge will not publish (empty, over --max-msg-size, a full queue).
A fuzz campaign found the pusher closed with "unexpected error" and the element gone."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .helpers import client, wait_for

BODY_EMPTY = "bridge: an NSQ message body cannot be empty"
NOT_FOR_PUSH = "bridge: push to topic:<topic>; channel:<topic>:<channel> is for pops"


class Blocked:
    """One command on a connection of its own, in a thread: its reply, or its error's text."""

    def __init__(self, port: int, call: Callable[[redis.Redis], object]) -> None:
        # its own timeout, shorter than the join: a client never answered fails the test
        self.conn = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
        self.result: dict[str, object] = {}
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[redis.Redis], object]) -> None:
        try:
            self.result["reply"] = call(self.conn)
        except redis.ResponseError as exc:
            self.result["error"] = str(exc)
        except Exception as exc:  # a timeout: still blocked (the defect)
            self.result["other"] = repr(exc)

    def get(self) -> dict[str, object]:
        self.thread.join(8)
        assert not self.thread.is_alive(), "the blocked client was never answered"
        self.conn.close()
        return self.result


def _pusher(port: int) -> redis.Redis:
    """The client that pushes: one connection, never retried (redis-py would send a command
    again on a new connection when the daemon closes this one, hiding the close)."""
    return client(port, single_connection_client=True, retry=Retry(NoBackoff(), 0))


def _blocked_count(r: redis.Redis) -> int:
    return int(r.info("clients")["blocked_clients"])


def _block(port: int, r: redis.Redis, call: Callable[[redis.Redis], object]) -> Blocked:
    """Start `call` and wait until its client is parked (or has its answer already)."""
    before = _blocked_count(r)
    b = Blocked(port, call)
    wait_for(lambda: _blocked_count(r) > before or b.result, 5, "the client to block")
    return b


def _done(server, r: redis.Redis, first_id: int) -> None:
    """The pusher's connection is the one it started on; the daemon logged no error."""
    assert r.client_id() == first_id
    r.close()
    text = server.log_path.read_text(errors="replace")
    assert "unexpected error" not in text and "Traceback" not in text, text[-3000:]


def _blocking_move(
    form: str, src: str, dst: str, wherefrom: str
) -> Callable[[redis.Redis], object]:
    """BLMOVE src dst <wherefrom> LEFT 0, or BRPOPLPUSH src dst 0 (RIGHT LEFT)."""

    def move(c: redis.Redis) -> object:
        if form == "blmove":
            return c.blmove(src, dst, 0, wherefrom, "LEFT")
        return c.brpoplpush(src, dst, 0)

    return move


@pytest.mark.parametrize("form", ["blmove", "brpoplpush"])
def test_a_move_to_a_channel_key_is_refused_before_it_waits(ours, form: str) -> None:
    """A channel:<t>:<c> destination never takes a push: with an empty source the blocked
    form answers LMOVE's error at once instead of waiting (LMOVE itself, on an empty source,
    answers nil: the source is checked first, as Redis does); a push that follows is answered
    and kept."""
    server = ours.start()
    r = _pusher(server.port)
    first_id = r.client_id()
    dst = "channel:bt:bc"
    move = _blocking_move(form, "bsrc", dst, "LEFT")

    assert r.lmove("bsrc", dst) is None  # empty source: nil, no error
    started = time.monotonic()
    b = _block(server.port, r, move)
    assert b.get() == {"error": NOT_FOR_PUSH}
    assert time.monotonic() - started < 3
    assert _blocked_count(r) == 0
    assert r.rpush("bsrc", "job-1") == 1
    assert r.lrange("bsrc", 0, -1) == [b"job-1"]
    # with elements the blocked form is LMOVE: the same error, the element kept
    with pytest.raises(redis.ResponseError) as now:
        move(r)
    assert str(now.value) == NOT_FOR_PUSH
    with pytest.raises(redis.ResponseError) as plain:
        r.lmove("bsrc", dst)
    assert str(plain.value) == NOT_FOR_PUSH
    assert r.lrange("bsrc", 0, -1) == [b"job-1"]
    assert r.llen(dst) == 0
    # where nothing waits (MULTI) it answers as LMOVE on an empty source: nil
    assert r.delete("bsrc") == 1
    p = r.pipeline(transaction=True)
    p.blmove("bsrc", dst, 0, "LEFT", "LEFT")
    p.brpoplpush("bsrc", dst, 0)
    assert p.execute() == [None, None]
    _done(server, r, first_id)


@pytest.mark.parametrize(
    ("form", "elem", "error"),
    [
        ("blmove", "", BODY_EMPTY),
        ("brpoplpush", "", BODY_EMPTY),
        ("blmove", "123456789", "bridge: message too big (--max-msg-size 8)"),
        ("brpoplpush", "123456789", "bridge: message too big (--max-msg-size 8)"),
    ],
)
def test_a_blocked_move_to_a_topic_refused_its_element(
    ours, form: str, elem: str, error: str
) -> None:
    """BLMOVE/BRPOPLPUSH src topic:<t>, and the element pushed is one the bridge will not
    publish: RPUSH is answered, the blocked client gets LMOVE's error, the element stays in
    the source and nothing reached the topic."""
    server = ours.start("--max-msg-size=8")
    r = _pusher(server.port)
    first_id = r.client_id()
    dst = "topic:et"
    move = _blocking_move(form, "esrc", dst, "RIGHT")

    b = _block(server.port, r, move)
    assert not b.result  # it waits: the topic takes pushes
    assert r.rpush("esrc", "first", elem) == 2  # the pusher is answered
    assert b.get() == {"error": error}
    # back at the end it was taken from, in its place
    assert r.lrange("esrc", 0, -1) == [b"first", elem.encode()]
    assert r.llen(dst) == 0
    with pytest.raises(redis.ResponseError) as plain:
        r.lmove("esrc", dst, "RIGHT", "LEFT")
    assert str(plain.value) == error
    assert r.lrange("esrc", 0, -1) == [b"first", elem.encode()]
    assert _blocked_count(r) == 0
    assert r.ping()
    _done(server, r, first_id)


def test_a_refused_element_goes_to_the_next_waiter(ours) -> None:
    """Two clients wait on one source: the first's move is refused (an empty body for a
    topic), so the element goes back and the second (BLPOP) gets it, as Redis serves the next
    waiter when one cannot be; a push to the refused one's topic still works after."""
    server = ours.start()
    r = _pusher(server.port)
    first_id = r.client_id()
    first = _block(server.port, r, lambda c: c.blmove("q", "topic:t1", 0, "LEFT", "LEFT"))
    second = _block(server.port, r, lambda c: c.blpop(["q"], 0))
    assert r.rpush("q", "") == 1
    assert first.get() == {"error": BODY_EMPTY}
    assert second.get() == {"reply": (b"q", b"")}
    assert r.exists("q") == 0
    assert r.llen("topic:t1") == 0
    third = _block(server.port, r, lambda c: c.blmove("q", "topic:t1", 0, "LEFT", "LEFT"))
    assert r.rpush("q", "ok") == 1
    assert third.get() == {"reply": b"ok"}
    assert r.llen("topic:t1") == 1
    _done(server, r, first_id)


def test_a_refused_element_keeps_its_key_ttl(ours) -> None:
    """The refused element was the list's last, so its pop took the key: put back, the key
    has its TTL again (Redis never deleted it). The push comes in MULTI with a PEXPIRE, so
    the key has a TTL when the waiter is served (after EXEC)."""
    server = ours.start()
    r = _pusher(server.port)
    first_id = r.client_id()
    b = _block(server.port, r, lambda c: c.brpoplpush("tsrc", "topic:tt", 0))
    p = r.pipeline(transaction=True)
    p.rpush("tsrc", "")
    p.pexpire("tsrc", 100_000)
    assert p.execute() == [1, True]
    assert b.get() == {"error": BODY_EMPTY}
    assert r.lrange("tsrc", 0, -1) == [b""]
    assert 0 < r.pttl("tsrc") <= 100_000
    _done(server, r, first_id)


def test_a_blocked_move_to_a_full_topic(ours) -> None:
    """The bridge refuses a publish (a channel's max_depth with overflow=reject): the blocked
    move gets RPUSH topic:<t>'s error, the element stays in the source."""
    server = ours.start()
    url = f"http://127.0.0.1:{server.http_port}/channel/config?topic=full&channel=c&max_depth=1"
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200
    r = _pusher(server.port)
    first_id = r.client_id()
    assert r.rpush("topic:full", "a") == 1
    with pytest.raises(redis.ResponseError) as direct:
        r.rpush("topic:full", "b")
    b = _block(server.port, r, lambda c: c.blmove("fsrc", "topic:full", 0, "LEFT", "RIGHT"))
    assert r.lpush("fsrc", "b") == 1
    assert b.get() == {"error": str(direct.value)}
    assert r.lrange("fsrc", 0, -1) == [b"b"]
    assert r.lpop("channel:full:c") == b"a"  # room again: the move goes through
    assert r.lmove("fsrc", "topic:full") == b"b"
    assert r.lpop("channel:full:c") == b"b"
    _done(server, r, first_id)


@pytest.mark.parametrize("form", ["lmove", "rpoplpush"])
def test_a_move_from_a_channel_to_a_full_topic_keeps_the_message(ours, form: str) -> None:
    """LMOVE channel:<t>:<c> topic:<u> finished the message before the publish was tried, so a
    refusal (u full, overflow=reject) lost it; it is now in flight until u took it."""
    server = ours.start()
    url = f"http://127.0.0.1:{server.http_port}/channel/config?topic=dst&channel=c&max_depth=1"
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200
    for path in ("/topic/create?topic=src", "/channel/create?topic=src&channel=c"):
        req = urllib.request.Request(f"{url.split('/channel')[0]}{path}", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200
    r = _pusher(server.port)
    first_id = r.client_id()
    assert r.rpush("topic:dst", "filler") == 1
    assert r.rpush("topic:src", "job") == 1

    def move() -> object:
        if form == "lmove":
            return r.lmove("channel:src:c", "topic:dst")
        return r.rpoplpush("channel:src:c", "topic:dst")

    with pytest.raises(redis.ResponseError) as refused:
        move()
    assert "full" in str(refused.value)
    assert r.llen("channel:src:c") == 1  # back in the channel
    assert r.lpop("channel:dst:c") == b"filler"  # room again: the move goes through
    assert move() == b"job"
    assert r.lpop("channel:dst:c") == b"job"
    assert r.llen("channel:src:c") == 0
    _done(server, r, first_id)
