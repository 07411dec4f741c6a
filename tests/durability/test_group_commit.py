"""Group commit at nsqd's default flags: what ours writes a pass at a time (many publishers,
MPUBs) is go-diskqueue's bytes with go-diskqueue's file rolls, and the Go nsqd takes the
directory over and delivers every message to a real client (pynsq)."""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from . import helpers

MAX_BYTES = 262_144  # small files: the backlog spans several, with rolls mid-pass
FLAGS = (f"--max-bytes-per-file={MAX_BYTES}",)  # else nsqd's defaults (mem-queue-size 10000)
PIPELINED = 4  # connections sending PUBs back to back: several publishers in one pass
PER_CONN = 2_000
N_MPUB = 16_000


def pipelined_pubs(daemon: helpers.Daemon, topic: str, bodies: list[bytes]) -> None:
    """PUB after PUB without waiting, then every OK (the daemon answers a pass at a time)."""
    with daemon.client() as conn:
        for i in range(0, len(bodies), 200):
            chunk = bodies[i : i + 200]
            conn.send(b"".join(helpers.command(f"PUB {topic}", b) for b in chunk))
            for _ in chunk:
                conn.expect_ok()


def roll_problems(data_dir: Path, queue: str) -> list[str]:
    """A file ends where go-diskqueue rolls: it holds at most MAX_BYTES (unless it is one
    record) and the next file's first record would not have fitted."""
    files = helpers.queue_files(data_dir, queue)
    problems = []
    for this, after in itertools.pairwise(files):
        size = this.stat().st_size
        first_next = helpers.read_records(after)[0]
        if size > MAX_BYTES and len(helpers.read_records(this)) > 1:
            problems.append(f"{this.name}: {size} bytes > {MAX_BYTES}")
        if size + 4 + len(first_next) <= MAX_BYTES:
            problems.append(f"{this.name} rolled at {size}: the next record fitted")
    return problems


