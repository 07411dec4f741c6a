"""Flags and config file: nsqd's flag set and defaults (against the real `nsqd --help`), TOML
keys, precedence flags > file > defaults, Go's flag syntax, the example config, logging. Bad
values: test_config_refused.py; the command itself (--version, PYTHONPATH): test_console.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

from nsqd.cli import resolve
from nsqd.config.flags import EXTENSION_FLAGS, FLAGS
from nsqd.config.options import Options

from .conftest import (
    HOST,
    OURS,
    REPO_ROOT,
    Launcher,
    free_port,
    http_get,
    reference_bin,
)

EXAMPLE = REPO_ROOT / "config" / "nsqd.toml"
RUN_TIMEOUT = 20


def run(argv: list[str], timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="1000")
    return subprocess.run(
        argv,
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def help_table(text: str) -> dict[str, str]:
    """flag name -> the default its help shows ("" when none)."""
    table = {}
    for block in re.split(r"\n(?=  -\S)", text):
        m = re.match(r"\s*-(-?)([a-z0-9-]+)", block)
        if not m or not block.startswith("  -"):
            continue
        defaults = re.findall(r"\(default ([^)]*)\)", block)
        table[m.group(2)] = defaults[-1] if defaults else ""
    return table


# -- --help and --version -----------------------------------------------------------------------


def test_help_lists_every_reference_flag_with_its_default() -> None:
    ref = run([str(reference_bin("nsqd")), "--help"])
    ours = run([*OURS, "--help"])
    assert ours.returncode == 0, ours.stderr
    ref_table = help_table(ref.stdout + ref.stderr)
    our_table = help_table(ours.stdout)
    our_table.pop("h", None)
    # ours adds its own flags (all off by default) in a group of their own
    extensions = {name: our_table.pop(name) for name in EXTENSION_FLAGS}
    # off by default: empty or false, but for limits that only apply once a feature is on
    # (and --workers, whose off is one worker, and its --worker-timeout)
    limits = {"resp-max-bulk": "536870912", "workers": '"1"', "worker-timeout": "1m0s"}
    assert extensions and all(
        v in ("", "false") or limits.get(name) == v for name, v in extensions.items()
    ), extensions
    assert "\ntrio-nsqd extensions (not in nsqd):\n" in ours.stdout
    assert len(ref_table) > 50
    assert set(our_table) == set(ref_table)
    assert our_table == ref_table
    # grouped by topic, as nsqd's options are
    for group in ("basic:", "disk queue:", "statsd:", "TLS:", "end to end latency:"):
        assert f"\n{group}\n" in ours.stdout


def test_flag_table_matches_options() -> None:
    assert {f.cfg_key for f in FLAGS} >= {
        "id",
        "nsqlookupd_tcp_addresses",
        "auth_http_addresses",
        "e2e_processing_latency_percentiles",
    }


# -- precedence ------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "nsqd.toml"
    path.write_text(text)
    return path


def test_config_file_keys_and_precedence(tmp_path: Path) -> None:
    cfg = write(
        tmp_path,
        """
