"""Build the Docker image and run it as a container here, where no registry and no Docker engine
are reachable: a stand-in for the official `python:3.11-slim` base made from Debian's packages
(mmdebstrap), our Dockerfile built on it with buildah (`--build-arg BASE_IMAGE=...`), and the
container run with `buildah run --isolation=chroot` as the image's own user, entrypoint and
default flags, inside a network namespace of its own (so the image's default ports and its
HEALTHCHECK apply unchanged and nothing collides with the host).

    python scripts/image_test.py          # build, start, /ping, print size and start time

Used by tests/ops/test_image.py. Tools missing (buildah, mmdebstrap, ip) are installed with
apt-get; if that fails, the caller fails with the reason."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trio-nsqd-image"
PACKAGES = "python3,python3-venv,passwd,ca-certificates"
CA_BUNDLE = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
IMAGE = "localhost/trio-nsqd:test"
TOOLS = {"buildah": "buildah", "mmdebstrap": "mmdebstrap", "ip": "iproute2"}


class ImageError(RuntimeError):
    pass


def run(argv: list[str], timeout: float = 600, **kw: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kw,  # type: ignore[arg-type]
    )
    if done.returncode != 0:
        raise ImageError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def ensure_tools() -> None:
    missing = [pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None]
    if not missing:
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        run(["apt-get", "update", "-qq"], env=env)
        run(["apt-get", "install", "-y", "-qq", *missing], env=env)
    except (ImageError, OSError) as exc:
        raise ImageError(f"cannot install {', '.join(missing)} with apt-get: {exc}") from exc


def base_image() -> str:
    """The stand-in base, built once per package list and CA bundle (cached)."""
    key = hashlib.sha256(PACKAGES.encode() + CA_BUNDLE.read_bytes()).hexdigest()[:12]
    name = f"localhost/trio-nsqd-base:{key}"
    if (
        subprocess.run(
            ["buildah", "inspect", "--type", "image", name], capture_output=True
        ).returncode
        == 0
    ):
        return name
    work = CACHE / key
    work.mkdir(parents=True, exist_ok=True)
    tar = work / "base.tar"
    if not tar.exists():
        run(
            [
                "mmdebstrap",
                "--variant=minbase",
                f"--include={PACKAGES}",
                "bookworm",
                str(tar) + ".tmp",
            ]
        )
        os.replace(str(tar) + ".tmp", tar)
    shutil.copy(CA_BUNDLE, work / "ca-certificates.crt")
    # where the official image has them: python and pip on PATH (/usr/local/bin), Python 3.11;
    # pip inside the build needs this machine's CA bundle
    (work / "Containerfile").write_text(
        "FROM scratch\n"
        "ADD base.tar /\n"
        "COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\n"
        "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "
        "PIP_CERT=/etc/ssl/certs/ca-certificates.crt\n"
        "RUN python3 -m venv /usr/local\n"
    )
    run(["buildah", "bud", "--isolation=chroot", "--format", "docker", "-t", name, str(work)])
    return name


def build() -> float:
    """Our image on the stand-in base; seconds the build took."""
    ensure_tools()
    base = base_image()
    start = time.monotonic()
    run(
        ["buildah", "bud", "--isolation=chroot", "--format", "docker", "--build-arg",
         f"BASE_IMAGE={base}", "-t", IMAGE, str(REPO_ROOT)]
    )  # fmt: skip
    return time.monotonic() - start


def image_size() -> str:
    """As `docker images` shows it (e.g. "282 MB")."""
    return str(json.loads(run(["buildah", "images", "--json", IMAGE]).stdout)[0]["size"])


@dataclass
class Config:
    entrypoint: list[str]
    cmd: list[str]
    user: str
    workdir: str
    healthcheck: list[str]


def config() -> Config:
    doc = json.loads(run(["buildah", "inspect", "--type", "image", IMAGE]).stdout)
    c = doc["Docker"]["config"]
    test = c["Healthcheck"]["Test"]
    assert test[0] == "CMD", test
    return Config(c["Entrypoint"] or [], c["Cmd"] or [], c["User"], c["WorkingDir"], test[1:])


@contextlib.contextmanager
def netns() -> Iterator[str]:
    """A network namespace with only loopback, removed afterwards."""
    name = f"nsqimg-{uuid.uuid4().hex[:8]}"
    run(["ip", "netns", "add", name])
    try:
        run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"])
        yield name
    finally:
        for pid in subprocess.run(
            ["ip", "netns", "pids", name], capture_output=True, text=True
        ).stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)


class Container:
    """One working container of the image (its /data volume lives as long as it does)."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.config = config()
        self.proc: subprocess.Popen[str] | None = None
        self.name = run(
            ["buildah", "from", "--name", f"nsqimg-{uuid.uuid4().hex[:8]}", IMAGE]
        ).stdout.strip()

    def _argv(self, argv: list[str], workdir: str | None = None) -> list[str]:
        c = self.config
        return [
            "ip", "netns", "exec", self.ns, "buildah", "run", "--isolation=chroot",
            "--user", c.user, "--workingdir", workdir or c.workdir, self.name, "--", *argv,
        ]  # fmt: skip

    def start(self, *args: str) -> subprocess.Popen[str]:
        """The entrypoint with the default flags (+ args), as `docker run` would start it."""
        c = self.config
        self.proc = subprocess.Popen(
            self._argv([*c.entrypoint, *c.cmd, *args]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        return self.proc

    def exec(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._argv(list(argv)), capture_output=True, text=True, timeout=timeout, check=False
        )

    def exec_alongside(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A command in the running container (its filesystem, network and user), as `docker
        exec` runs a HEALTHCHECK. A second `buildah run` on a running container breaks the
        first one's cleanup (buildah 1.28), so this chroots into its mount instead."""
        root = run(["buildah", "mount", self.name]).stdout.strip()
        env = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
        chroot = ["chroot", f"--userspec={self.config.user}", root, *env, *argv]
        return subprocess.run(
            ["ip", "netns", "exec", self.ns, *chroot],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def nsqd_pid(self) -> int:
        """The nsqd process inside the container (what `docker stop` signals): a descendant of
        the `buildah run` that started it."""
        assert self.proc is not None, "not started"
        todo, seen = [self.proc.pid], []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*"):  # Go forks from any thread
                with contextlib.suppress(OSError):
                    todo.extend(int(c) for c in (task / "children").read_text().split())
        for pid in seen:
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if len(cmd) > 1 and cmd[1].endswith(b"/nsqd") and cmd[0].endswith(b"python3"):
                    return pid
        raise ImageError("no nsqd process in the container")

    def remove(self) -> None:
        subprocess.run(["buildah", "rm", self.name], capture_output=True)


def in_ns(ns: str, code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Python on the host, in the container's network namespace (a client on its network)."""
    argv = ["ip", "netns", "exec", ns, sys.executable, "-c", code]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO_ROOT
    )


PING = (
    "import sys, time, urllib.request\n"
    "end = time.monotonic() + 30\n"
    "while time.monotonic() < end:\n"
    "    try:\n"
    "        if urllib.request.urlopen('http://127.0.0.1:4151/ping', timeout=1).read() == b'OK':\n"
    "            sys.exit(0)\n"
    "    except OSError:\n"
    "        time.sleep(0.01)\n"
    "sys.exit(1)\n"
)


def main() -> int:
    seconds = build()
    print(f"built {IMAGE} in {seconds:.1f}s, {image_size()}")
    with netns() as ns:
        box = Container(ns)
        try:
            start = time.monotonic()
            proc = box.start()
            ok = in_ns(ns, PING).returncode == 0
            print(f"start -> /ping OK: {time.monotonic() - start:.2f}s" if ok else "no /ping")
            os.kill(box.nsqd_pid(), signal.SIGTERM)
            print("exit", proc.wait(30))
        finally:
            box.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
