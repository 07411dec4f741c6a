"""redis-py's own tests (6.4.0: tests/test_commands.py, test_hash.py, test_scripting.py,
unpatched, from its PyPI source distribution) against ours beside redis-server: the ids in
redis_py_upstream/selected.txt (every test of those files that passes on redis-server and
needs nothing this front-end lacks: 311 of the 428 that pass there) must pass on both, under
RESP2 and RESP3. Scripts need lupa (the test extra installs it)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).with_name("redis_py_upstream")
# outside the repository, so that pytest never collects the upstream tests on its own
SRC = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trio-nsqd" / "redis-py"
VERSION = "6.4.0"
SELECTED = [line for line in (HERE / "selected.txt").read_text().splitlines() if line]


def _sources() -> Path:
    tree = SRC / f"redis-{VERSION}"
    if (tree / "tests" / "conftest.py").exists():
        return tree
    SRC.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--require-hashes", "-r", str(HERE / "requirements.txt"), "-d", str(SRC)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"could not download redis-py {VERSION}'s sources:\n{done.stderr}")
    with tarfile.open(SRC / f"redis-{VERSION}.tar.gz") as tar:
        tar.extractall(SRC, filter="data")
    return tree


def _run(tree: Path, port: int, protocol: str, out: Path) -> dict[str, str]:
    """Each selected id -> pass, fail or skip, as its own suite judged it."""
    env = {**os.environ, "PYTHONPATH": str(tree)}  # its own redis package, not the installed one
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:trio",
         f"--redis-url=redis://127.0.0.1:{port}/9", f"--protocol={protocol}",
         f"--junitxml={out}", *SELECTED],
        cwd=tree, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    results = {}
    for case in ET.parse(out).getroot().iter("testcase"):
        module, cls = case.get("classname", "").rsplit(".", 1)
        outcome = "pass"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "fail"
            elif child.tag == "skipped" and outcome == "pass":
                outcome = "skip"
        results[f"{module.replace('.', '/')}.py::{cls}::{case.get('name')}"] = outcome
    return results


@pytest.mark.parametrize("protocol", ["2", "3"])
def test_redis_py_suite(pair, tmp_path: Path, protocol: str) -> None:
    tree = _sources()
    redis_server, ours = pair.by_kind["plain"]
    with ThreadPoolExecutor(2) as pool:  # two servers: the two runs side by side
        on_redis = pool.submit(_run, tree, redis_server.port, protocol, tmp_path / "redis.xml")
        on_ours = pool.submit(_run, tree, ours.port, protocol, tmp_path / "ours.xml")
        want, got = on_redis.result(), on_ours.result()
    assert sum(v == "pass" for v in want.values()) == len(SELECTED), {
        k: v for k, v in want.items() if v != "pass"
    }
    failed = sorted(k for k in SELECTED if got.get(k) != "pass")
    assert not failed, f"{len(SELECTED) - len(failed)}/{len(SELECTED)} passed on ours: {failed}"
