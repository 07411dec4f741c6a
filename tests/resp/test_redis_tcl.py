"""Redis's own Tcl test suite (tag 7.0.15, vendored unchanged in tests/resp/redis_tcl) run
against redis-server and against ours, side by side: the units for lists, expiry and hashes,
in two groups, each group's run against a server of its own (the runs spend most of their time
in the tests' sleeps and timeouts: 40% of 2 cores for one run per server), with the options
the suite offers for an external server (`--host/--port --singledb
--ignore-encoding --ignore-digest --tags -resp3`, and `--durable`: an error fails its test,
not the run). redis-server must pass every test; ours every test redis-server passed, except
the EXCLUDED ones, each with the reason it cannot pass here. tclsh 8.6 is installed by
scripts/install_redis.sh; a missing tclsh fails the test."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conformance.resp import servers

SUITE = Path(__file__).parent / "redis_tcl"
# the units in groups of about equal length (on redis-server, 2 cores: list 13 s, list-2 13,
# list-3 46, expire 12, hash 5); a group's units run one after another ("SLOW COMPUTER" mode)
GROUPS = [
    ["unit/type/list-3"],
    ["unit/type/list", "unit/type/list-2", "unit/expire", "unit/type/hash"],
]
UNITS = [unit for group in GROUPS for unit in group]
OPTIONS = ["--singledb", "--ignore-encoding", "--ignore-digest", "--tags", "-resp3", "--durable"]
REDIS_FLAGS = ("--enable-debug-command", "yes")  # as the suite's own tests/assets/default.conf
RUN_TIMEOUT = 420  # seconds for a group's run against one server; ~50 on 2 cores

_REPL = "reads the replication stream (SYNC via attach_to_replication_stream): no replication here"
_DUMP = "DUMP/RESTORE: Redis's RDB serialization of a value, not implemented here"

# test name -> why ours cannot pass it (the names as the suite prints them)
EXCLUDED = {
    "BLMPOP propagate as pop with count command to replica": _REPL,
    "LMPOP propagate as pop with count command to replica": _REPL,
    "List ziplist of various encodings": _DUMP,
    "List ziplist of various encodings - sanitize dump": _DUMP,
    "All TTL in commands are propagated as absolute timestamp in replication stream": _REPL,
    "GETEX propagate as to replica as PERSIST, DEL, or nothing": _REPL,
    "SCAN: Lazy-expire should not be wrapped in MULTI/EXEC": _REPL,
    "RANDOMKEY: Lazy-expire should not be wrapped in MULTI/EXEC": _REPL,
    "Is a ziplist encoded Hash promoted on big payload?": "DEBUG OBJECT: a value's encoding",
    "Hash ziplist of various encodings": _DUMP,
    "Hash ziplist of various encodings - sanitize dump": _DUMP,
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LINE = re.compile(r"^\[(ok|err|exception|skip)\]: (.*?)(?: \(\d+ ms\)| in tests/\S+\.tcl)?$")


@dataclass
class Outcome:
    """One run's verdicts: per unit, the names of its passed, failed and skipped tests."""

    ok: dict[str, Counter[str]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # [err] and [exception] lines, in order
    skipped: Counter[str] = field(default_factory=Counter)
    finished: bool = False  # the harness reached its summary ("The End")

    def passed(self) -> Counter[str]:
        return sum(self.ok.values(), Counter())


def parse(output: str) -> Outcome:
    out = Outcome()
    unit = ""
    for line in _ANSI.sub("", output).splitlines():
        if line.startswith("Testing "):
            unit = line.split()[1]
            out.ok.setdefault(unit, Counter())
        elif line.strip() == "The End":
            out.finished = True
        elif m := _LINE.match(line):
            kind, name = m.groups()
            if kind == "ok":
                out.ok.setdefault(unit, Counter())[name] += 1
            elif kind == "skip":
                out.skipped[name] += 1
            else:
                out.failed.append(f"{unit}: [{kind}] {name}")
    return out


def tclsh() -> str:
    found = shutil.which("tclsh")
    if found is None:
        subprocess.run(["bash", str(servers.REPO_ROOT / "scripts" / "install_redis.sh")])
        found = shutil.which("tclsh")
    if found is None:
        pytest.fail("tclsh is missing and scripts/install_redis.sh did not install it")
    return found


def start_run(
    workdir: Path, port: int, units: list[str], base: int, extra: list[str]
) -> subprocess.Popen[str]:
    """The suite from a copy of its directory (it writes tests/tmp under the current one).
    `base`: the harness listens for its test client on a port it finds in [base-32, base),
    where port+10000 must be free too (runs side by side: windows apart)."""
    shutil.copytree(SUITE, workdir)
    singles = [arg for unit in units for arg in ("--single", unit)]
    argv = [tclsh(), "tests/test_helper.tcl", "--host", "127.0.0.1", "--port", str(port)]
    argv += [*OPTIONS, *singles, "--baseport", str(base), *extra]
    return subprocess.Popen(
        argv, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={"PATH": "/usr/bin:/bin", "TERM": "dumb"}, start_new_session=True,
    )  # fmt: skip


def bases(n: int) -> list[int]:
    """`n` harness port windows 32 apart, below the ephemeral range (32768) with their +10000,
    from a random start."""
    first = random.randrange(20_032, 22_700 - 32 * n)
    return [first + 32 * i for i in range(n)]


def merge(outcomes: list[Outcome]) -> Outcome:
    """The verdicts of several runs as one: finished when every one of them finished."""
    out = Outcome(finished=all(o.finished for o in outcomes))
    for o in outcomes:
        out.ok.update(o.ok)
        out.failed += o.failed
        out.skipped += o.skipped
    return out


def finish(run: subprocess.Popen[str]) -> str:
    try:
        output, _ = run.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)  # the harness and the test client it started
        output, _ = run.communicate()
        output += f"\n(killed after {RUN_TIMEOUT}s)"
    return output


