"""Fixtures for the PySpark connector tests: one local[2] Spark session and one of our nsqd
processes for the whole run (every test uses its own topic), and a reader trace file.

pyspark and pyarrow come with the test extra (pip install -e .[test]); a missing one, or a
missing Java runtime, fails these tests rather than skipping them."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
# The checkout first (pyspark_nsq and protocol), then this folder (spark_support).
for path in (str(HERE), str(HERE.parents[1])):
    if path in sys.path:
        sys.path.remove(path)
    sys.path.insert(0, path)
if getattr(sys.modules.get("protocol"), "__file__", "") is None:  # a namespace stand-in
    del sys.modules["protocol"]

from spark_support import Proc, build_session, our_nsqd, spark_env  # noqa: E402

from tests.conftest import SUMMARY  # noqa: E402

_topics = itertools.count()


@pytest.fixture(scope="session")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trace") / "reader.jsonl"


@pytest.fixture(scope="session")
def spark(trace_path: Path) -> Iterator[Any]:
    """One session for the run. The environment must be set before the JVM starts: its
    Python workers inherit it (this interpreter, PYTHONPATH with the repo, loopback); it is
    set only while the JVM starts."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail(
            "no Java runtime for Spark (Java 17: apt-get install openjdk-17-jre)", pytrace=False
        )
    saved = dict(os.environ)
    os.environ.update(spark_env({"PYSPARK_NSQ_TRACE": str(trace_path)}))
    try:
        session = build_session("pyspark_nsq-tests")
    finally:
        # The JVM and the Python workers it starts keep the environment they started with;
        # this process gets its own back, so that a test run after this in the same process
        # (pytest-xdist puts any file after any other) starts its daemons without Spark's
        os.environ.clear()
        os.environ.update(saved)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
    # Every reader process (one per query run, pids from the trace) must be gone: Spark ends
    # them with SIGTERM, and the reader's cleanup on SIGTERM must not keep them alive.
    left = wait_for_exit(trace_pids(trace_path), 15)
    assert not left, f"reader processes still running after the session stopped: {left}"


def trace_pids(path: Path) -> set[int]:
    if not path.exists():
        return set()
    return {json.loads(line)["pid"] for line in path.read_text().splitlines() if line.strip()}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def wait_for_exit(pids: set[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = sorted(p for p in pids if _alive(p))
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


@pytest.fixture
def report(request: pytest.FixtureRequest) -> Any:
    """Lines shown in the terminal summary (delivery counts: duplicates, timings): kept in
    the test's report (user_properties), which reaches the summary from a pytest-xdist
    worker too (tests/conftest.py prints them)."""
    return lambda line: request.node.user_properties.append((SUMMARY, line))


@pytest.fixture(scope="session")
def nsqd() -> Iterator[Proc]:
    daemon = our_nsqd()
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    name = request.node.name.replace("[", "_").replace("]", "")[:40]
    return f"{name}_{int(time.time())}_{next(_topics)}"
