"""protocol/resp/ is sans-IO: no event loop, sockets, clocks or logging; and nothing
of nsqd/resp is imported by a daemon started without --resp-address."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "protocol" / "resp"
FORBIDDEN = {"trio", "socket", "time", "logging", "asyncio", "selectors", "ssl", "threading"}


def test_protocol_imports_no_io() -> None:
    imported = set()
    for path in PROTOCOL.glob("*.py"):
        imported |= _imports(path)
    assert imported, "the walk found the imports"
    assert not imported & FORBIDDEN


def _imports(path: Path) -> set[str]:
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    return imported


def test_daemon_without_resp_address_imports_no_resp() -> None:
    code = (
        "import sys, nsqd.daemon, nsqd.cli; "
        "bad = [m for m in sys.modules if m.startswith('nsqd.resp')]; print(bad); "
        "sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