def test_parse_reads_the_harness_verdicts() -> None:
    out = parse(
        "Testing unit/type/list\n[\x1b[0;32;49mok\x1b[0m]: LPOS basic usage (3 ms)\n"
        "[err]: LPOS no match in tests/unit/type/list.tcl\nExpected '1' to equal 2\n"
        "[skip]: client unblock tests\nTesting unit/expire\n[ok]: EXPIRE - set timeouts (0 ms)\n"
        "[exception]: Executing test client: boom\n                   The End\n"
    )
    assert out.ok == {
        "unit/type/list": Counter({"LPOS basic usage": 1}),
        "unit/expire": Counter({"EXPIRE - set timeouts": 1}),
    }
    assert out.failed == [
        "unit/type/list: [err] LPOS no match",
        "unit/expire: [exception] Executing test client: boom",
    ]
    assert out.skipped == Counter({"client unblock tests": 1}) and out.finished


def test_redis_tcl_units(tmp_path: Path, ours: Any) -> None:
    skipfile = tmp_path / "excluded.txt"
    skipfile.write_text("".join(f"{name}\n" for name in EXCLUDED))
    redises: list[servers.Server] = []
    wants: list[subprocess.Popen[str]] = []
    gots: list[subprocess.Popen[str]] = []
    windows = iter(bases(2 * len(GROUPS)))
    try:
        for i, units in enumerate(GROUPS):
            redis = servers.start_redis(tmp_path, "", *REDIS_FLAGS)
            redises.append(redis)
            mine = ours.start("--resp-enable-debug-command", data=tmp_path / f"data{i}")
            wants.append(start_run(tmp_path / f"redis{i}", redis.port, units, next(windows), []))
            extra = ["--skipfile", str(skipfile)]
            gots.append(start_run(tmp_path / f"ours{i}", mine.port, units, next(windows), extra))
        want_outs = [finish(run) for run in wants]
        got_outs = [finish(run) for run in gots]
    finally:
        for run in wants + gots:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
        for redis in redises:
            redis.stop()
    want_out, got_out = "\n".join(want_outs), "\n".join(got_outs)
    want, got = merge([parse(o) for o in want_outs]), merge([parse(o) for o in got_outs])
    for unit in UNITS:
        print(f"{unit}: redis-server {sum(want.ok.get(unit, {}).values())} passed,"
              f" ours {sum(got.ok.get(unit, {}).values())} passed", file=sys.stderr)  # fmt: skip
    print(f"ours skipped {sum(got.skipped.values())} excluded tests", file=sys.stderr)
    print("".join(f"ours failed: {line}\n" for line in got.failed), file=sys.stderr, end="")
    assert want.finished and not want.failed, want_out[-4000:]
    assert set(want.ok) == set(UNITS)
    stale = set(EXCLUDED) - set(want.passed())
    assert not stale, f"excluded tests redis-server did not run: {stale}"
    assert got.finished and not got.failed, "\n".join(got.failed) + "\n" + got_out[-4000:]
    # every test redis-server passed, ours passed too (or it is excluded, and skipped)
    expected = Counter({k: n for k, n in want.passed().items() if k not in EXCLUDED})
    assert got.passed() == expected, (expected - got.passed(), got.passed() - expected)
    assert set(got.skipped) == set(EXCLUDED)
