"""The interpreter's work per PUB round trip stays cut: the Python functions the daemon's loop
task calls per PUB in steady state (bench/calls_per_pub.py: a real daemon, a raw socket, a
profile hook on for the measured PUBs only), in memory and on disk, under a ceiling a few
calls above what the tree makes. Before the cuts (4adf3d8) it made 52.6 and 65.0."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "calls_per_pub.py"
# the tree's count (38.0 in memory, 49.3 on disk) and a margin for trio's turns, which come
# by the clock (about one call a PUB under load)
CEILINGS = {"memory": 42.0, "disk": 54.0}


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calls_per_pub", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("config", sorted(CEILINGS))
def test_python_calls_per_pub_stay_under_the_ceiling(config: str) -> None:
    count = 300
    inside, _ = _script().measure(config, -1, count)
    python = sum(n for label, n in inside.items() if not label.startswith("<c> ")) / count
    top = sorted(inside.items(), key=lambda kv: -kv[1])[:40]
    assert 0 < python <= CEILINGS[config], (python, top)