def test_go_nsqd_takes_over_what_group_commit_wrote(reference: Path, data_dir: Path) -> None:
    topic = "gc"
    pubs = [[b"gc-pub-%d-%05d-" % (c, i) + b"x" * 100 for i in range(PER_CONN)] for c in range(4)]
    mpubs = [b"gc-mpub-%05d-" % i + b"y" * 150 for i in range(N_MPUB)]
    sent = [b for chunk in pubs for b in chunk] + mpubs

    daemon = helpers.start("ours", data_dir, *FLAGS)
    with daemon.client() as conn:
        conn.sub(topic, "ch", rdy=0)  # the channel exists; nobody reads: the backlog grows
        threads = [
            threading.Thread(target=pipelined_pubs, args=(daemon, topic, chunk)) for chunk in pubs
        ]
        for t in threads:
            t.start()
        with daemon.client() as mconn:
            mconn.mpub_many(topic, [mpubs[i : i + 200] for i in range(0, N_MPUB, 200)])
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
    daemon.stop()

    files = helpers.queue_files(data_dir, f"{topic}:ch")
    assert len(files) >= 4, helpers.data_files(data_dir)  # a backlog over several files
    assert not roll_problems(data_dir, f"{topic}:ch")
    on_disk = [r[26:] for f in files for r in helpers.read_records(f)]
    assert Counter(on_disk) == Counter(sent)  # the clean stop put the memory part on disk too

    with helpers.running("reference", data_dir, *FLAGS) as go:
        worker = Path(__file__).with_name("pynsq_worker.py")
        argv = [sys.executable, str(worker), "--nsqd", f"{helpers.HOST}:{go.tcp_port}"]
        argv += ["--topic", topic, "--channel", "ch", "--n", str(len(sent))]
        argv += ["--max-in-flight", "500", "--timeout", "90"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        log = go.log()
    assert done.returncode == 0, done.stderr[-2000:]
    got = Counter(line.split()[0].encode() for line in done.stdout.splitlines())
    assert got == Counter(sent)
    errors = [line for line in log.splitlines() if "ERROR" in line or "FATAL" in line]
    assert not errors, "\n".join(errors)


def acknowledged(
    daemon: helpers.Daemon, topic: str, bodies: list[bytes], batch: int = 1
) -> tuple[list[bytes], str]:
    """Pipelined PUBs (batch 1) or MPUBs: the bodies the daemon said OK to, and its error
    frame (or "")."""
    batches = [bodies[i : i + batch] for i in range(0, len(bodies), batch)]
    with daemon.client() as conn:
        conn.send(
            b"".join(
                helpers.command(f"PUB {topic}", b[0])
                if batch == 1
                else helpers.mpub_command(topic, b)
                for b in batches
            )
        )
        for i in range(len(batches)):
            try:
                conn.expect_ok()
            except helpers.ErrorFrame as exc:
                return bodies[: i * batch], str(exc)
            except helpers.ConnectionClosed:
                return bodies[: i * batch], "closed"
    return bodies, ""


@pytest.mark.parametrize(("batch", "code"), [(1, "E_PUB_FAILED"), (50, "E_MPUB_FAILED")])
def test_a_full_disk_refuses_and_keeps_every_acknowledged_message(
    data_dir: Path, batch: int, code: str
) -> None:
    """--mem-queue-size=0: every message is on disk before its OK. The write of a pass fails
    (a real EFBIG: the daemon's file size limit, set from outside with prlimit, stands in for
    a full disk): its publishers get E_PUB_FAILED, not OK, and everything that got OK is
    still there after a restart."""
    topic = "full"
    daemon = helpers.start("ours", data_dir, "--mem-queue-size=0")
    with daemon.client() as conn:
        conn.sub(topic, "ch", rdy=0)
    before = [b"full-before-%04d" % i for i in range(300)]
    assert acknowledged(daemon, topic, before) == (before, "")
    biggest = max(p.stat().st_size for p in helpers.queue_files(data_dir, f"{topic}:ch"))
    limit = f"--fsize={biggest + 4000}:unlimited"
    subprocess.run(["prlimit", f"--pid={daemon.proc.pid}", limit], check=True, timeout=10)
    results: dict[int, tuple[list[bytes], str]] = {}
    bodies = [[b"full-%d-%04d-" % (c, i) + b"f" * 60 for i in range(300)] for c in range(3)]

    def publish(c: int) -> None:
        results[c] = acknowledged(daemon, topic, bodies[c], batch)

    threads = [threading.Thread(target=publish, args=(c,)) for c in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    acked = before + [b for c in range(3) for b in results[c][0]]
    errors = {results[c][1].split(" ")[0] for c in range(3)}
    assert errors == {code}, results  # the disk filled up under every publisher
    status = json.loads(daemon.http("GET", "/stats?format=json")[1])["health"]
    assert status.startswith("NOK"), status
    daemon.kill()  # what was acknowledged must be in the files, not in memory

    with helpers.running("ours", data_dir, "--mem-queue-size=0") as d2, d2.client() as conn:
        conn.sub(topic, "ch", rdy=500)
        got = conn.consume(len(acked), timeout=20, quiet=0.5, idle=2)
    missing = set(acked) - {m.body for m in got}
    assert not missing, f"{len(missing)} acknowledged messages lost: {sorted(missing)[:3]}"


@pytest.mark.parametrize("then", [b"SUB leave other\n", b"NOSUCH\n"])
def test_a_publisher_leaving_the_pass_is_not_acknowledged_when_its_write_failed(
    data_dir: Path, then: bytes
) -> None:
    """A PUB followed in the same write by a command that gives the connection a task of its
    own (SUB) or ends it (an invalid command, fatal): the PUB waits for the pass's write, and
    when that write fails (EFBIG, as above, from the first byte) the PUB is answered
    E_PUB_FAILED and the connection closed; no OK for it arrives, from the reactor or the task."""
    topic = "leave"
    daemon = helpers.start("ours", data_dir, "--mem-queue-size=0")
    with daemon.client() as conn:
        conn.sub(topic, "ch", rdy=0)
    assert acknowledged(daemon, topic, [b"on-file"]) == ([b"on-file"], "")
    size = max(p.stat().st_size for p in helpers.queue_files(data_dir, f"{topic}:ch"))
    subprocess.run(["prlimit", f"--pid={daemon.proc.pid}", f"--fsize={size}:unlimited"], check=True)
    with daemon.client() as conn:
        conn.send(helpers.command(f"PUB {topic}", b"refused") + then)
        frames = []
        with contextlib.suppress(helpers.ConnectionClosed):
            while True:
                frames.append(conn.read_frame(timeout=5.0))
    answers = [f.data.split(b" ")[0] for f in frames]
    assert answers == [b"E_PUB_FAILED"], frames
    daemon.kill()  # its clean stop cannot write either


def http_acknowledged(daemon: helpers.Daemon, topic: str, bodies: list[bytes]) -> list[bytes]:
    """Keep-alive HTTP /pub requests, pipelined 20 at a time: the bodies answered 200 (in
    order, up to the first other answer or the connection's end)."""
    import re
    import socket

    acked: list[bytes] = []
    with socket.create_connection((helpers.HOST, daemon.http_port), timeout=20) as sock:
        for i in range(0, len(bodies), 20):
            chunk = bodies[i : i + 20]
            sock.sendall(
                b"".join(
                    b"POST /pub?topic=%s HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s"
                    % (topic.encode(), len(b), b)
                    for b in chunk
                )
            )
            data = b""
            while len(re.findall(rb"HTTP/1\.1 \d{3} ", data)) < len(chunk):
                try:
                    more = sock.recv(65536)
                except ConnectionResetError:
                    more = b""
                if not more:
                    break
                data += more
            statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", data)
            for body, status in zip(chunk, statuses, strict=False):
                if status != b"200":
                    return acked
                acked.append(body)
            if len(statuses) < len(chunk):
                return acked
    return acked


def test_a_full_disk_leaves_http_publishers_unanswered_and_keeps_what_got_200(
    data_dir: Path,
) -> None:
    """The HTTP publishes of a pass are answered after its write: when it fails (EFBIG, as
    above) they get no 200 (their connection closes, or a 500 on the task's path), and every
    body that got a 200 is there after a kill -9."""
    topic = "hfull"
    daemon = helpers.start("ours", data_dir, "--mem-queue-size=0")
    with daemon.client() as conn:
        conn.sub(topic, "ch", rdy=0)
    before = [b"hfull-before-%04d" % i for i in range(100)]
    assert http_acknowledged(daemon, topic, before) == before
    biggest = max(p.stat().st_size for p in helpers.queue_files(data_dir, f"{topic}:ch"))
    limit = f"--fsize={biggest + 4000}:unlimited"
    subprocess.run(["prlimit", f"--pid={daemon.proc.pid}", limit], check=True, timeout=10)
    bodies = [[b"hfull-%d-%04d-" % (c, i) + b"f" * 60 for i in range(300)] for c in range(3)]
    results: dict[int, list[bytes]] = {}

    def publish(c: int) -> None:
        results[c] = http_acknowledged(daemon, topic, bodies[c])

    threads = [threading.Thread(target=publish, args=(c,)) for c in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert all(len(results[c]) < len(bodies[c]) for c in range(3)), results  # the disk filled
    acked = before + [b for c in range(3) for b in results[c]]
    daemon.kill()

    with helpers.running("ours", data_dir, "--mem-queue-size=0") as d2, d2.client() as conn:
        conn.sub(topic, "ch", rdy=500)
        got = conn.consume(len(acked), timeout=20, quiet=0.5, idle=2)
    missing = set(acked) - {m.body for m in got}
    assert not missing, f"{len(missing)} acknowledged messages lost: {sorted(missing)[:3]}"
