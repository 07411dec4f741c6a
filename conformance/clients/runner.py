"""Build the client programs, start each nsqd, run every client's checks, print the results.

    python -m conformance.clients [--target ours|reference|both] [--clients gonsq,nsqjs,pynsq]
                                  [--check NAME,...] [-v]

Exit status: 0 when every check passed; 1 when a check failed against ours (or a client could not
be set up); 2 on a usage error or when a daemon could not be started; 3 when checks failed only
against the reference (the check itself, or this machine, is then at fault).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Final

from conformance.clients import daemon
from conformance.clients.daemon import REPO_ROOT, DaemonError

HERE: Final = Path(__file__).resolve().parent
GONSQ_DIR: Final = HERE / "gonsq"
GONSQ_BIN: Final = GONSQ_DIR / "bin" / "gonsq-check"
NSQJS_DIR: Final = HERE / "nsqjs"
PYNSQ_VERSION: Final = "0.9.1"

# The checks every client implements, in the order they run (see README.md).
CHECKS: Final = (
    "publish_consume",
    "requeue",
    "timeout",
    "touch",
    "backoff",
    "fanout",
    "split",
    "deferred",
)
CLIENTS: Final = ("gonsq", "nsqjs", "pynsq")
SETUP_TIMEOUT_S: Final = 900.0
CLIENT_TIMEOUT_S: Final = 200.0  # one client's whole run against one daemon


class SetupError(RuntimeError):
    """A client program could not be built or installed."""


# ---------------------------------------------------------------------------------------------
# setup: idempotent builds/installs of each client


def _digest(*paths: Path, extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@contextmanager
def setup_lock(folder: Path) -> Iterator[None]:
    """One setup (a build, an `npm ci`) of `folder` at a time across processes: the test
    suite's workers (scripts/test.sh runs two) may reach one client's setup at once, and two
    `npm ci` in one folder break each other. The lock file lives in the temporary folder, so
    the checkout stays clean."""
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    with open(os.path.join(tempfile.gettempdir(), f"trio-nsqd-setup-{key}.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
        yield


def _run_setup(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SETUP_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as exc:
        raise SetupError(f"{argv[0]} not found: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise SetupError(f"{' '.join(argv)} did not finish in {SETUP_TIMEOUT_S:.0f}s") from exc
    if proc.returncode != 0:
        raise SetupError(
            f"{' '.join(argv)} (in {cwd}) failed with exit {proc.returncode}:\n"
            f"{proc.stdout}{proc.stderr}".rstrip()
        )
    return proc.stdout


def find_tool(name: str, *fallbacks: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for path in fallbacks:
        if os.access(path, os.X_OK):
            return path
    raise SetupError(f"`{name}` is not installed (not on PATH)")


def setup_gonsq() -> list[str]:
    """``go build`` gonsq-check (go-nsq v1.1.0 per go.mod/go.sum) unless it is up to date."""
    go = find_tool("go", "/usr/local/go/bin/go")
    env = dict(
        os.environ, GOTOOLCHAIN="local", GOWORK="off", GOFLAGS="-buildvcs=false -mod=readonly"
    )
    version = _run_setup([go, "env", "GOVERSION"], GONSQ_DIR, env).strip()
    sources = [*sorted(GONSQ_DIR.glob("*.go")), GONSQ_DIR / "go.mod", GONSQ_DIR / "go.sum"]
    want = _digest(*sources, extra=version)
    stamp = GONSQ_BIN.with_name(".build-stamp")
    with setup_lock(GONSQ_DIR):
        if not (GONSQ_BIN.exists() and stamp.exists() and stamp.read_text() == want):
            GONSQ_BIN.parent.mkdir(exist_ok=True)
            tmp = GONSQ_BIN.with_name(f".gonsq-check.{os.getpid()}")
            _run_setup([go, "build", "-o", str(tmp), "."], GONSQ_DIR, env)
            tmp.replace(GONSQ_BIN)
            stamp.write_text(want)
    return [str(GONSQ_BIN)]


def setup_nsqjs() -> list[str]:
    """``npm ci`` nsqjs (per package-lock.json) into node_modules unless it is up to date."""
    node = find_tool("node")
    npm = find_tool("npm")
    version = _run_setup([node, "--version"], NSQJS_DIR).strip()
    want = _digest(NSQJS_DIR / "package.json", NSQJS_DIR / "package-lock.json", extra=version)
    stamp = NSQJS_DIR / "node_modules" / ".conformance-stamp"
    with setup_lock(NSQJS_DIR):
        if not (stamp.exists() and stamp.read_text() == want):
            _run_setup([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], NSQJS_DIR)
            stamp.write_text(want)
    return [node, str(NSQJS_DIR / "check.js")]


def setup_pynsq() -> list[str]:
    """pynsq comes from pyproject's test extra; check the pinned version is importable."""
    try:
        have = metadata.version("pynsq")
    except metadata.PackageNotFoundError as exc:
        raise SetupError(
            f"pynsq is not installed: pip install 'pynsq=={PYNSQ_VERSION}' "
            "(or pip install -e '.[test]')"
        ) from exc
    if have != PYNSQ_VERSION:
        raise SetupError(f"pynsq {have} is installed, the checks need {PYNSQ_VERSION}")
    return [sys.executable, "-m", "conformance.clients.pynsq"]


