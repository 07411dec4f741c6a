"""resp.log cannot be written (a full disk): the Redis front-end answers as Redis 7.0.15 does
after a failed AOF write (appendonly, appendfsync everysec), with redis-py clients, beside a
redis-server whose AOF is on a full disk as well: write commands (and PING) are refused with
`-MISCONF Errors writing to the AOF file: <strerror>` while reads are served, and once space
comes back the kept records are written, in order, and writes work again. Ours refuses the
write whose record failed too (Redis answers it +OK): no +OK for a change not in the log."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from . import helpers
from .helpers import nsqd_process
from .test_disk_faults import failing_fsync_disk, fill_up, resp_command, small_disk

FULL = "MISCONF Errors writing to the AOF file: No space left on device"
BIG = "b" * 10_000  # past what the file's last page still holds: the write needs a new one
READ_SCRIPT = "return redis.call('get', KEYS[1])"
WRITE_SCRIPT = "return redis.call('set', KEYS[1], ARGV[1])"


def _client(port: int) -> redis.Redis:
    return redis.Redis(helpers.HOST, port, socket_timeout=5)


def _error(call: object, *args: object) -> str:
    """The error text a command is answered with (it must be refused)."""
    with pytest.raises(redis.ResponseError) as refused:
        call(*args)  # type: ignore[operator]
    return str(refused.value)


@contextlib.contextmanager
def _ours(data: Path) -> Iterator[tuple[helpers.Daemon, int]]:
    port = nsqd_process.free_ports(1)[0]
    flags = (f"--resp-address={helpers.HOST}:{port}", "--resp-enable-debug-command")
    with helpers.running("ours", data, *flags) as daemon:
        yield daemon, port


@contextlib.contextmanager
def _redis_server(data: Path) -> Iterator[int]:
    port = nsqd_process.free_ports(1)[0]
    args = ["redis-server", "--port", str(port), "--bind", helpers.HOST, "--dir", str(data)]
    args += ["--save", "", "--appendonly", "yes", "--appendfsync", "everysec"]
    log = (data.parent / f"redis-{port}.log").open("wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        client = _client(port)
        assert helpers.wait_for(lambda: _pings(client), 10), "redis-server did not start"
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@contextlib.contextmanager
def _server(name: str, data: Path) -> Iterator[int]:
    """Ours or redis-server on `data`; its Redis port."""
    if name == "ours":
        with _ours(data) as (_, port):
            yield port
    else:
        with _redis_server(data) as port:
            yield port


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def _refusals(client: redis.Redis) -> dict[str, str]:
    """What a full disk refuses, once the server knows it cannot write."""
    pipe = client.pipeline(transaction=True)
    pipe.set("in-multi", "x")
    with pytest.raises(redis.ResponseError) as aborted:
        pipe.execute()
    return {
        "set": _error(client.set, "refused", "1"),
        "del": _error(client.delete, "k0"),
        "ping": _error(client.ping),
        "script": _error(client.eval, WRITE_SCRIPT, 1, "k0", "new").split(" script: ")[0],
        "multi": str(aborted.value),
    }


def _reads(client: redis.Redis) -> tuple[object, ...]:
    return (
        client.get("k0"),
        client.eval(READ_SCRIPT, 1, "k0"),
        client.publish("news", "still served"),
        client.exists("k1"),
    )


def test_redis_server_refuses_writes_with_misconf_on_a_full_disk_as_ours_does(
    tmp_path: Path,
) -> None:
    """Both on a full tmpfs: the same refusals (SET, DEL, PING, a writing script, a
    transaction that writes) and the same reads served."""
    seen = {}
    for name in ("redis", "ours"):
        data = tmp_path / name
        data.mkdir()
        with small_disk(data, "2m"), _server(name, data) as port:
            client = _client(port)
            for i in range(3):
                client.set(f"k{i}", "v")
            queued = socket.create_connection((helpers.HOST, port), timeout=5)
            assert resp_command(queued, b"MULTI") == b"+OK\r\n"
            assert resp_command(queued, b"SET", b"queued", b"before") == b"+QUEUED\r\n"
            fill_up(data, 0)
            with contextlib.suppress(redis.ResponseError):  # Redis: +OK; ours: MISCONF
                client.set("first", BIG)
            time.sleep(1.5)  # Redis finds out at its next flush (a second later)
            execed = resp_command(queued, b"EXEC")  # queued before: refused at EXEC
            queued.close()
            seen[name] = (_refusals(client), _reads(client), execed)
            (data / "filler").unlink()
            assert helpers.wait_for(lambda c=client: _set_works(c), 5)
    assert seen["ours"] == seen["redis"]
    refusals, reads, execed = seen["ours"]
    assert refusals["set"] == FULL
    assert execed == b"-EXECABORT Transaction discarded because of: " + FULL.encode() + b"\r\n"
    assert refusals["multi"] == "Command # 1 (SET in-multi x) of pipeline caused error: " + FULL
    assert reads == (b"v", b"v", 0, 1)


def _set_works(client: redis.Redis) -> bool:
    try:
        return bool(client.set("later", "ok"))
    except redis.ResponseError:
        return False


def test_a_full_disk_refuses_writes_serves_reads_and_the_records_follow_in_order(
    data_dir: Path,
) -> None:
    """The pass whose write failed answers its write MISCONF (its change is in memory and
    kept), later writes are refused, reads served, /ping NOK, no client closed; once space
    comes back the kept records are written within about a second, writes work, /ping OK,
    and a restart reads every change back (resp.log closed the pass's clients unanswered and
    dropped their records, while memory kept the changes)."""
    with small_disk(data_dir, "2m"):
        with _ours(data_dir) as (daemon, port):
            client, other = _client(port), _client(port)
            ids = client.client_id(), other.client_id()
            client.set("a", "1")
            client.rpush("list", "x", "y")
            fill_up(data_dir, 0)
            assert _error(client.set, "b", BIG) == FULL
            assert client.get("b") == BIG.encode()  # in memory: it may still take effect
            assert _error(other.set, "c", "3") == FULL
            assert _error(other.lpop, "list") == FULL
            assert other.lrange("list", 0, -1) == [b"x", b"y"]
            assert other.get("a") == b"1"
            # the log lacks what it keeps: loading it now would lose those changes
            assert _error(other.execute_command, "DEBUG", "LOADAOF") == FULL
            assert other.get("b") == BIG.encode()
            status, health = daemon.request("GET", "/ping")
            assert (status, health[:28]) == (500, b"NOK - resp.log write failed "), health
            (data_dir / "filler").unlink()
            assert helpers.wait_for(lambda: _set_works(other), 5)
            other.set("c", "3")
            client.rpush("list", "z")
            assert daemon.request("GET", "/ping") == (200, b"OK")
            assert (client.client_id(), other.client_id()) == ids  # the same connections
        log = daemon.log()
        assert "RESP: Error writing to resp.log: No space left on device" in log, log
        assert "resp.log write error looks solved" in log, log
        with _ours(data_dir) as (_, port):
            again = _client(port)
            got = again.mget("a", "b", "c", "later")
            assert got == [b"1", BIG.encode(), b"3", b"ok"]
            assert again.lrange("list", 0, -1) == [b"x", b"y", b"z"]


def _refused(call: object, *args: object) -> str | None:
    """The error a command is answered with; None when it is served."""
    try:
        call(*args)  # type: ignore[operator]
    except redis.ResponseError as exc:
        return str(exc)
    return None


def test_a_failed_fsync_refuses_writes_until_a_later_fsync_succeeds_as_redis_server(
    tmp_path: Path,
) -> None:
    """resp.log's write succeeds (the page cache) but its fsync fails (a loop device whose
    image cannot grow): as Redis 7.0.15 after a failed AOF fsync, writes and PING are refused
    with -MISCONF naming the fsync's error, reads are served; once the disk has room and
    something new is written (a key's expiry: writes are refused) and fsynced, writes work
    again. Ours answered +OK throughout, the log on disk short of what it acknowledged."""
    seen = {}
    for name in ("redis", "ours"):
        data = tmp_path / name
        data.mkdir()
        with failing_fsync_disk(data) as backing, _server(name, data) as port:
            client = _client(port)
            client.set("a", "1")
            client.set("soon", "gone", px=7000)  # its expiry is the record written later
            time.sleep(2.5)  # both fsynced what they have (ours: --sync-timeout 2 s)
            fill_up(backing, 0)
            assert client.set("big", "b" * 2_000_000)  # written: into the page cache
            assert helpers.wait_for(lambda c=client: _refused(c.ping) is not None, 6)
            during = (_refused(client.set, "x", "1"), _refused(client.ping), client.get("a"))
            (backing / "filler").unlink()
            assert helpers.wait_for(lambda c=client: _set_works(c), 15)
            seen[name] = (during, client.exists("soon"))
    assert seen["ours"] == seen["redis"]
    assert seen["ours"] == ((FULL, FULL, b"1"), 0)


def _read_reply(sock: socket.socket, size: int) -> bytes:
    """`size` bytes of replies (the whole of what is expected)."""
    got = b""
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        if not chunk:
            break
        got += chunk
    return got


def test_a_pop_in_the_pass_whose_write_failed_hands_its_element_over(data_dir: Path) -> None:
    """LPOP, LMOVE and a BLPOP served in the pass whose resp.log write fails are answered
    with their elements, as Redis answers them (their records are kept and written once the
    disk has room), while the pass's other writes get MISCONF: each element reaches exactly
    one client and the log agrees after a restart. They were answered MISCONF with their
    elements already removed in memory, and the kept records removed them from the log:
    lost to every client."""
    blpop = b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$2\r\n10\r\n"
    served = b"*2\r\n$1\r\nq\r\n$2\r\ne1\r\n"
    with small_disk(data_dir, "2m"):
        with _ours(data_dir) as (_, port):
            client = _client(port)
            client.rpush("list", "x", "y", "z")
            waiting = socket.create_connection((helpers.HOST, port), timeout=5)
            waiting.sendall(blpop)
            assert helpers.wait_for(lambda: client.info("clients")["blocked_clients"] == 1, 5)
            fill_up(data_dir, 0)
            pipe = client.pipeline(transaction=False)  # one send: one pass of the reactor
            pipe.set("b", BIG)
            pipe.lpush("q", "e1")
            pipe.lpop("list")
            pipe.lmove("list", "dst", "LEFT", "RIGHT")
            got = pipe.execute(raise_on_error=False)
            assert [str(r) if isinstance(r, Exception) else r for r in got] == [
                FULL,
                FULL,
                b"x",
                b"y",
            ]
            assert _read_reply(waiting, len(served)) == served
            waiting.close()
            assert client.lrange("list", 0, -1) == [b"z"]
            (data_dir / "filler").unlink()
            assert helpers.wait_for(lambda: _set_works(client), 5)
        with _ours(data_dir) as (_, port):
            again = _client(port)
            assert again.lrange("list", 0, -1) == [b"z"]
            assert again.lrange("dst", 0, -1) == [b"y"]
            assert again.llen("q") == 0
