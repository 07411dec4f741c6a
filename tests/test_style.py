"""The style the project keeps (DEVELOPERS' guide): `ruff check` clean and `ruff format` clean for
every Python file in the tree, with pyproject.toml's settings. Run by the suite so a change that
drifts fails here rather than in review."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _ruff() -> str:
    exe = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    assert Path(exe).exists(), "ruff missing: install the test extra"
    return exe


def test_ruff_check_clean() -> None:
    result = subprocess.run(
        [_ruff(), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_clean() -> None:
    # Python files only: ruff's newer versions would also reformat the README's code blocks.
    result = subprocess.run(
        [_ruff(), "format", "--check", "--no-cache", "--exclude", "*.md", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
