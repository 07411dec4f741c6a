"""DiskQueue and the Go nsqd v1.3.0 on the same files: ours reads what the real nsqd wrote
(after a clean stop and after kill -9), and the real nsqd reads what ours wrote."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from diskqueue_helpers import REPO_ROOT, drain, meta_text

from nsqd.storage.diskqueue import DiskQueue
from tests.ops.conftest import free_ports


def nsqd_binary() -> Path:
    binary = REPO_ROOT / ".reference" / "bin" / "nsqd"
    if os.access(binary, os.X_OK):
        return binary
    script = REPO_ROOT / "scripts" / "reference.py"
    if not script.exists():
        pytest.fail(f"real nsqd missing: {binary} does not exist and there is no {script}")
    spec = importlib.util.spec_from_file_location("reference", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.ensure_reference()) / "nsqd"


def wait_http(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert proc.poll() is None, "nsqd exited early"
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"nsqd did not answer on {url}")


def start_nsqd(data_path: Path, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    """The Go nsqd on `data_path` (--mem-queue-size=0, so every message is on disk), answering
    /ping; returns it and its HTTP address."""
    tcp, http_port = free_ports(2)
    http = f"127.0.0.1:{http_port}"
    proc = subprocess.Popen(
        [
            str(nsqd_binary()),
            f"--tcp-address=127.0.0.1:{tcp}",
            f"--http-address={http}",
            f"--data-path={data_path}",
            "--mem-queue-size=0",
            *flags,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://{http}/ping", proc)
    except BaseException:
        proc.kill()
        proc.wait(timeout=10)
        raise
    return proc, http


def test_reads_files_written_by_real_nsqd(tmp_path: Path) -> None:
    proc, http = start_nsqd(tmp_path)
    bodies = [b"hello", b"", b"x" * 3000, bytes(range(256))]
    try:
        for body in bodies[:1] + bodies[2:]:  # nsqd refuses an empty body
            req = urllib.request.Request(f"http://{http}/pub?topic=t", data=body, method="POST")
            with urllib.request.urlopen(req, timeout=5) as resp:
                assert resp.read() == b"OK"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    expected = bodies[:1] + bodies[2:]
    dq = DiskQueue("t", tmp_path, 100 * 1024 * 1024, 26, 1024 * 1024 + 26, 2500, 2.0)
    assert dq.depth() == len(expected)
    assert meta_text(tmp_path, "t").startswith(f"{len(expected)}\n0,0\n0,")
    records = drain(dq)
    dq.close()
    assert len(records) == len(expected)
    ids = set()
    now_ns = time.time_ns()
    for raw, body in zip(records, expected, strict=True):
        ts, attempts = struct.unpack(">qH", raw[:10])
        msg_id = raw[10:26]
        assert 0 < now_ns - ts < 60 * 10**9
        assert attempts == 0
        assert len(msg_id) == 16 and all(c in b"0123456789abcdef" for c in msg_id)
        ids.add(msg_id)
        assert raw[26:] == body
    assert len(ids) == len(expected)


def test_real_nsqd_reads_our_files(tmp_path: Path) -> None:
    """Files we write are taken over by real nsqd, which moves them into a channel queue."""
    ts = time.time_ns() - 10**9
    bodies = [b"one", b"two" * 500, b"three"]
    dq = DiskQueue("t", tmp_path, 100 * 1024 * 1024, 26, 1024 * 1024 + 26, 2500, 2.0)
    for i, body in enumerate(bodies):
        dq.put(struct.pack(">qH", ts + i, 3) + b"%016x" % (i + 1) + body)
    dq.close()
    (tmp_path / "nsqd.dat").write_text(
        '{"topics":[{"name":"t","paused":false,"channels":null}],"version":"1.3.0"}'
    )
    proc, http = start_nsqd(tmp_path)
    try:
        with urllib.request.urlopen(f"http://{http}/stats?format=json", timeout=5) as resp:
            stats = json.load(resp)
        assert [(t["topic_name"], t["depth"]) for t in stats["topics"]] == [("t", 3)]
        req = urllib.request.Request(f"http://{http}/channel/create?topic=t&channel=c", b"")
        with urllib.request.urlopen(req, timeout=5):
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the topic pump moves the messages to the channel
            with urllib.request.urlopen(f"http://{http}/stats?format=json", timeout=5) as resp:
                (topic,) = json.load(resp)["topics"]
            if topic["channels"] and topic["channels"][0]["depth"] == 3:
                break
            time.sleep(0.05)
        assert topic["channels"][0]["depth"] == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    dq = DiskQueue("t:c", tmp_path, 100 * 1024 * 1024, 26, 1024 * 1024 + 26, 2500, 2.0)
    records = drain(dq)
    dq.close()
    assert records == [
        struct.pack(">qH", ts + i, 3) + b"%016x" % (i + 1) + body for i, body in enumerate(bodies)
    ]


def test_reads_real_nsqd_files_after_kill_9(tmp_path: Path) -> None:
    """nsqd killed before it synced any metadata: every acknowledged message is recovered."""
    proc, http = start_nsqd(tmp_path, "--sync-timeout=1h")
    try:
        for i in range(5):
            req = urllib.request.Request(f"http://{http}/pub?topic=t", data=b"m%d" % i)
            with urllib.request.urlopen(req, timeout=5) as resp:
                assert resp.read() == b"OK"
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert not (tmp_path / "t.diskqueue.meta.dat").exists()
    dq = DiskQueue("t", tmp_path, 100 * 1024 * 1024, 26, 1024 * 1024 + 26, 2500, 2.0)
    assert dq.depth() == 5
    assert [r[26:] for r in drain(dq)] == [b"m%d" % i for i in range(5)]
    dq.close()
