"""redis-py unchanged against ours: what it sends on connect (CLIENT SETINFO, HELLO, AUTH),
the seed's reliable-queue pattern with blocking consumers in threads, pipelines, and RESP3
refused with a clear error. The same checks run against redis-server: the test is right."""

from __future__ import annotations

import threading

import pytest
import redis

from conformance.resp.script import PASSWORD

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
    r = client(port, client_name="worker-1", lib_name="redis-py", lib_version="5")
    assert r.ping() is True
    assert r.echo("hi") == b"hi"
    assert r.client_getname() == "worker-1"
    assert isinstance(r.client_id(), int)
    info = r.info()
    assert info["redis_version"].startswith("7.") and info["loading"] == 0
    hello = r.execute_command("HELLO", "2")
    assert hello[:2] == [b"server", b"redis"] and hello[4:6] == [b"proto", 2]
    assert r.execute_command("SELECT", "0")
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


def test_resp3_refused_clearly(pair) -> None:
    redis_server, ours = pair.by_kind["plain"]
    real = redis.Redis(host="127.0.0.1", port=redis_server.port, protocol=3, socket_timeout=5)
    assert real.ping() is True  # Redis speaks RESP3; ours refuses it with Redis's own error
    real.close()
    c = redis.Redis(host="127.0.0.1", port=ours.port, protocol=3, socket_timeout=5)
    with pytest.raises(redis.ResponseError, match="NOPROTO unsupported protocol version"):
        c.ping()
    c.close()


def test_password(pair) -> None:
    redis_server, ours = pair.by_kind["auth"]
    for server in (redis_server, ours):
        bad = client(server.port)
        with pytest.raises(redis.AuthenticationError):
            bad.ping()
        bad.close()
        good = client(server.port, password=PASSWORD)
        assert good.ping() is True
        good.close()
        wrong = client(server.port, password="nope")
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