id = 77
msg_timeout = "30s"
max_msg_timeout = 120000             # integer milliseconds
mem_queue_size = 5
max_msg_size = "2048"                # strings are coerced, as go-options does
nsqlookupd_tcp_addresses = ["127.0.0.1:4160", "127.0.0.1:5160"]
auth_http_addresses = "a:1,b:2"      # a string list may be comma separated
e2e_processing_latency_percentiles = [0.5, 1.0, 0.99]
tls_required = "tcp-https"
tls_cert = "/x/cert.pem"
tls_key = "/x/key.pem"
tls_min_version = "TLS1.2"
log_level = "WARN"
snappy = false
statsd_prefix = "p.%s"
unknown_key = "ignored"
""",
    )
    o = resolve([f"--config={cfg}"])
    assert o.node_id == 77
    assert o.msg_timeout == 30.0
    assert o.max_msg_timeout == 120.0
    assert o.mem_queue_size == 5
    assert o.max_msg_size == 2048
    assert o.lookupd_tcp_address == ["127.0.0.1:4160", "127.0.0.1:5160"]
    assert o.auth_http_address == ["a:1", "b:2"]
    assert o.e2e_processing_latency_percentile == [0.5, 1.0, 0.99]  # nsqd keeps a file's order
    assert o.tls_required == "tcp-https"
    assert o.tls_min_version == "tls1.2"
    assert o.log_level == "warn"
    assert o.snappy is False
    assert o.statsd_prefix == "p.%s"
    assert o.deflate is True  # not in the file: the default

    o = resolve(
        [
            f"--config={cfg}",
            "--msg-timeout=5s",
            "-node-id",
            "3",
            "--lookupd-tcp-address=127.0.0.1:1",
            "--lookupd-tcp-address=127.0.0.1:2",
            "--snappy",
            "--tls-required=false",
            "--log-level=debug",
            "--e2e-processing-latency-percentile=0.9,0.95",
        ]
    )
    assert o.msg_timeout == 5.0
    assert o.node_id == 3
    assert o.lookupd_tcp_address == ["127.0.0.1:1", "127.0.0.1:2"]
    assert o.snappy is True
    assert o.tls_required == "false"
    assert o.log_level == "debug"
    assert o.e2e_processing_latency_percentile == [0.95, 0.9]
    assert o.mem_queue_size == 5  # still from the file
    assert o.max_msg_timeout == 120.0


def test_tls_required_bool_in_file_and_client_auth_policy(tmp_path: Path) -> None:
    cfg = write(tmp_path, 'tls_required = true\ntls_cert = "c"\ntls_key = "k"\n')
    assert resolve([f"--config={cfg}"]).tls_required == "true"
    cfg = write(tmp_path, 'tls_client_auth_policy = "require"\ntls_cert = "c"\ntls_key = "k"\n')
    assert resolve([f"--config={cfg}"]).tls_required == "true"  # the policy forces TLS


def test_defaults_without_config() -> None:
    o = resolve([])
    d = Options()
    d.finalize()
    assert o.values == d.values
    assert o.msg_timeout == 60.0 and o.max_req_timeout == 3600.0
    assert o.tcp_address == "0.0.0.0:4150" and o.http_address == "0.0.0.0:4151"
    assert 0 <= o.node_id < 1024


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_precedence_seen_by_the_running_daemon(
    launcher: Launcher, tmp_path: Path, kind: str
) -> None:
    cfg = write(
        tmp_path,
        'msg_timeout = "30s"\nmax_rdy_count = 77\nmem_queue_size = 123\n'
        "max_msg_size = 4096\nid = 12\n",
    )
    nsqd = launcher.nsqd(kind, f"--config={cfg}", "--max-rdy-count=55", "--msg-timeout=45s")
    base = f"http://{nsqd.addr('http')}/config"
    got = {}
    for key in ("msg_timeout", "max_rdy_count", "mem_queue_size", "max_msg_size", "id"):
        status, body = http_get(f"{base}/{key}")
        assert status == 200, (key, status, body)
        got[key] = json.loads(body)
    assert got == {
        "msg_timeout": 45_000_000_000,
        "max_rdy_count": 55,
        "mem_queue_size": 123,
        "max_msg_size": 4096,
        "id": 12,
    }


# the list options as GET /config answers them (bodies), checked against the Go nsqd too: a
# file's list that coerces to nothing is Go's nil slice (null), the default an empty slice ([])
LIST_KEYS = (
    "nsqlookupd_tcp_addresses",
    "auth_http_addresses",
    "e2e_processing_latency_percentiles",
)
LIST_CASES = [
    ("", [], ["[]", "[]", "[]"]),
    (
        "nsqlookupd_tcp_addresses = []\nauth_http_addresses = []\n"
        "e2e_processing_latency_percentiles = []\n",
        [],
        ["null", "null", "null"],
    ),
    (
        "nsqlookupd_tcp_addresses = []\nauth_http_addresses = []\n",
        ["--lookupd-tcp-address=127.0.0.1:3"],
        ['["127.0.0.1:3"]', "null", "[]"],
    ),
    ('auth_http_addresses = ["127.0.0.1:2"]\n', [], ["[]", '["127.0.0.1:2"]', "[]"]),
    # go-options' coerce of a scalar that is not a string for a list: nothing (nil)
    (
        "nsqlookupd_tcp_addresses = 5\ne2e_processing_latency_percentiles = 0.5\n",
        [],
        ["null", "[]", "null"],
    ),
]


@pytest.mark.parametrize("kind", ["ours", "reference"])
@pytest.mark.parametrize(("text", "args", "bodies"), LIST_CASES, ids=[c[0] for c in LIST_CASES])
def test_list_options_in_config(
    launcher: Launcher, tmp_path: Path, kind: str, text: str, args: list[str], bodies: list[str]
) -> None:
    extra = [f"--config={write(tmp_path, text)}"] if text else []
    nsqd = launcher.nsqd(kind, *extra, *args)
    got = [http_get(f"http://{nsqd.addr('http')}/config/{key}")[1].strip() for key in LIST_KEYS]
    assert got == [b.encode() for b in bodies]


# -- Go's flag syntax ----------------------------------------------------------------------------

# command lines the Go nsqd v1.3.0 reads, and the /config values it then answers (checked
# against it below): integers in strconv.ParseInt's base 0, words after the flags ignored
GO_FLAG_SYNTAX = [
    (["--mem-queue-size=010"], "mem_queue_size", 8),  # a leading 0 is octal
    (["--mem-queue-size=1_000"], "mem_queue_size", 1000),
    (["--mem-queue-size=0x_1f"], "mem_queue_size", 31),
    (["--mem-queue-size=-0b11", "--mem-queue-size=0o17"], "mem_queue_size", 15),
    (["--mem-queue-size=5", "stray", "--mem-queue-size=7"], "mem_queue_size", 5),
    (["--mem-queue-size=5", "--", "--mem-queue-size=7"], "mem_queue_size", 5),
    (["-", "--mem-queue-size=7"], "mem_queue_size", 10000),
    (["--deflate", "false", "--max-rdy-count=7"], "deflate", True),  # "false": a stray word
    (["--snappy=false", "-max-rdy-count", "7"], "max_rdy_count", 7),
    (["--tls-min-version="], "tls_min_version", "tls1.0"),  # Set("") keeps the default
    (
        ["--e2e-processing-latency-percentile=0x1p-1,1e-1"],
        "e2e_processing_latency_percentiles",
        [0.5, 0.1],
    ),
]


@pytest.mark.parametrize(
    ("args", "key", "value"), GO_FLAG_SYNTAX, ids=[" ".join(a) for a, _, _ in GO_FLAG_SYNTAX]
)
def test_go_flag_syntax(args: list[str], key: str, value: object) -> None:
    flag = next(f for f in FLAGS if f.cfg_key == key)
    assert resolve(args).values[flag.attr] == value


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_go_flag_syntax_seen_by_the_running_daemon(launcher: Launcher, kind: str) -> None:
    nsqd = launcher.nsqd(
        kind, "-max-rdy-count", "0x10", "--mem-queue-size=0_10", "--deflate", "false", "-snappy=0"
    )
    got = {}
    for key in ("max_rdy_count", "mem_queue_size", "deflate", "snappy"):
        status, body = http_get(f"http://{nsqd.addr('http')}/config/{key}")
        got[key] = (status, json.loads(body))
    assert got == {
        "max_rdy_count": (200, 16),
        "mem_queue_size": (200, 8),
        "deflate": (200, True),
        "snappy": (200, True),  # after the stray "false" Go reads no more flags
    }


# -- the example config file -------------------------------------------------------------------


def test_example_config_documents_every_key_with_our_defaults() -> None:
    text = EXAMPLE.read_text()
    config = tomllib.loads(text)
    for flag in FLAGS:
        if flag.name in ("config", "version", "worker-id", "verbose"):  # flags only in nsqd
            continue
        assert re.search(rf"^#? ?{flag.cfg_key} = ", text, re.M), flag.cfg_key
    loaded = resolve([f"--config={EXAMPLE}"])
    defaults = Options()
    defaults.finalize()
    for key in config:
        flag = next(f for f in FLAGS if f.cfg_key == key)
        assert loaded.values[flag.attr] == defaults.values[flag.attr], key


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_example_config_starts(launcher: Launcher, kind: str) -> None:
    nsqd = launcher.nsqd(kind, f"--config={EXAMPLE}")
    status, body = http_get(f"http://{nsqd.addr('http')}/ping")
    assert (status, body) == (200, b"OK")


# -- logging ---------------------------------------------------------------------------------

LINE = re.compile(r"^(?P<prefix>.*?)\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} (?P<level>[A-Z]+): ")


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_log_level_and_prefix(launcher: Launcher, kind: str) -> None:
    dead = f"{HOST}:{free_port()}"  # nothing listens: nsqd logs its lookupd errors
    nsqd = launcher.nsqd(kind, "--log-level=warn", "--log-prefix=[custom] ")
    other = launcher.nsqd(kind, f"--lookupd-tcp-address={dead}", "--log-level=WARN")
    launcher.procs.remove(nsqd)
    launcher.procs.remove(other)
    assert nsqd.stop() == 0
    time.sleep(1.5)  # a connection attempt to the dead lookupd fails and is logged
    assert other.stop() == 0
    for proc, prefix in ((nsqd, "[custom] "), (other, "[nsqd] ")):
        lines = [line for line in proc.log().splitlines() if line.strip()]
        levels = []
        for line in lines:
            m = LINE.match(line)
            if m:
                assert m["prefix"] == prefix, line
                levels.append(m["level"])
        assert "INFO" not in levels and "DEBUG" not in levels, lines
    assert "ERROR" in [LINE.match(x)["level"] for x in other.log().splitlines() if LINE.match(x)]
