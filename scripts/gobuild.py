"""Build a small Go program of the tests (a go-nsq client pinned by its go.mod/go.sum) once,
and again only when its sources or the Go version change."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path


class GoBuildError(Exception):
    """No Go toolchain, or the build failed (the text says why)."""


def go_binary() -> str | None:
    if found := shutil.which("go"):
        return found
    return "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None


def build(source: Path, binary: Path) -> Path:
    """`go build` of `source` (main.go, go.mod, go.sum) into `binary`, unless up to date."""
    go = go_binary()
    if go is None:
        raise GoBuildError("no Go toolchain to build " + str(source))
    env = dict(
        os.environ, GOTOOLCHAIN="local", GOWORK="off", GOFLAGS="-buildvcs=false -mod=readonly"
    )
    version = subprocess.run(
        [go, "env", "GOVERSION"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    digest = hashlib.sha256(version.encode())
    for name in ("main.go", "go.mod", "go.sum"):
        digest.update((source / name).read_bytes())
    stamp = binary.with_name(".build-stamp")
    if binary.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest():
        return binary
    binary.parent.mkdir(exist_ok=True)
    tmp = binary.with_name(f".build.{os.getpid()}")
    out = subprocess.run(
        [go, "build", "-o", str(tmp), "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise GoBuildError(out.stdout + out.stderr)
    tmp.replace(binary)
    stamp.write_text(digest.hexdigest())
    return binary
