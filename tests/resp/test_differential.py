"""The differential suite (conformance/resp): every script against the real redis-server 7
and ours, raw RESP replies compared byte for byte, error texts included."""

from __future__ import annotations

import pytest

from conformance.resp import script
from conformance.resp.servers import Pair

SCRIPTS = script.load_all()


def test_scripts_found() -> None:
    assert len(SCRIPTS) >= 10
    assert sum(len(s.steps) for s in SCRIPTS) > 400


@pytest.mark.parametrize("sc", SCRIPTS, ids=lambda s: s.name)
def test_script_reference(pair: Pair, sc: script.Script) -> None:
    redis, ours = pair.by_kind[sc.server]
    want = script.run(sc, redis.port)
    got = script.run(sc, ours.port)
    # the script says something: most steps that read got a real reply from Redis
    answered = [r for _, _, r in want.events if r and not r.startswith(b"<")]
    assert len(answered) >= len(sc.steps) // 2, want.events
    problems = script.diff(want, got)
    assert not problems, "\n".join(problems)
