"""Helpers for the Spark connector tests: daemons on free 127.0.0.1 ports, publishing,
draining, bounded waits, and the Spark session settings shared with the child job."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 20.0


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports (bound together, then released: two free_port() may agree)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_until(
    predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


# The JIT's top tier (C2) off in every JVM these tests start: the session, the child jobs, the
# cluster script's master, workers and executors. They do little JVM-side work (Python reads
# and writes NSQ), so C2's compiling costs a 2-core machine more CPU than it returns, most of
# all where JVMs start side by side (measured on 2 cores: test_spark_cluster ~51 s -> ~37 s,
# test_spark_install ~33 s -> ~25 s). It changes how fast Spark's code runs, not what it does.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def with_jvm_options(env: dict[str, str]) -> dict[str, str]:
    """`env` with JVM_OPTIONS in JAVA_TOOL_OPTIONS (read by every JVM, launchers included)."""
    options = env.get("JAVA_TOOL_OPTIONS", "")
    if JVM_OPTIONS not in options.split():
        env["JAVA_TOOL_OPTIONS"] = f"{options} {JVM_OPTIONS}".strip()
    return env


def spark_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Workers run this interpreter, find `pyspark_nsq` on PYTHONPATH, and stay on loopback."""
    env = with_jvm_options(dict(os.environ))
    path = [str(REPO_ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.update(extra or {})
    return env


SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    # 2g, not Spark's 1g: the driver-side read of 1,000 x 1 MiB (test_spark_large, before it
    # became 300) held up to ~850 MiB live in the driver's heap (measured after forced full
    # GCs), so with 1g a run sometimes lost its JVM (CI: the gateway gone, pytest's report of
    # it crashed); kept, so the heap is not what decides whether a large read passes
    "spark.driver.memory": "2g",
}


def build_session(app: str) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName(app)
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@dataclass
class Proc:
    name: str
    proc: subprocess.Popen[bytes]
    tcp_port: int
    http_port: int
    workdir: Path
    command: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    data_flag: str = "--data-path"

    @property
    def tcp(self) -> str:
        return f"127.0.0.1:{self.tcp_port}"

    @property
    def http(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join((self.workdir / "log").read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _wait_port(proc: subprocess.Popen[bytes], port: int) -> bool:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def start_process(
    name: str,
    command: Sequence[str],
    extra: Sequence[str] = (),
    *,
    data_flag: str = "--data-path",
    again: Proc | None = None,
) -> Proc:
    """An nsqd (ours or Go's) or nsqlookupd on free loopback ports; with `again`, on that
    (stopped) process's ports and data directory, as a restart after a crash."""
    workdir = again.workdir if again else Path(tempfile.mkdtemp(prefix=f"spark-{name}-"))
    for _ in range(3 if again is None else 1):
        tcp, http = (again.tcp_port, again.http_port) if again else free_ports(2)
        args = [*command, f"--tcp-address=127.0.0.1:{tcp}", f"--http-address=127.0.0.1:{http}"]
        if data_flag:
            args.append(f"{data_flag}={workdir}")
        with open(workdir / "log", "ab") as log:
            proc = subprocess.Popen(
                [*args, *extra],
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        started = Proc(name, proc, tcp, http, workdir, list(command), list(extra), data_flag)
        if _wait_port(proc, tcp):
            return started
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    raise RuntimeError(f"{name} did not start:\n{started.log_tail()}")


def kill9_and_restart(daemon: Proc, pause: float = 1.0) -> Proc:
    """SIGKILL the daemon, wait `pause` seconds, start it again on the same ports and data."""
    daemon.proc.kill()
    daemon.proc.wait(10)
    time.sleep(pause)
    return start_process(
        daemon.name, daemon.command, daemon.extra, data_flag=daemon.data_flag, again=daemon
    )


def reference_binary(name: str) -> Path:
    """A reference tool from .reference/bin (scripts/install_reference.sh), installed if
    missing; an AssertionError when it cannot be (the test fails, never skips)."""
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        from reference import ReferenceInstallError, ensure_reference
    finally:
        sys.path.pop(0)
    try:
        return Path(ensure_reference()) / name
    except ReferenceInstallError as exc:
        raise AssertionError(f"reference NSQ tools could not be installed: {exc}") from exc


def go_nsqd(extra: Sequence[str] = ()) -> Proc:
    return start_process("go-nsqd", [str(reference_binary("nsqd"))], extra)


def our_nsqd(extra: Sequence[str] = ()) -> Proc:
    return start_process("nsqd", [sys.executable, "-m", "nsqd"], extra)


def publish(nsqd: Proc, topic: str, bodies: Sequence[bytes]) -> None:
    from pyspark_nsq.addresses import Address
    from pyspark_nsq.conn import Publisher

    with Publisher(Address.parse(nsqd.tcp)) as pub:
        pub.publish_many(topic, bodies)


def drain(
    nsqd_tcp: str,
    topic: str,
    channel: str,
    expected: int,
    timeout: float = 60.0,
    settle: float = 0.5,
) -> list[bytes]:
    """Consume and FIN until `expected` messages arrived (then `settle` more seconds for
    extras); returns their bodies."""
    from pyspark_nsq.consumer import Consumer
    from pyspark_nsq.options import SourceOptions

    # the driver-side consumer, here a plain NSQ client (never the executor-side reader)
    opts = SourceOptions.parse(
        {"nsqd": nsqd_tcp, "topic": topic, "channel": channel, "executorReads": "off"}
    )
    consumer = Consumer(opts)
    consumer.start()
    bodies: list[bytes] = []
    seq = 0
    try:

        def take() -> bool:
            nonlocal seq
            end = consumer.take(seq, None)
            bodies.extend(h.body for h in consumer.rows(seq, end))
            consumer.fin_through(end)
            seq = end
            return len(bodies) >= expected

        wait_until(take, timeout, 0.1, f"{expected} messages on {topic}/{channel}")
        time.sleep(settle)
        take()
    finally:
        consumer.close()
    return bodies


def channel_stats(nsqd: Proc, topic: str, channel: str) -> Any:
    """(topic depth, channel depth, in flight, timeouts) from /stats, or None without it."""
    import urllib.request

    url = f"http://{nsqd.http}/stats?format=json&topic={topic}&channel={channel}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            doc = json.loads(response.read())
    except OSError:
        return None
    for t in doc.get("topics") or []:
        if t["topic_name"] == topic:
            for c in t.get("channels") or []:
                if c["channel_name"] == channel:
                    return c
    return None


def read_trace(path: Path, topic: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e.get("topic") == topic]


def create_channel(nsqd: Proc, topic: str, channel: str = "spark") -> None:
    """Create the topic and channel over HTTP before publishing, so messages are copied into
    the channel as they arrive (not as one backlog when the reader subscribes)."""
    import urllib.request

    for path in (
        f"/topic/create?topic={topic}",
        f"/channel/create?topic={topic}&channel={channel}",
    ):
        request = urllib.request.Request(f"http://{nsqd.http}{path}", method="POST")
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