SETUPS: Final[dict[str, Callable[[], list[str]]]] = {
    "gonsq": setup_gonsq,
    "nsqjs": setup_nsqjs,
    "pynsq": setup_pynsq,
}


def client_argv(client: str, base: list[str], address: str, checks: list[str]) -> list[str]:
    wanted = ",".join(checks)
    if client == "gonsq":  # Go's flag package: single dash
        return [*base, "-nsqd", address, "-check", wanted]
    return [*base, "--nsqd", address, "--check", wanted]


# ---------------------------------------------------------------------------------------------
# running


@dataclass
class Result:
    client: str
    check: str
    ok: bool
    seconds: float
    detail: str


@dataclass
class TargetRun:
    target: str
    results: list[Result] = field(default_factory=list)
    error: str | None = None  # the daemon could not be started
    report: list[str] = field(default_factory=list)  # its lines, printed when all runs are done

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.results)

    def summary(self) -> str:
        n = len(self.results)
        return (
            f"clients: {n} checks, {n - self.failed} passed, {self.failed} failed "
            f"({daemon.describe(self.target)})"
        )


def parse_results(client: str, stdout: str) -> dict[str, Result]:
    out: dict[str, Result] = {}
    for line in stdout.splitlines():
        parts = line.split(" ", 4)
        if len(parts) < 4 or parts[0] != "RESULT" or parts[1] not in ("PASS", "FAIL"):
            continue
        try:
            seconds = float(parts[3])
        except ValueError:
            seconds = 0.0
        detail = parts[4] if len(parts) > 4 else ""
        out[parts[2]] = Result(client, parts[2], parts[1] == "PASS", seconds, detail)
    return out


