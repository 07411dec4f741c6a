"""Run a page's shell examples as a reader would type them, in order, on this machine.

What is changed on the way, and nothing else:

- ports: every port of DOC_PORTS (nsqd's 4150/4151/4152, nsqlookupd's 4160/4161, nsqadmin's
  4171, the auth server's 4181, a second nsqd's 4250/4251, Redis's 6379) after a `:` or a blank
  (`127.0.0.1:4151`, `-p 6379`) becomes a free port of 127.0.0.1, the same one all through the
  page;
- an `nsqd` command line that names no `--tcp-address` or `--http-address` gets
  `=127.0.0.1:4150` and `:4151`, and `--https-address=127.0.0.1:4152` when it has `--tls-cert`
  (then rewritten as above), so that nothing listens on every interface or on a port another
  program holds;
- paths under `/var/lib/` move under the page's temporary folder (and are made);
- the commands run in bash (`set -euo pipefail`) in that temporary folder, where `config`,
  `bench`, `examples`, `scripts` and `.reference` are links to the checkout's, with `nsqd`,
  `nsqd-certs` and `python` on PATH running this checkout with this interpreter, and `curl`
  answering with `--silent --show-error --fail-with-body` (an HTTP error status fails the
  example). Nothing is written into the checkout.

Everything a page starts runs in a process group of its own, stopped when the page ends; what
a `run: background` block starts is stopped (SIGTERM, as Ctrl-C would) when the page's next
background block starts, as a reader stops one example's daemon before starting the next."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from .pages import Block, Page, Table, console_steps, output_matches

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
import nsqd_process

DOC_PORTS = (4150, 4151, 4152, 4160, 4161, 4171, 4181, 4250, 4251, 6379)
LINKED = ("config", "bench", "examples", "scripts", ".reference")
STEP_TIMEOUT = 60.0
START_TIMEOUT = 30.0
PRELUDE = (
    'set -euo pipefail\ncurl() { command curl --silent --show-error --fail-with-body "$@"; }\n'
)
_DEFAULT_ADDRESSES = {"--tcp-address": 4150, "--http-address": 4151, "--https-address": 4152}
_HTTPS_ONLY_WITH = "--tls-cert="  # nsqd listens for HTTPS only with a certificate
_LISTENS = re.compile(r"--(?:tcp|http|https|resp)-address=127\.0\.0\.1:(\d+)")


class ExampleFailed(AssertionError):
    pass


class PageRun:
    """One page's examples against their own ports, folder and processes."""

    def __init__(self, page: Page, tmp: Path) -> None:
        self.page = page
        self.tmp = tmp
        self.ports = dict(zip(DOC_PORTS, nsqd_process.free_ports(len(DOC_PORTS)), strict=True))
        self.cwd = tmp / "cwd"
        self.env = self._environment()
        self.groups: list[subprocess.Popen[bytes]] = []
        self.foreground: subprocess.Popen[bytes] | None = None  # the last background block
        self.ran: list[str] = []

    def _environment(self) -> dict[str, str]:
        repo = nsqd_process.REPO_ROOT
        self.cwd.mkdir(parents=True)
        for name in LINKED:
            target = nsqd_process.reference_dir().parent if name == ".reference" else repo / name
            (self.cwd / name).symlink_to(target)
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir()
        for name, module in (("nsqd", "nsqd"), ("nsqd-certs", "nsqd.certs"), ("python", "")):
            run = f'exec "{sys.executable}"' + (f" -m {module}" if module else "") + ' "$@"\n'
            (bin_dir / name).write_text("#!/bin/sh\n" + run)
            (bin_dir / name).chmod(0o755)
        env = nsqd_process.pythonpath_env(repo)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
        return env

    # -- rewriting -------------------------------------------------------------------------

    def rewrite(self, text: str) -> str:
        text = re.sub(r"(?m)^(\s*)nsqd(?=\s|$)((?:.*\\\n)*.*)$", self._nsqd_flags, text)
        for doc, real in self.ports.items():
            text = re.sub(rf"(?<=[:\s]){doc}\b", str(real), text)
        for path in set(re.findall(r"/var/lib/[\w.-]+", text)):
            (self.tmp / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
        return text.replace("/var/lib/", f"{self.tmp}/var/lib/")

    @staticmethod
    def _nsqd_flags(found: re.Match[str]) -> str:
        indent, rest = found.group(1), found.group(2)
        added = [
            f"{flag}=127.0.0.1:{port}"
            for flag, port in _DEFAULT_ADDRESSES.items()
            if f"{flag}=" not in rest and (flag != "--https-address" or _HTTPS_ONLY_WITH in rest)
        ]
        return f"{indent}nsqd {' '.join(added)}{rest}" if added else found.group(0)

    # -- running ---------------------------------------------------------------------------

    def _start(self, argv: list[str], log: Path | None = None) -> subprocess.Popen[bytes]:
        """``argv`` in a process group of its own; its output piped, or into ``log`` for
        what keeps running (a pipe nobody reads would stall a daemon's logging)."""
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(log.open("wb")) if log else subprocess.PIPE
            proc = subprocess.Popen(
                argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out if log else subprocess.PIPE,
                start_new_session=True,
            )
        self.groups.append(proc)
        return proc

    def shell(self, script: str, where: str) -> str:
        """Run ``script`` to its end: its stdout (ExampleFailed on a non-zero exit)."""
        script = self.rewrite(script)
        proc = self._start(["bash", "-c", PRELUDE + script])
        try:
            out, err = proc.communicate(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise ExampleFailed(
                f"{where}: still running after {STEP_TIMEOUT} s:\n{script}"
            ) from exc
        if proc.returncode != 0:
            raise ExampleFailed(
                f"{where}: exit {proc.returncode}\n{script}\nstdout:\n{out.decode()[-2000:]}"
                f"\nstderr:\n{err.decode()[-2000:]}"
            )
        self.ran.append(where)
        return out.decode()

    def background(self, block: Block) -> None:
        script = self.rewrite(block.text)
        ports = [int(p) for p in _LISTENS.findall(script)]
        if not ports:
            raise ExampleFailed(f"{block.page}:{block.line}: a background block listens nowhere")
        if self.foreground is not None:
            _stop([self.foreground])
        if busy := [p for p in ports if nsqd_process.port_open(p)]:
            raise ExampleFailed(f"{block.page}:{block.line}: ports {busy} already taken")
        log = self.tmp / f"background-{block.line}.log"
        proc = self.foreground = self._start(["bash", "-c", PRELUDE + script], log)
        deadline = time.monotonic() + START_TIMEOUT
        while not all(nsqd_process.port_open(p) for p in ports):
            code = proc.poll()
            if (code is not None and code != 0) or time.monotonic() > deadline:
                raise ExampleFailed(
                    f"{block.page}:{block.line}: not listening on {ports} (exit {code}):\n"
                    f"{script}\n{nsqd_process.log_tail(log, max_bytes=3000)}"
                )
            time.sleep(0.1)
        self.ran.append(f"{block.page}:{block.line} (background)")

    def console(self, block: Block) -> None:
        for command, expected in console_steps(block):
            where = f"{block.page}:{block.line}: $ {command}"
            got = self.shell(command, where)
            if not output_matches(expected, got):
                raise ExampleFailed(f"{where}\nexpected:\n{expected}\ngot:\n{got}")

    def table(self, table: Table) -> None:
        """Each row's example in order; `ID` is the oldest id the last receive answered that
        no fin or req row has used yet."""
        ids: list[str] = []
        for n, command in enumerate(table.commands, 1):
            where = f"{table.page}:{table.line} row {n}: {command}"
            if "id=ID" in command:
                if not ids:
                    raise ExampleFailed(f"{where}: no received message for ID")
                command = command.replace("id=ID", f"id={ids[0]}")
            out = self.shell(f"{table.setup}\n{command}", where)
            if "/channel/receive" in command:
                ids = [m["id"] for m in json.loads(out)["messages"]]
            elif "/message/fin" in command or "/message/req" in command:
                ids.pop(0)

    def block(self, block: Block) -> None:
        if block.marker == "run" and block.detail == "background":
            self.background(block)
        elif block.marker == "run":
            raise ExampleFailed(f"{block.page}:{block.line}: unknown marker run: {block.detail}")
        elif block.lang == "console":
            self.console(block)
        else:
            self.shell(block.text, f"{block.page}:{block.line}")

    def daemon(self, flags: list[str]) -> None:
        """Our nsqd for the page's examples, as the page's 127.0.0.1:4150 and :4151."""
        data = self.tmp / "data"
        data.mkdir()
        argv = [
            *nsqd_process.ours_command(),
            *nsqd_process.address_flags(self.ports[4150], self.ports[4151], data),
            *(self.rewrite(flag) for flag in flags),
        ]
        log = self.tmp / "nsqd.log"
        proc = self._start(argv, log)
        ports = [int(p) for p in _LISTENS.findall(" ".join(argv))]
        ready = lambda: all(nsqd_process.port_open(p) for p in ports)  # noqa: E731
        if not nsqd_process.wait_until_ready(proc, ready, START_TIMEOUT):
            tail = nsqd_process.log_tail(log, max_bytes=3000)
            raise ExampleFailed(f"the page's nsqd did not start: {argv}\n{tail}")

    def stop(self) -> None:
        _stop(self.groups)


def _stop(groups: list[subprocess.Popen[bytes]]) -> None:
    """The process groups led by ``groups``: SIGTERM, then SIGKILL after 10 s."""
    for proc in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for proc in groups:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.1, deadline - time.monotonic()))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def page_run(page: Page, tmp: Path) -> Iterator[PageRun]:
    run = PageRun(page, tmp)
    try:
        if page.daemon_flags is not None:
            run.daemon(page.daemon_flags)
        yield run
    finally:
        run.stop()


def run_page(page: Page, tmp: Path) -> list[str]:
    """Every runnable block and table of ``page``, in the page's order: what ran."""
    with page_run(page, tmp) as run:
        steps: list[tuple[int, Block | Table]] = [(b.line, b) for b in page.runnable]
        steps += [(t.line, t) for t in page.tables]
        for _, step in sorted(steps, key=lambda s: s[0]):
            if isinstance(step, Table):
                run.table(step)
            else:
                run.block(step)
        return run.ran
