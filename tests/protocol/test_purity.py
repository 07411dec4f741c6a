"""protocol/ is sans-IO: no event loop, sockets, clocks or logging."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PROTOCOL = Path(__file__).resolve().parents[2] / "protocol"
SOURCES = sorted(PROTOCOL.glob("**/*.py"))
FORBIDDEN = {"trio", "socket", "time", "logging", "asyncio", "selectors", "ssl", "threading"}


def test_sources_found() -> None:
    assert {p.name for p in SOURCES} >= {
        "connection.py",
        "identify.py",
        "errors.py",
        "frames.py",
        "message.py",
        "names.py",
        "gostr.py",
        "state.py",
        "commands.py",
        "limits.py",
    }


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_io_imports(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    imported = set()
    for node in ast.walk(tree):  # nested imports count too
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN, f"{path.name} imports {sorted(imported & FORBIDDEN)}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_io_import_text(path: Path) -> None:
    # the plain grep, which also catches __import__("...") and importlib spellings
    pattern = re.compile(
        r"""(import\s+|from\s+|import_module\(\s*|__import__\(\s*)["']?"""
        r"(trio|socket|time|logging)\b"
    )
    assert not pattern.search(path.read_text())


def test_importing_protocol_pulls_in_no_io() -> None:
    code = (
        "import sys; before = set(sys.modules); import protocol.v2, protocol.lookup; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        f"bad = sorted(new & set({sorted(FORBIDDEN)!r})); print(bad); sys.exit(1 if bad else 0)"
    )
    root = str(PROTOCOL.parent)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
