"""What a start imports, seen through a real run: `python -X importtime -m nsqd` answers its
first /ping, stops, and its import log must not name the modules of features that are off
(they cost start time and idle memory); with those features on, it must name them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nsqd_process

from .conftest import (
    HOST,
    START_TIMEOUT,
    free_port,
    free_ports,
    http_get,
    http_post,
    spawn,
    wait_until,
)

# Loaded only by the flags, the requests or the client features that use them.
FLAG_ONLY = {
    "argparse": "--help or an unusual command line",
    "tomllib": "--config",
    "ssl": "TLS, AUTH",
    "hmac": "trio's DTLS, RESP AUTH",
    "hashlib": "TLS, AUTH",
    "idna": "a non-ASCII host name",
    "traceback": "formatting an error",
    "tokenize": "reading Python source (inspect, linecache)",
    "locale": "a text-mode subprocess",
    "json": "IDENTIFY, JSON answers, nsqd.dat changes",
    "cramjam": "a snappy client",
    "httpx": "--auth-http-address",
    "nsqd.auth.authd": "--auth-http-address",
    "nsqd.resp.server": "--resp-address",
    "nsqd.storage.journal": "--durable-inflight",
    "nsqd.storage.dedupe": "--dedupe-window",
    "nsqd.engine.dedupe": "--dedupe-window",
    "nsqd.metrics.statsd": "--statsd-address",
    "nsqd.group": "--workers above 1",
}
# ...and the ones these flags must bring in (so the check above cannot pass by reading nothing)
WITH_FLAGS = {
    "--durable-inflight": "nsqd.storage.journal",  # by the channel the test makes
    "--dedupe-window=1m": "nsqd.storage.dedupe",
    "--config={config}": "tomllib",
    "--statsd-address=127.0.0.1:{udp}": "nsqd.metrics.statsd",
}

_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|( *)(\S+)\s*$")


def imported_until_ping(tmp_path: Path, *flags: str, channel: bool = False) -> set[str]:
    """Every module a daemon started with `flags` imported by its first answered /ping (and
    by the creation of a channel after it, with `channel`)."""
    tcp, http = free_ports(2)
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    argv = [sys.executable, "-X", "importtime", "-m", "nsqd"]
    argv += [*nsqd_process.address_flags(tcp, http, data), *flags]
    proc = spawn("nsqd", argv, tmp_path, {"tcp": tcp, "http": http})
    try:
        ping = f"http://{HOST}:{http}/ping"
        wait_until(lambda: http_get(ping)[0] == 200, START_TIMEOUT, "/ping")
        for path in ("topic/create?topic=t", "channel/create?topic=t&channel=c")[: 2 * channel]:
            made = http_post(f"http://{HOST}:{http}/{path}")
            assert made[0] == 200, made
    finally:
        assert proc.stop() == 0, proc.log_tail()
    modules = set()
    for line in proc.log_path.read_text().splitlines():
        m = _LINE.match(line)
        if m:
            modules.add(m.group(2))
    assert "trio" in modules and "nsqd.daemon" in modules, "the import log was read"
    return modules


def test_default_start_imports_no_flag_only_module(tmp_path: Path) -> None:
    modules = imported_until_ping(tmp_path)
    loaded = {name: why for name, why in FLAG_ONLY.items() if name in modules}
    assert not loaded, f"imported by a default start (only needed for): {loaded}"
    assert not [m for m in modules if m.startswith(("nsqd.resp", "nsqd.auth"))]


def test_flags_import_their_modules(tmp_path: Path) -> None:
    config = tmp_path / "nsqd.toml"
    config.write_text("mem_queue_size = 100\n")
    flags = [flag.format(config=config, udp=free_port()) for flag in WITH_FLAGS]
    modules = imported_until_ping(tmp_path, *flags, channel=True)
    missing = [name for name in WITH_FLAGS.values() if name not in modules]
    assert not missing, missing
