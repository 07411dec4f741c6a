"""Smoke test of the side-by-side benchmark harness (bench/): its parsers and count recovery,
row selection and table, and one short real run of two rows on both daemons."""

from __future__ import annotations

import importlib
import json
import socket
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH = REPO_ROOT / "bench"
# bench/ imports its modules by bare name; conformance/ has a `daemons` of its own
BENCH_MODULES = (
    "nsqv2",
    "clients",
    "daemons",
    "loops",
    "workloads",
    "scaleout",
    "run",
    "merge",
    "profile_rows",
)


@pytest.fixture
def bench() -> Iterator[ModuleType]:
    """bench/run.py imported with bench/ first on sys.path; sys.path and modules restored after."""
    saved_path = list(sys.path)
    saved = {name: sys.modules.pop(name) for name in BENCH_MODULES if name in sys.modules}
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("run")
    finally:
        sys.path[:] = saved_path
        for name in BENCH_MODULES:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def test_tool_count_is_recovered_from_rate_and_duration(bench: ModuleType) -> None:
    workloads = sys.modules["workloads"]
    count, seconds = 1_651_400, 2.000912345
    line = (
        f"[bench_writer] 2026/11/25 03:19:01 duration: {seconds}s - 157.471mb/s - "
        f"{count / seconds:.3f}ops/s - 1.211us/op\n"
    )
    run = workloads.parse_tool_output("bench_writer", 0, line)
    assert run.count == count
    assert run.seconds == seconds
    assert workloads.parse_go_duration("1m0.5s") == 60.5
    assert workloads.parse_go_duration("250ms") == 0.25
    with pytest.raises(workloads.ToolError):
        workloads.parse_tool_output("bench_reader", 2, "panic: E_BAD_TOPIC")


def test_only_selects_rows_workloads_and_groups(bench: ModuleType) -> None:
    names = [w.name for w in bench.select_workloads("latency_p99_us,writer,rss")]
    assert names == ["writer_b200", "writer_b200_ch", "writer_b1", "writer_b1_ch", "latency", "rss"]
    with pytest.raises(ValueError, match="nope"):
        bench.select_workloads("mpub,nope")


def test_response_parsers_count_ok_and_fail_loudly(bench: ModuleType) -> None:
    loops, nsqv2 = sys.modules["loops"], sys.modules["nsqv2"]
    a, b = socket.socketpair()
    with a, b:
        v2 = loops._Conn(a, "v2")
        v2.buf += b"\x00\x00\x00\x06\x00\x00\x00\x00OK" + b"\x00\x00\x00\x0f\x00\x00\x00\x00_heart"
        assert v2.take_responses() == 1
        v2.buf += b"beat_" + b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
        assert v2.take_responses() == 1
        assert b.recv(16) == b"NOP\n"  # the heartbeat was answered
        v2.buf += b"\x00\x00\x00\x0e\x00\x00\x00\x01E_BAD_BODY"
        with pytest.raises(nsqv2.ProtocolError, match="E_BAD_BODY"):
            v2.take_responses()

        http = loops._Conn(a, "http")
        ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nOK"
        http.buf += ok + ok[:20]
        assert http.take_responses() == 1
        http.buf += ok[20:]
        assert http.take_responses() == 1
        http.buf += b"HTTP/1.1 400 Bad Request\r\nContent-Length: 13\r\n\r\nMISSING_TOPIC"
        with pytest.raises(nsqv2.ProtocolError, match="400"):
            http.take_responses()


def test_table_shows_ratio_and_failed_rows(bench: ModuleType) -> None:
    settings = sys.modules["workloads"].Settings(
        bin_dir=None,
        runfor="1s",
        runfor_s=1.0,
        latency_rate=10_000,
        latency_seconds=1.0,
        mem_queue_size=10_000,
        ours_cmd=(),
        backlog=1_000,
        start_samples=1,
    )
    ref = {"metrics": {"mpub200k_pub": 100.0, "mpub200k_sub": 50.0}, "error": None}
    ours = {"metrics": {"mpub200k_pub": 150.0, "mpub200k_sub": 25.0}, "error": None}
    failed = {"metrics": {}, "error": "Unsound: depth 3, not 1000000"}
    results = {
        "reference": bench.TargetResult("reference", runs=[{"mpub": ref, "rss": ref}]),
        "ours": bench.TargetResult("ours", runs=[{"mpub": ours, "rss": failed}]),
    }
    rows = [m for w in bench.select_workloads("mpub,rss") for m in w.rows]
    lines = bench.table(results, settings, rows).splitlines()
    assert "1.50x" in lines[2] and "0.50x" in lines[3]
    assert "FAILED" in lines[4]
    assert bench.exit_code(results) == 2


