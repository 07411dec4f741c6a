"""The daemon's layering (pyproject.toml [tool.importlinter]) holds: the engine imports no
front-end, store or daemon, front-ends do not import each other, protocol knows no daemon, and
no import cycle joins two packages. Type-only imports count."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_import_contracts_kept() -> None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    assert Path(exe).exists(), "lint-imports missing: install the test extra (import-linter)"
    result = subprocess.run(
        [exe, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout
    assert "Contracts: 5 kept" in result.stdout, result.stdout
