"""The two servers the suite compares: a real redis-server 7 (installed by
scripts/install_redis.sh; never skipped) and our nsqd with --resp-address, each on free
127.0.0.1 ports, in a temporary directory, with and without a password."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "scripts"))
import nsqd_process  # noqa: E402


class MissingRedis(RuntimeError):
    pass


def redis_server() -> str:
    found = shutil.which("redis-server")
    if found is None:
        subprocess.run(["bash", str(REPO_ROOT / "scripts" / "install_redis.sh")], check=False)
        found = shutil.which("redis-server")
    if found is None:
        raise MissingRedis("redis-server is not installed and scripts/install_redis.sh failed")
    return found


@dataclass
class Server:
    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    data: Path

    def stop(self) -> int | None:
        return nsqd_process.terminate(self.proc, 10)

    def kill(self) -> None:
        nsqd_process.kill(self.proc, 10)

    def log(self) -> str:
        return nsqd_process.log_tail(self.log_path, 40)


def start_redis(workdir: Path, password: str = "", *extra: str) -> Server:
    """`extra`: more --name value arguments (Redis's own test suite wants DEBUG enabled)."""
    port = nsqd_process.free_port()
    argv = [
        redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", str(workdir), "--daemonize", "no",
    ]  # fmt: skip
    if password:
        argv += ["--requirepass", password]
    argv += extra
    log_path = workdir / f"redis-{port}.log"
    proc = nsqd_process.launch(argv, log_path)
    if not nsqd_process.wait_accepting(proc, port, 15):
        raise RuntimeError(f"redis-server did not start:\n{nsqd_process.log_tail(log_path, 20)}")
    return Server("redis", port, proc, log_path, workdir)


def start_ours(data: Path, *flags: str, port: int | None = None, root: Path = REPO_ROOT) -> Server:
    """`root`: the checkout whose nsqd runs (bench/resp.py --against: an older one)."""
    data.mkdir(parents=True, exist_ok=True)
    tcp, http, resp = nsqd_process.free_ports(3)
    resp = port or resp
    argv = [
        *nsqd_process.ours_command(),
        *nsqd_process.address_flags(tcp, http, data),
        f"--resp-address=127.0.0.1:{resp}",
        *flags,
    ]
    log_path = data.parent / f"ours-{resp}.log"
    env = nsqd_process.pythonpath_env(root)
    proc = nsqd_process.launch(argv, log_path, cwd=root, append=True, env=env)
    if not nsqd_process.wait_accepting(proc, resp, 20):
        raise RuntimeError(f"our nsqd did not start:\n{nsqd_process.log_tail(log_path, 20)}")
    server = Server("ours", resp, proc, log_path, data)
    server.tcp_port, server.http_port = tcp, http  # type: ignore[attr-defined]
    return server


class Pair:
    """redis-server and ours, plain and with a password: {"plain": (redis, ours), ...}."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="resp-conformance-"))
        self.servers: list[Server] = []
        self.by_kind: dict[str, tuple[Server, Server]] = {}

    def start(self) -> None:
        from .script import PASSWORD

        for kind, password in (("plain", ""), ("auth", PASSWORD)):
            work = self.tmp / kind
            work.mkdir()
            redis = start_redis(work, password)
            self.servers.append(redis)
            flags = [f"--resp-password={password}"] if password else []
            ours = start_ours(work / "data", *flags)
            self.servers.append(ours)
            self.by_kind[kind] = (redis, ours)

    def stop(self) -> list[str]:
        """Stop all; what went wrong (an unclean exit of ours)."""
        problems = []
        for server in self.servers:
            code = server.stop()
            if server.kind == "ours" and code != 0:
                problems.append(f"ours exited {code}:\n{server.log()}")
        shutil.rmtree(self.tmp, ignore_errors=True)
        return problems