def _bench_script(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A bench/ script run as a user runs it, from the checkout; it must exit 0."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_two_rows_on_both_daemons(tmp_path: Path) -> None:
    """A real run, kept short: MPUB 200k and HTTP /pub on one connection for 1 s."""
    only = "--only=mpub,http_pub_1"
    proc = _bench_script("run.py", "--quick", "--runfor=1s", only, f"--results-dir={tmp_path}")
    assert "HTTP /pub keep-alive, 1 connection" in proc.stdout
    (result,) = tmp_path.glob("*.json")
    data = json.loads(result.read_text())
    for key in ("mpub200k_pub", "mpub200k_sub", "http_pub_1"):
        assert data["ratio_ours_over_reference"][key] > 0


def test_across_workers_measures_both_paths(tmp_path: Path) -> None:
    """bench/across_workers.py, kept short: a message published in worker 1 and read in 0,
    every one delivered (the script checks its counts), figures in its JSON."""
    proc = _bench_script(
        "across_workers.py",
        *("--workers=2", "--publish-in=1", "--consume-in=0", "--rate=2000", "--seconds=1"),
        *("--backlog=20000", "--repeat=1", f"--results-dir={tmp_path}"),
    )
    assert "row (--workers=2, published in 1, read in 0, medians of 1)" in proc.stdout
    (result,) = tmp_path.glob("across-*.json")
    medians = json.loads(result.read_text())["medians"]
    assert medians["p50_us"] > 0 and medians["p99_us"] >= medians["p50_us"]
    assert medians["read_per_s"] > 0 and medians["read_cpu_us"] > 0


@pytest.mark.parametrize("server", ["python", "c"])
def test_floor_answers_every_pub_of_both_loops(server: str) -> None:
    """bench/floor.py, kept short: the bare loop (Python, or bench/floor.c built with cc)
    answers the round-trip clients (which count only OKs and fail on anything else) at 1 and
    3 connections, and the Go bench_writer at batch 1 (IDENTIFY, then MPUBs), a line each."""
    args = (f"--server={server}", "--conns=1,3", "--runfor=300ms", "--repeat=1")
    lines = _bench_script("floor.py", *args, "--bench-writer").stdout.splitlines()
    heads = [line.split(": ")[0] for line in lines]
    assert heads == ["1 connection(s)", "3 connection(s)", "bench_writer batch 1"], lines
    for line in lines:
        rate = float(line.split(": ")[1].split(" ")[0].replace(",", ""))
        assert rate > 0, line


def test_merge_takes_the_median_over_every_file_s_runs(bench: ModuleType) -> None:
    """bench/merge.py: the 16-core table's medians are over the runs of all four files, and each
    file's own ratio follows (the committed results of a lent machine's calls)."""
    merge = importlib.import_module("merge")
    files = sorted((BENCH / "results" / "16cores-20261127T2347").glob("all_workers-*.json"))
    assert len(files) == 4
    docs = [json.loads(f.read_text()) for f in files]

    def runs(target: str, key: str) -> list[float]:
        return [
            w["metrics"][key]
            for d in docs
            for run in d["targets"][target]["runs"]
            for w in run.values()
            if key in w.get("metrics", {})
        ]

    ours, ref = runs("ours", "def_writer_b1"), runs("reference", "def_writer_b1")
    assert len(ours) == len(ref) == 4
    line = next(
        row
        for row in merge.merged_table(files).splitlines()
        if row.startswith("defaults: bench_writer batch 1, 1 channel  ")
    )
    want = statistics.median(ours) / statistics.median(ref)
    each = [d["ratio_ours_over_reference"]["def_writer_b1"] for d in docs]
    assert f"{statistics.median(ours):,.0f}" in line and f"{want:.2f}x" in line
    assert line.endswith(" ".join(f"{r:.2f}" for r in each))


def test_round_trip_rows_get_a_client_process_per_four_cores(bench: ModuleType) -> None:
    workloads = sys.modules["workloads"]
    assert workloads.client_processes(1, 16) == 1
    assert workloads.client_processes(32, 2) == 2
    assert workloads.client_processes(32, 8) == 2
    assert workloads.client_processes(32, 16) == 4
    assert workloads.client_processes(3, 64) == 3


def test_scaleout_is_no_workers_row(bench: ModuleType) -> None:
    """scaleout starts one nsqd per core itself: with --workers it is left out of the default
    set and refused when asked for (each worker registers with nsqlookupd, so its count check
    fails)."""
    assert "scaleout" in [w.name for w in bench.parse_args([]).workloads]
    assert "scaleout" not in [w.name for w in bench.parse_args(["--workers", "2"]).workloads]
    assert "scaleout" in [w.name for w in bench.parse_args(["--workers", "1"]).workloads]
    with pytest.raises(SystemExit):
        bench.parse_args(["--workers", "auto", "--only", "writer,scaleout"])


def test_profile_summary_sums_processes_and_lines(bench: ModuleType, tmp_path: Path) -> None:
    """bench/profile_rows.py: py-spy's raw stacks of several processes summed per function
    (its lines together), own and inclusive shares of all samples."""
    profile = importlib.import_module("profile_rows")
    (tmp_path / "raw-1.txt").write_text(
        "main (a.py:1);spin (r.py:10) 6\nmain (a.py:1);write (t.py:5) 2\n"
    )
    (tmp_path / "raw-2.txt").write_text("main (a.py:2);spin (r.py:11) 2\nnot a sample line\n")
    text = profile.summarize(sorted(tmp_path.glob("raw-*.txt")))
    assert text.startswith("10 samples from 2 process(es)")
    own, incl = text.split("incl %")
    assert " 80.0  spin (r.py)" in own and " 20.0  write (t.py)" in own
    assert "100.0  main (a.py)" in incl
