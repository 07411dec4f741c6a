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
    assert "Contracts: 6 kept" in result.stdout, result.stdout


def test_protocol_contract_refuses_io(tmp_path: Path) -> None:
    """The sans-IO contract sees the standard library: a copy of protocol/ with a socket and an
    os import in one module breaks it, naming both (and the copy as it is keeps it)."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["name"].startswith("protocol is sans-IO:")]
    modules = ", ".join(f'"{m}"' for m in contract["forbidden_modules"])
    (tmp_path / "pyproject.toml").write_text(
        '[tool.importlinter]\nroot_packages = ["protocol"]\n'
        f"include_external_packages = {str(config['include_external_packages']).lower()}\n"
        '[[tool.importlinter.contracts]]\nname = "sans-IO"\ntype = "forbidden"\n'
        f'source_modules = ["protocol"]\nforbidden_modules = [{modules}]\n'
    )
    shutil.copytree(REPO / "protocol", tmp_path / "protocol")
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(tmp_path)}

    def lint() -> str:
        result = subprocess.run(
            [exe, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
        )
        return result.stdout + result.stderr

    out = lint()
    assert "1 kept, 0 broken" in out, out
    names = tmp_path / "protocol" / "v2" / "names.py"
    names.write_text(names.read_text() + "\nimport os.path  # noqa\nimport socket  # noqa\n")
    out = lint()
    assert "0 kept, 1 broken" in out, out
    assert "protocol.v2.names -> socket" in out and "protocol.v2.names -> os" in out, out
