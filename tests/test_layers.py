"""The daemon's layering (pyproject.toml [tool.importlinter]) holds: the engine imports no
front-end, store or daemon, front-ends do not import each other and reach the engine only
through its door (engine.api, broker, handle; the Broker's door calls), protocol knows no
daemon, and no import cycle joins two packages. Type-only imports count."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
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
    assert "Contracts: 7 kept" in result.stdout, result.stdout


DOOR = {"nsqd.engine.api", "nsqd.engine.broker", "nsqd.engine.handle"}


def test_every_engine_module_is_the_door_or_behind_it() -> None:
    """The door contract lists the engine's modules front-ends may not import: a module added
    to the engine is either part of the door or listed there, never silently open."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    door = next(
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"].startswith("front-ends use the engine through its door")
    )
    assert set(door["source_modules"]) == {"nsqd.tcp", "nsqd.http", "nsqd.resp"}
    engine = REPO / "nsqd" / "engine"
    modules = {
        f"nsqd.engine.{p.stem if p.is_file() else p.name}"
        for p in engine.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert modules - DOOR == set(door["forbidden_modules"])
    assert modules >= DOOR


# What front-ends may call on the broker: the door's calls, by name, answering values.
BROKER_DOOR = {
    "publish", "publish_deferred", "batch_keys", "subscribe", "channel_handle",
    "existing_channel", "create_topic", "require_topic", "remove_topic", "create_channel",
    "remove_channel", "empty", "pause", "configure_topic", "configure_channel", "topic_view",
    "exists", "depth", "health", "start_time", "store_failed", "store_wrote", "next_client_id",
    "add_client", "remove_client",
}  # fmt: skip


def test_front_ends_call_only_the_broker_s_door() -> None:
    """The contract keeps front-ends to the door's modules; this keeps them to the Broker's
    door calls (no `broker.topics`, no Topic or Channel fetched and reached into)."""
    import ast

    calls: dict[str, set[str]] = {}
    for package in ("tcp", "http", "resp"):
        for path in (REPO / "nsqd" / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Attribute):
                    continue
                base = node.value
                if (isinstance(base, ast.Name) and base.id in ("broker", "Broker")) or (
                    isinstance(base, ast.Attribute) and base.attr == "broker"
                ):
                    calls.setdefault(node.attr, set()).add(str(path.relative_to(REPO)))
    outside = {name: sorted(paths) for name, paths in calls.items() if name not in BROKER_DOOR}
    assert not outside, outside
    assert {"publish", "subscribe", "existing_channel"} <= calls.keys()  # the check sees calls


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
