"""The conformance suite's 332 wire scenarios against `nsqd --workers=2`, each connection in
whichever worker the kernel gives it (the --auth-http-address scenarios included: a worker's
links AUTH at its peers with the group's secret). Every scenario's expectations hold but for
these kinds, each with its reason:

- a client FIN/REQ/TOUCHing a message another client holds answers "ID not in flight" when
  the holder is in another worker (nsqd: "client does not own message"): the message is in
  flight in the other partition, not in this one. Which scenarios meet it depends on where
  the kernel puts the two connections;
- --max-channel-consumers counts in each worker, and a peer's link pulling for its own
  consumers is one of them (for up to LINGER seconds after they left): a SUB can meet a
  worker whose slot the link holds (bounds_channel_consumer_slot_freed);
- a channel made by a SUB reaches the other workers within milliseconds, not atomically with
  the SUB's OK: a message published meanwhile in a worker that has no channel yet waits in its
  topic and goes to the first channel made there (deliver_new_channel_no_backlog, when the
  publisher and the second subscriber share a worker the first one is not in).

Those are judged on their first run (--no-retry); any other scenario that differs runs again
with the read window doubled (conformance/README.md): a loaded 2-core machine stretches a reply
or a cross-worker delivery past the 400ms window, a real difference persists."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys

from tests.ops.conftest import REPO_ROOT, nsqd_process

ALLOWED = (
    "*_other_clients_message",
    "bounds_channel_consumer_slot_freed",
    "deliver_new_channel_no_backlog",
)


def test_the_wire_scenarios_hold_against_a_group() -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "conformance", "--target", "ours", "--ours-flags=--workers=2"),
            *(f"--no-retry={glob}" for glob in ALLOWED),
        ],
        cwd=REPO_ROOT,
        env=nsqd_process.pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    summary = re.search(r"conformance: (\d+) scenarios, (\d+) identical", output)
    assert summary, output[-3000:]
    assert int(summary.group(1)) >= 332
    differing = re.findall(r"^differs\s+(\S+)", output, re.M)
    unexplained = [n for n in differing if not any(fnmatch.fnmatch(n, g) for g in ALLOWED)]
    assert not unexplained, _reports(output, unexplained)
    # the placement-dependent kinds above, when they meet
    assert int(summary.group(2)) >= int(summary.group(1)) - 9


def _reports(output: str, ids: list[str]) -> str:
    """The runner's report of each scenario in `ids` (its `differs` line and the indented
    lines under it), not the output's tail: scenarios that passed on a rerun print their
    earlier differences too, which could push the failing one out of a tail."""
    kept: list[str] = []
    keep = False
    for line in output.splitlines():
        if line[:1].strip():  # a line at column 0 starts a scenario's report (or ends one)
            words = line.split()
            keep = words[0] == "differs" and len(words) > 1 and words[1] in ids
        if keep:
            kept.append(line)
    return "\n".join(kept)[-12000:] or output[-6000:]