def _indent(text: str, prefix: str = "      | ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


# One daemon starts at a time: its free ports are its own before the next run picks some.
_STARTING = threading.Lock()


def run_client(
    client: str, base: list[str], target: str, checks: list[str], verbose: bool, out: list[str]
) -> list[Result]:
    """Run one client's checks against a fresh ``target`` daemon; return the results, and
    the lines that report them in `out`."""
    with _STARTING:
        dmn = daemon.start(target)
    start = time.monotonic()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    problem = ""
    with tempfile.TemporaryFile("w+") as errfile:
        try:
            proc = subprocess.run(
                client_argv(client, base, dmn.address, checks),
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errfile,
                text=True,
                timeout=CLIENT_TIMEOUT_S,
                check=False,
            )
            stdout, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or b""
            stdout = out.decode(errors="replace") if isinstance(out, bytes) else out
            code = None
            problem = f"client killed after {CLIENT_TIMEOUT_S:.0f}s"
        finally:
            died = dmn.alive() is False
            log_tail = dmn.log_tail() if died else ""
            exit_code = dmn.stop()
        errfile.seek(0)
        stderr = errfile.read()
    daemon_failed = died or exit_code != 0
    if died:
        problem = f"nsqd exited with {exit_code} during the run" + (
            f"; {problem}" if problem else ""
        )
    elif exit_code != 0:
        problem = f"nsqd exited with {exit_code} after SIGTERM" + (
            f"; {problem}" if problem else ""
        )
    elif not problem and code not in (0, 1):
        problem = f"client exited with {code}"
    got = parse_results(client, stdout)
    results: list[Result] = []
    for check in checks:
        r = got.get(check) or Result(client, check, False, 0.0, problem or "no result reported")
        if problem and got.get(check):
            r.detail += f" [{problem}]"
            if daemon_failed:  # a PASS means nothing from a daemon that died or failed to stop
                r.ok = False
        results.append(r)
        mark = "PASS" if r.ok else "FAIL"
        out.append(f"  {client:<6} {check:<16} {mark}  {r.seconds:6.2f}s  {r.detail}")
    elapsed = time.monotonic() - start
    out.append(f"  {client:<6} {'':<16}       {elapsed:6.2f}s  total")
    if verbose or problem or not all(r.ok for r in results):
        if stderr.strip():
            lines = stderr.strip().splitlines()
            shown = lines if verbose else lines[-20:]
            out.append(f"    {client} stderr (last {len(shown)} of {len(lines)} lines):")
            out.append(_indent("\n".join(shown)))
        if log_tail:
            out.append(f"    nsqd log tail:\n{_indent(log_tail)}")
    return results


def run_target(
    target: str, clients: dict[str, list[str] | str], checks: list[str], verbose: bool
) -> TargetRun:
    """Every client's checks against ``target``, each client against a daemon of its own, the
    clients at once (the checks wait on timeouts far more than they compute: one after the
    other, both daemons' runs took 1m40s of the suite; at once, ~20 s). Its report lists the
    clients in order."""
    run = TargetRun(target)
    reports: dict[str, list[str]] = {client: [] for client in clients}

    def one(client: str, base: list[str] | str) -> list[Result]:
        out = reports[client]
        if isinstance(base, str):  # setup failed: every check fails with the reason
            out.append(f"  {client:<6} {'(all)':<16} FAIL  setup failed (see above)")
            return [Result(client, check, False, 0.0, f"setup failed: {base}") for check in checks]
        try:
            return run_client(client, base, target, checks, verbose, out)
        except DaemonError as exc:
            run.error = str(exc)
            out.append(f"  could not start nsqd: {exc}")
            return []

    with ThreadPoolExecutor(max_workers=len(clients) or 1) as pool:
        futures = [pool.submit(one, client, base) for client, base in clients.items()]
        results = [future.result() for future in futures]
    run.report.append(f"== {daemon.describe(target)} ==")
    for client, found in zip(clients, results, strict=True):
        run.results.extend(found)
        run.report.extend(reports[client])
    return run


def print_table(runs: list[TargetRun], clients: list[str], checks: list[str]) -> None:
    print("== results ==")
    header = f"{'client/check':<24}" + "".join(f"{r.target:<11}" for r in runs)
    print(header)
    by_key = [{(x.client, x.check): x for x in r.results} for r in runs]
    for client in clients:
        for check in checks:
            cells = []
            for table in by_key:
                res = table.get((client, check))
                cells.append("-" if res is None else ("PASS" if res.ok else "FAIL"))
            print(f"{client + '/' + check:<24}" + "".join(f"{c:<11}" for c in cells))
    for r in runs:
        if r.error:
            print(f"{r.target}: nsqd could not be started: {r.error.splitlines()[0]}")
        print(r.summary())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.clients",
        description="Run go-nsq, nsqjs and pynsq checks against the real nsqd and/or ours.",
    )
    parser.add_argument("--target", choices=("ours", "reference", "both"), default="both")
    parser.add_argument(
        "--clients", default=",".join(CLIENTS), help=f"comma-separated, from {','.join(CLIENTS)}"
    )
    parser.add_argument("--check", default="all", help="all, or comma-separated check names")
    parser.add_argument("-v", "--verbose", action="store_true", help="show all client stderr")
    parser.add_argument(
        "--ours-flags", default="", help="flags for our nsqd only, e.g. --ours-flags=--workers=2"
    )
    args = parser.parse_args(argv)
    daemon.OURS_FLAGS[:] = shlex.split(args.ours_flags)

    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    checks = list(CHECKS) if args.check == "all" else [c.strip() for c in args.check.split(",")]
    bad = [c for c in clients if c not in CLIENTS] + [c for c in checks if c not in CHECKS]
    if bad or not clients or not checks:
        parser.error(f"unknown client/check name(s): {', '.join(bad) or '(none given)'}")
    targets = list(daemon.TARGETS) if args.target == "both" else [args.target]

    print("== setup ==", flush=True)
    prepared: dict[str, list[str] | str] = {}
    for client in clients:
        t0 = time.monotonic()
        try:
            prepared[client] = SETUPS[client]()
            print(f"  {client:<6} ready ({time.monotonic() - t0:.1f}s)", flush=True)
        except SetupError as exc:
            prepared[client] = str(exc).splitlines()[0]
            print(f"  {client:<6} SETUP FAILED:\n{_indent(str(exc))}", flush=True)

    with ThreadPoolExecutor(max_workers=len(targets)) as pool:  # the daemons side by side
        runs = list(pool.map(lambda t: run_target(t, prepared, checks, args.verbose), targets))
    for run in runs:
        print("\n".join(run.report), flush=True)
    print_table(runs, clients, checks)

    by_target = {r.target: r for r in runs}
    if any(r.error for r in runs):
        return 2
    ours = by_target.get("ours")
    if (ours and ours.failed) or any(isinstance(v, str) for v in prepared.values()):
        return 1
    if any(r.failed for r in runs):
        return 3
    return 0
