"""redis-py unchanged against ours: what it sends on connect (CLIENT SETINFO, HELLO, AUTH),
the seed's reliable-queue pattern with blocking consumers in threads, pipelines, and RESP3
(protocol=3). The same checks run against redis-server: the test is right."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from conformance.resp.script import PASSWORD
from conformance.resp.wire import CLOSED, Conn, encode

from .helpers import client


@pytest.fixture(params=["ours", "redis"])
def port(request: pytest.FixtureRequest, pair) -> int:
    redis_server, ours = pair.by_kind["plain"]
    server = ours if request.param == "ours" else redis_server
    r = client(server.port)
    r.flushall()
    r.close()
    return server.port


def test_connect_and_connection_commands(port: int) -> None:
    driver = redis.DriverInfo(name="redis-py", lib_version="5")  # CLIENT SETINFO at connect
    r = client(port, client_name="worker-1", driver_info=driver)
    assert r.ping() is True
    assert r.echo("hi") == b"hi"
    assert r.client_getname() == "worker-1"
    assert isinstance(r.client_id(), int)
    info = r.info()
    assert info["redis_version"].startswith("7.") and info["loading"] == 0
    hello = r.execute_command("HELLO", "2")
    assert hello[:2] == [b"server", b"redis"] and hello[4:6] == [b"proto", 2]
    assert r.execute_command("SELECT", "0")
    # the port it listens on (a RESP2 reply after HELLO 2)
    assert r.execute_command("CONFIG", "GET", "port") == [b"port", str(port).encode()]
    assert info["tcp_port"] == port
    r.close()


def test_reliable_queue_with_blocking_consumers(port: int) -> None:
    producer = client(port)
    done: list[bytes] = []
    lock = threading.Lock()

    def worker() -> None:
        c = client(port)
        while True:
            job = c.blmove("jobs", "processing", 2, "RIGHT", "LEFT")
            if job is None or job == b"stop":
                if job == b"stop":
                    c.lrem("processing", 1, job)
                break
            with lock:
                done.append(job)
            assert c.lrem("processing", 1, job) == 1  # the ACK
        c.close()

    workers = [threading.Thread(target=worker) for _ in range(4)]
    for w in workers:
        w.start()
    jobs = [f"job-{i}".encode() for i in range(200)]
    for i in range(0, 200, 20):
        producer.lpush("jobs", *jobs[i : i + 20])
    producer.lpush("jobs", *[b"stop"] * 4)
    for w in workers:
        w.join(20)
        assert not w.is_alive()
    assert sorted(done) == sorted(jobs)
    assert producer.exists("jobs", "processing") == 0
    producer.close()


def test_blocking_pops_fifo_and_pipeline(port: int) -> None:
    results: dict[int, object] = {}
    started = []

    def pop(i: int) -> None:
        c = client(port)
        started.append(i)
        results[i] = c.brpop(["a", "b"], 5)
        c.close()

    threads = []
    for i in range(3):
        t = threading.Thread(target=pop, args=(i,))
        t.start()
        threads.append(t)
        while len(started) <= i:
            pass
    r = client(port)
    pipe = r.pipeline(transaction=False)
    pipe.rpush("b", "x", "y", "z").llen("b").lrange("b", 0, -1)
    assert pipe.execute()[0] == 3
    for t in threads:
        t.join(10)
    assert sorted(v[1] for v in results.values()) == [b"x", b"y", b"z"]  # type: ignore[index]
    assert r.exists("b") == 0
    r.close()


def test_resp3(port: int) -> None:
    """redis-py with protocol=3 (what redis-py 8 does by default): HELLO 3, then RESP3's
    nulls, maps and verbatim text parsed into the same Python values as on redis-server."""
    r = client(port, protocol=3)
    assert r.ping() is True
    assert r.get("nokey") is None
    assert r.rpush("q", "a", "b") == 2
    assert r.lpop("nokey", 2) is None
    assert r.blpop(["nokey"], timeout=0.01) is None
    assert r.blmove("nokey", "q", 0.01, "LEFT", "RIGHT") is None
    r.hset("h", mapping={"f": "v", "g": "w"})
    assert r.hgetall("h") == {b"f": b"v", b"g": b"w"}
    assert r.hgetall("nokey") == {}
    assert r.info()["redis_version"].startswith("7.")
    assert r.client_info()["id"] == r.client_id()
    assert r.execute_command("HELLO")[b"proto"] == 3
    with r.pipeline() as p:
        p.get("nokey").lpop("q").hgetall("h")
        assert p.execute() == [None, b"a", {b"f": b"v", b"g": b"w"}]
    r.close()


def test_default_protocol(port: int) -> None:
    """redis-py with its defaults (RESP3 from redis-py 8 on: HELLO 3 on connect)."""
    r = client(port)
    assert r.ping() is True
    hello = r.execute_command("HELLO")
    proto = hello[b"proto"] if isinstance(hello, dict) else hello[5]
    assert proto == (3 if int(redis.__version__.split(".")[0]) >= 8 else 2)
    r.rpush("jobs", "j1")
    assert r.lmove("jobs", "work", "LEFT", "RIGHT") == b"j1"
    assert r.hgetall("nokey") == {} and r.get("nokey") is None
    r.close()


def test_password(pair) -> None:
    redis_server, ours = pair.by_kind["auth"]
    once = Retry(NoBackoff(), 0)  # redis-py retries a refused AUTH 3 times, ~4 s of backoff
    for server in (redis_server, ours):
        bad = client(server.port, retry=once)
        with pytest.raises(redis.AuthenticationError):
            bad.ping()
        bad.close()
        good = client(server.port, password=PASSWORD)
        assert good.ping() is True
        good.close()
        wrong = client(server.port, password="nope", retry=once)
        with pytest.raises(redis.AuthenticationError):
            wrong.ping()
        wrong.close()


def test_transactions(port: int) -> None:
    r = client(port)
    pipe = r.pipeline()  # transaction=True: MULTI ... EXEC
    pipe.rpush("tq", "a", "b").lmove("tq", "tp", "LEFT", "RIGHT").lrange("tp", 0, -1)
    assert pipe.execute() == [2, b"a", [b"a"]]

    def move_one(p: redis.client.Pipeline) -> None:  # WATCH-based optimistic locking
        head = p.lindex("tq", 0)
        p.multi()
        p.lrem("tq", 1, head)
        p.rpush("tp", head)

    r.transaction(move_one, "tq")
    assert r.lrange("tp", 0, -1) == [b"a", b"b"] and r.exists("tq") == 0
    other = client(port)
    with r.pipeline() as p:
        p.watch("tp")
        other.rpush("tp", "c")  # changed under the watch: EXEC fails
        p.multi()
        p.lpop("tp")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.llen("tp") == 3
    other.close()
    r.close()


def test_client_list_kill_and_time(port: int) -> None:
    """What queue workers use to see and reap each other: CLIENT LIST/INFO fields, KILL by
    id (the victim's connection is closed), TIME."""
    me = client(port, client_name="reaper")
    victim = Conn(port)
    for cmd in ([b"CLIENT", b"SETNAME", b"worker-7"], [b"SELECT", b"3"]):
        victim.send(encode(cmd))
        assert victim.reply() == b"+OK\r\n"
    listed = {c["name"]: c for c in me.client_list()}
    assert {"reaper", "worker-7"} <= set(listed)
    found = listed["worker-7"]
    assert found["db"] == "3" and found["flags"] == "N" and found["user"] == "default"
    assert me.client_info()["name"] == "reaper"
    assert [c["name"] for c in me.client_list(client_id=[int(found["id"])])] == ["worker-7"]
    assert me.client_kill_filter(_id=int(found["id"])) == 1
    assert victim.reply() == CLOSED
    victim.close()
    assert "worker-7" not in {c["name"] for c in me.client_list()}
    seconds, micros = me.time()
    assert abs(seconds - time.time()) < 5 and 0 <= micros < 1_000_000
    me.close()
