"""A Spark standalone cluster on this machine reading NSQ into Parquet, as a data engineer runs
it: a master and workers started with `spark-class` from the pyspark wheel (Java 17), the real
nsqlookupd, nsqds registered with it (ours, or the Go nsqd with --daemon go), a publisher,
and the streaming job (`job.py`, its own driver process) with a checkpoint. Prints one JSON
line: rows, missing, duplicates, rows/s.

    scripts/spark_cluster.sh [--messages 120000] [--size 200] [--rate 0] [--nsqds 2]
                             [--workers 2] [--daemon ours|go] [--option key=value ...]
                             [--kill-nsqd-after ROWS] [--nsqd-arg=--durable-inflight ...]

--rate 0 publishes everything before the job starts (rows/s is then the drain rate into
Parquet); --rate R publishes R messages/s while it runs. --kill-nsqd-after ROWS kills the first
nsqd (--kill-signal KILL or TERM) once ROWS rows are counted and restarts it on the same
ports and data.
Everything listens on 127.0.0.1 and is stopped at the end."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from protocol.v2 import NSQError  # noqa: E402
from pyspark_nsq.addresses import Address  # noqa: E402
from pyspark_nsq.conn import Publisher  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f}s")


@dataclass
class Daemon:
    name: str
    args: list[str]
    port: int  # the port that says it is up
    log: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    extra: dict[str, int] = field(default_factory=dict)

    def start(self) -> Daemon:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=REPO,
                start_new_session=True,
            )
        wait_port(self.port, self.proc)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        except ProcessLookupError:
            pass


def reference_bin(name: str) -> str:
    sys.path.insert(0, str(REPO / "scripts"))
    from reference import ensure_reference

    return str(Path(ensure_reference()) / name)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class Cluster:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.daemons: list[Daemon] = []
        self.nsqds: list[Daemon] = []
        self.job: subprocess.Popen[bytes] | None = None
        self.env = dict(os.environ)
        self.env.update(
            {
                "SPARK_HOME": str(spark_home()),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable,
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
                ),
                "SPARK_LOG_DIR": str(work / "spark-logs"),
                "SPARK_WORKER_DIR": str(work / "spark-work"),
            }
        )

    def _add(self, daemon: Daemon) -> Daemon:
        self.daemons.append(daemon)
        return daemon.start()

    def start(self) -> None:
        self._start_nsq()
        self._start_spark()

    def _start_nsq(self) -> None:
        a = self.args
        lk_tcp, lk_http = free_port(), free_port()
        self.lookupd = self._add(
            Daemon(
                "nsqlookupd",
                [
                    reference_bin("nsqlookupd"),
                    f"--tcp-address=127.0.0.1:{lk_tcp}",
                    f"--http-address=127.0.0.1:{lk_http}",
                ],
                lk_tcp,
                self.work / "nsqlookupd.log",
            )
        )
        self.lookupd.extra = {"tcp": lk_tcp, "http": lk_http}
        for i in range(a.nsqds):
            tcp, http = free_port(), free_port()
            data = self.work / f"nsqd{i}"
            data.mkdir()
            command = (
                [sys.executable, "-m", "nsqd"] if a.daemon == "ours" else [reference_bin("nsqd")]
            )
            args = [
                *command,
                f"--tcp-address=127.0.0.1:{tcp}",
                f"--http-address=127.0.0.1:{http}",
                f"--data-path={data}",
                f"--lookupd-tcp-address=127.0.0.1:{lk_tcp}",
                "--broadcast-address=127.0.0.1",
                *a.nsqd_arg,
            ]
            nsqd = self._add(Daemon(f"nsqd{i}", args, tcp, self.work / f"nsqd{i}.log"))
            nsqd.extra = {"tcp": tcp, "http": http}
            self.nsqds.append(nsqd)

    def _start_spark(self) -> None:
        spark_class = str(spark_home() / "bin" / "spark-class")
        port, ui = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        self._add(
            Daemon(
                "master",
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui),
                ],
                port,
                self.work / "master.log",
                self.env,
            )
        )
        for i in range(self.args.workers):
            wport = free_port()
            self._add(
                Daemon(
                    f"worker{i}",
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(wport),
                        "--webui-port",
                        str(free_port()),
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        self.master_url,
                    ],
                    wport,
                    self.work / f"worker{i}.log",
                    self.env,
                )
            )

    def restart_nsqd(self, nsqd: Daemon, sig: int) -> None:
        nsqd.stop(sig)
        time.sleep(1.0)
        nsqd.start()

    def stop(self) -> None:
        if self.job is not None and self.job.poll() is None:
            self.job.kill()
            self.job.wait(30)
        for daemon in reversed(self.daemons):
            daemon.stop()


def body(i: int, size: int) -> bytes:
    head = b"%010d:" % i
    return head + b"x" * max(0, size - len(head))


class Publishers:
    """One connection per nsqd; a chunk an nsqd refuses (it is down) goes to the next one, or to
    the same one once it is back (the fault runs restart an nsqd while publishing)."""

    def __init__(self, cluster: Cluster) -> None:
        self.addresses = [Address("127.0.0.1", d.extra["tcp"]) for d in cluster.nsqds]
        self.conns: dict[int, Publisher] = {}

    def mpub(self, k: int, topic: str, bodies: list[bytes]) -> None:
        deadline = time.monotonic() + 60
        while True:
            i = k % len(self.addresses)
            try:
                if i not in self.conns:
                    self.conns[i] = Publisher(self.addresses[i])
                self.conns[i].mpub(topic, bodies)
                return
            except (OSError, NSQError):
                conn = self.conns.pop(i, None)
                if conn is not None:
                    conn.close()
                if time.monotonic() > deadline:
                    raise
                k += 1
                time.sleep(0.05 if len(self.addresses) > 1 else 0.5)

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def publish(cluster: Cluster, topic: str, n: int, size: int, rate: float) -> None:
    """Round-robin over the nsqds, in MPUBs of 100 (or paced to `rate` messages/s)."""
    pubs = Publishers(cluster)
    try:
        started = time.monotonic()
        chunk = 100
        for k, first in enumerate(range(0, n, chunk)):
            pubs.mpub(k, topic, [body(i, size) for i in range(first, min(n, first + chunk))])
            if rate:
                ahead = (first + chunk) / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
    finally:
        pubs.close()


def create_channel(cluster: Cluster, topic: str, channel: str) -> None:
    import urllib.request

    for d in cluster.nsqds:
        for path in (
            f"/topic/create?topic={topic}",
            f"/channel/create?topic={topic}&channel={channel}",
        ):
            url = f"http://127.0.0.1:{d.extra['http']}{path}"
            urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=5).close()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=120_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--nsqds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--daemon", choices=("ours", "go"), default="ours")
    parser.add_argument("--option", action="append", default=[], help="source option k=v")
    parser.add_argument("--nsqd-arg", action="append", default=[], help="an nsqd flag")
    parser.add_argument("--kill-nsqd-after", type=int, default=0)
    parser.add_argument("--kill-signal", choices=("KILL", "TERM"), default="KILL")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    return parser.parse_args()


def job_command(args: argparse.Namespace, cluster: Cluster, topic: str, work: Path) -> list[str]:
    job = [sys.executable, str(Path(__file__).with_name("job.py"))]
    job += ["--master", cluster.master_url, "--topic", topic]
    job += ["--lookupd", f"127.0.0.1:{cluster.lookupd.extra['http']}"]
    job += ["--out", str(work / "out"), "--checkpoint", str(work / "ckpt")]
    job += ["--expected", str(args.messages), "--timeout", str(args.timeout)]
    job += ["--executors", str(args.workers)]
    for option in args.option:
        job += ["--option", option]
    if args.kill_nsqd_after:
        job += ["--signal-after", str(args.kill_nsqd_after)]
        job += ["--signal-file", str(work / "kill-now")]
    return job


def run(args: argparse.Namespace, cluster: Cluster, work: Path) -> int:
    """Publish, run the job (restarting an nsqd on its signal), print its result."""
    topic = f"events_{int(time.time())}"
    create_channel(cluster, topic, "spark")  # nothing published is missed by the job
    publisher = threading.Thread(
        target=publish, daemon=True, args=(cluster, topic, args.messages, args.size, args.rate)
    )
    if not args.rate:
        publisher.run()
    with open(work / "job.log", "wb") as job_log:
        cluster.job = subprocess.Popen(
            job_command(args, cluster, topic, work),
            env=cluster.env,
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=job_log,
        )
    proc = cluster.job
    if args.rate:
        publisher.start()
    if args.kill_nsqd_after:
        while proc.poll() is None and not (work / "kill-now").exists():
            time.sleep(0.1)
        if proc.poll() is None:
            cluster.restart_nsqd(cluster.nsqds[0], getattr(signal, "SIG" + args.kill_signal))
    out, _ = proc.communicate(timeout=args.timeout + 120)
    if proc.returncode != 0:
        sys.stderr.write((work / "job.log").read_text(errors="replace")[-4000:])
        return proc.returncode or 1
    result = json.loads(out.decode().strip().splitlines()[-1])
    if args.kill_nsqd_after:
        result["fault"] = f"SIG{args.kill_signal} nsqd0 after {args.kill_nsqd_after} rows"
    result.update(
        daemon=args.daemon,
        nsqds=args.nsqds,
        workers=args.workers,
        size=args.size,
        rate=args.rate,
        options=args.option,
    )
    print(json.dumps(result), flush=True)
    return 0 if result["missing"] == 0 else 2


def main() -> int:
    args = parse_args()
    # SIGTERM (e.g. from `timeout`) unwinds through the finally below: no daemon is left.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="spark-cluster-"))
    cluster = Cluster(args, work)
    try:
        cluster.start()
        return run(args, cluster, work)
    finally:
        cluster.stop()
        if args.keep:
            print(f"work directory: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
