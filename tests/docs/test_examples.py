"""Every shell example of README.md and docs/ runs, in page order, against real daemons on free
ports (tests/docs/runner.py says what is rewritten: ports, `/var/lib/` paths, the nsqd on PATH),
and prints what the page shows where it shows output. A block that cannot run here carries a
`<!-- not run: reason -->` marker and is listed in NOT_RUN below, so none is left out quietly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .pages import Block, Page, console_steps, output_matches, pages, read
from .runner import ExampleFailed, run_page

# (page, first line of the block): every block marked `not run`, and only those.
NOT_RUN = {
    ("README.md", "pip install -e . && nsqd --tcp-address=127.0.0.1:4150"),
    ("README.md", "bash scripts/test.sh"),
    ("docs/benchmark.md", "python bench/run.py"),
    ("docs/operations.md", "docker build -t trio-nsqd ."),
    ("docs/operations.md", "docker compose -f examples/cluster/docker-compose.yml up -d --build"),
    ("docs/spark.md", "pip install -e '.[spark]'"),
}

PAGES = [read(path) for path in pages()]
RUNNABLE = [page for page in PAGES if page.runnable or page.tables]


@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_page_examples_run(page: Page, tmp_path: Path) -> None:
    ran = run_page(page, tmp_path)
    assert len(ran) >= len(page.runnable) + sum(len(t.commands) for t in page.tables), ran


def test_the_tools_the_examples_call_are_installed() -> None:
    """bash and curl from the system, redis-cli from scripts/install_redis.sh: a missing one
    is named here rather than found as `command not found` in a page's example."""
    assert [t for t in ("bash", "curl", "redis-cli") if shutil.which(t) is None] == []


def test_every_shell_block_runs_or_says_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = [b for page in PAGES for b in page.blocks if b.shell]
    not_run = [b for b in blocks if b.marker == "not run"]
    with capsys.disabled():
        print(f"\ndocs: {len(blocks) - len(not_run)} shell blocks run, {len(not_run)} not run:")
        for b in not_run:
            print(f"  {b.page}:{b.line}: {b.first_command[:60]} -- {b.detail}")
    assert {(b.page, b.first_command) for b in not_run} == NOT_RUN
    assert len(blocks) - len(not_run) >= 10


def test_the_rsmq_phpmq_table_runs_every_row() -> None:
    (table,) = [t for page in PAGES for t in page.tables]
    assert table.page == "docs/http-access.md" and table.setup.startswith("H=")
    assert len(table.commands) == 15
    assert sum(c.count("curl ") for c in table.commands) == 18


def test_a_marker_without_a_reason_or_a_block_without_a_language_is_refused(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.md"
    for text in ("<!-- not run: -->\n```sh\ntrue\n```\n", "```\ntrue\n```\n"):
        bad.write_text(text)
        with pytest.raises(ValueError):
            read(bad)


def test_console_output_is_compared() -> None:
    block = Block("x.md", 1, "console", "$ echo a \\\n  b\na b\n$ true\n")
    assert console_steps(block) == [("echo a \\\n  b", "a b"), ("true", "")]
    assert output_matches('{"a":...,"b":1}', '{"a":17,"b":1}\n')
    assert not output_matches('{"a":...,"b":1}', '{"a":17,"b":2}')


def test_a_failing_example_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# x\n\n```console\n$ echo hello\nworld\n```\n")
    with pytest.raises(ExampleFailed, match="expected"):
        run_page(read(page), tmp_path / "run")
