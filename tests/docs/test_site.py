"""The docs/ tree builds as a site with MkDocs in strict mode (a warning, a broken link or a page
left out of the navigation fails), the README's links into docs/ lead somewhere, and the
repository holds no file a running daemon writes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from .pages import REPO_ROOT

RUNTIME_FILE = re.compile(
    r"(^|/)(nsqd\.dat|resp\.log|trio-nsqd\.(attributes|dedupe))$"
    r"|\.diskqueue\.(\d{6}\.dat|meta\.dat|ttl)$|\.inflight\.journal$"
)


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_site_builds_strict(tmp_path: Path) -> None:
    done = _build(REPO_ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    pages = sorted(p.stem for p in (REPO_ROOT / "docs").glob("*.md"))
    built = sorted(p.parent.name for p in (tmp_path / "site").glob("*/index.html"))
    assert built == [p for p in pages if p != "index"]


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(REPO_ROOT / "mkdocs.yml", copy)
    shutil.copytree(REPO_ROOT / "docs", copy / "docs")
    page = copy / "docs" / "durability.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    done = _build(copy, tmp_path / "site")
    assert done.returncode != 0 and "no-such-page.md" in done.stdout + done.stderr


def test_readme_links_every_page_and_only_real_ones() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)", (REPO_ROOT / "README.md").read_text())
    assert all((REPO_ROOT / link).is_file() for link in links), links
    pages = {f"docs/{p.name}" for p in (REPO_ROOT / "docs").glob("*.md")} - {"docs/index.md"}
    assert set(links) == pages
    nav = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())["nav"]
    assert {f"docs/{v}" for entry in nav for v in entry.values()} == pages | {"docs/index.md"}


def test_no_runtime_file_is_in_the_repository() -> None:
    files = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert files and not [f for f in files if RUNTIME_FILE.search(f)]
    assert RUNTIME_FILE.search("nsqd.dat") and RUNTIME_FILE.search("a:b.diskqueue.000001.dat")
