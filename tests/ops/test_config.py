"""Flags and config file: nsqd's flag set and defaults (against the real `nsqd --help`), TOML
keys, precedence flags > file > defaults, bad values refused with a message and exit 1."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from nsqd.cli import resolve
from nsqd.config.flags import EXTENSION_FLAGS, FLAGS
from nsqd.config.options import OptionError, Options

from .conftest import (
    HOST,
    OURS,
    REPO_ROOT,
    Launcher,
    free_port,
    free_ports,
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


# what tools parse out of `nsqd --version` (gnsq's pattern, from Go's form)
GO_VERSION_LINE = re.compile(r"^[a-z]+ v[0-9.]+(?:-[a-z]+)? \(built w/[a-z0-9.-]+\)$")


def test_version_in_gos_form() -> None:
    ref = run([str(reference_bin("nsqd")), "--version"])
    assert GO_VERSION_LINE.match(ref.stdout.strip()), ref.stdout  # the pattern is Go's form
    out = run([*OURS, "--version"])
    assert out.returncode == 0
    assert out.stdout == f"nsqd v1.3.0 (built w/python{platform.python_version()})\n"
    assert GO_VERSION_LINE.match(out.stdout.strip())


def console_script(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    assert found, f"the {name} command is not installed (pip install -e . installs it)"
    return found


def test_console_command_runs_with_its_own_checkout_on_pythonpath(tmp_path: Path) -> None:
    """PYTHONPATH naming the folder our packages are in (the checkout, for the editable
    install scripts/test.sh makes): site then skips the install's own .pth entry for it, and
    the command took the folder out as a shadow: `No module named 'nsqd'` (found when a
    test process's Spark session had put the checkout on PYTHONPATH)."""
    import nsqd_launcher

    ours = os.path.dirname(os.path.abspath(nsqd_launcher.__file__))
    env = dict(os.environ, PYTHONPATH=ours)
    for argv in ([console_script("nsqd"), "--version"], [console_script("nsqd-certs"), "--help"]):
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_console_command_ignores_a_shadowing_pythonpath(tmp_path: Path) -> None:
    # gnsq's test setup: a folder holding its own nsqd.py on PYTHONPATH
    shadow = tmp_path / "pp"
    shadow.mkdir()
    (shadow / "nsqd.py").write_text("raise SystemExit('the shadow nsqd.py ran')\n")
    env = dict(os.environ, PYTHONPATH=str(shadow))
    for argv in ([console_script("nsqd"), "--version"], [console_script("nsqd-certs"), "--help"]):
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
    port, http = free_ports(2)
    proc = subprocess.Popen(
        [
            console_script("nsqd"),
            f"--tcp-address={HOST}:{port}",
            f"--http-address={HOST}:{http}",
            f"--data-path={tmp_path}",
        ],
        cwd=shadow,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15
        answer = None
        while time.monotonic() < deadline and proc.poll() is None and answer is None:
            try:
                answer = http_get(f"http://{HOST}:{http}/ping")
            except OSError:
                time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert answer is not None
    finally:
        proc.terminate()
        proc.wait(10)


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


# -- bad values ------------------------------------------------------------------------------

BAD_FLAGS = [
    (["--msg-timeout=soon"], 'invalid value "soon" for flag -msg-timeout'),
    (["--msg-timeout=60"], "missing unit"),
    (["--mem-queue-size=lots"], 'invalid value "lots" for flag -mem-queue-size'),
    (["--deflate=maybe"], 'invalid value "maybe" for flag -deflate'),
    (["--tls-required=sometimes"], 'invalid value "sometimes" for flag -tls-required'),
    (["--node-id=1024"], "--node-id must be [0,1024)"),
    (["--node-id=-1"], "--node-id must be [0,1024)"),
    (["--e2e-processing-latency-percentile=1.5"], "invalid E2E processing latency percentile: 1.5"),
    (["--e2e-processing-latency-percentile=0"], "invalid E2E processing latency percentile: 0"),
    (["--max-deflate-level=10"], "--max-deflate-level must be [1,9]"),
    (["--max-deflate-level=0"], "--max-deflate-level must be [1,9]"),
    (["--log-level=loud"], "invalid log level 'loud'"),
    (["--tls-min-version=ssl3.0"], 'unknown tlsVersionOption "ssl3.0"'),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["--tls-required"], "cannot require TLS client connections without TLS key and cert"),
    (["--config=/nonexistent/nsqd.toml"], "failed to load config file /nonexistent/nsqd.toml"),
    (["--mem-queue-size=9223372036854775808"], "value out of range"),
    (["--mem-queue-size=08"], 'invalid value "08" for flag -mem-queue-size'),
    (["--mem-queue-size= 5"], 'invalid value " 5" for flag -mem-queue-size'),
    (["--msg-timeout= 5s"], 'invalid value " 5s" for flag -msg-timeout'),
    (["--msg-timeout=9223372037s"], 'invalid value "9223372037s" for flag -msg-timeout'),
    (["--msg-timeout=2562048h"], 'invalid value "2562048h" for flag -msg-timeout'),
    (["--mem-queue-size"], "--mem-queue-size: expected one argument"),
    # nsqd v1.3.0 starts with -1 and then panics (mem-queue-size: makechan on the first topic)
    # or refuses every RDY, PUB, IDENTIFY/MPUB: a clear refusal at start instead
    (["--mem-queue-size=-1"], "--mem-queue-size must be >= 0"),
    (["--max-rdy-count=-1"], "--max-rdy-count must be >= 0"),
    (["--max-msg-size=-1"], "--max-msg-size must be >= 0"),
    (["--max-body-size=-1"], "--max-body-size must be >= 0"),
    # each comma-separated piece is strconv.ParseFloat's: nsqd's "Could not parse: ..."
    (["--e2e-processing-latency-percentile=0.5,"], 'invalid float ""'),
    (["--e2e-processing-latency-percentile= 0.5"], 'invalid float " 0.5"'),
    (["--e2e-processing-latency-percentile=.5__0"], 'invalid float ".5__0"'),
]

BAD_FILES = [
    ('msg_timeout = "soon"', 'invalid value "soon" for msg_timeout'),
    ('sync_timeout = "1500"', "missing unit"),
    ("msg_timeout = 1.5", "msg_timeout"),
    ('mem_queue_size = "lots"', 'invalid value "lots" for mem_queue_size'),
    ('mem_queue_size = "0x10"', "mem_queue_size"),
    ("mem_queue_size = 1.5", "mem_queue_size"),
    ('deflate = "maybe"', 'invalid value "maybe" for deflate'),
    ('tls_required = "sometimes"', "tls_required"),
    ("id = 1024", "--node-id must be [0,1024)"),
    ("e2e_processing_latency_percentiles = [1.0, 2.0]", "percentile: 2"),
    ("max_deflate_level = 12", "--max-deflate-level must be [1,9]"),
    ('log_level = "loud"', "log_level"),
    ('tls_min_version = "tls9"', "tls_min_version"),
    ("x = = 1", "failed to load config file"),
    ("mem_queue_size = 99999999999999999999", "is out of range for int64"),
    ('e2e_processing_latency_percentiles = "0.5,"', 'invalid float ""'),
    ("[unclosed", "failed to load config file"),
    # go-options panics on an array item that is not a float64 (nsqd exits 2)
    ('e2e_processing_latency_percentiles = [""]', "want an array of floats"),
    ("e2e_processing_latency_percentiles = [1]", "want an array of floats"),
]


# nsqd v1.3.0 starts with these and cannot work (docs/operations.md): ours refuses them at start
NEGATIVE_FILES = [
    ("mem_queue_size = -1", "--mem-queue-size must be >= 0"),
    ("max_rdy_count = -1", "--max-rdy-count must be >= 0"),
    ("max_msg_size = -1", "--max-msg-size must be >= 0"),
    ("max_body_size = -1", "--max-body-size must be >= 0"),
]


def _assert_refused(out: subprocess.CompletedProcess[str], message: str) -> None:
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr + out.stdout


@pytest.mark.parametrize(("args", "message"), BAD_FLAGS, ids=[a[0] for a, _ in BAD_FLAGS])
def test_bad_flag_refused(args: list[str], message: str) -> None:
    _assert_refused(run([*OURS, *args]), message)


@pytest.mark.parametrize(("text", "message"), BAD_FILES, ids=[t for t, _ in BAD_FILES])
def test_bad_config_value_refused(tmp_path: Path, text: str, message: str) -> None:
    cfg = write(tmp_path, text + "\n")
    out = run([*OURS, f"--config={cfg}"])
    _assert_refused(out, message)
    assert str(cfg) in out.stderr or "must be" in out.stderr or "percentile" in out.stderr


@pytest.mark.parametrize(("text", "message"), NEGATIVE_FILES, ids=[t for t, _ in NEGATIVE_FILES])
def test_negative_size_in_file_refused(tmp_path: Path, text: str, message: str) -> None:
    _assert_refused(run([*OURS, f"--config={write(tmp_path, text + chr(10))}"]), message)


def test_reference_refuses_the_same_config_values(tmp_path: Path) -> None:
    """The real nsqd exits non-zero on every one of BAD_FILES too (it is fast to check)."""
    for text, _ in BAD_FILES:
        cfg = write(tmp_path, text + "\n")
        out = run(
            [
                str(reference_bin("nsqd")),
                f"--config={cfg}",
                f"--data-path={tmp_path}",
                *(
                    f"--{kind}-address={HOST}:{port}"
                    for kind, port in zip(("tcp", "http", "https"), free_ports(3), strict=True)
                ),
            ],
            timeout=10,
        )
        assert out.returncode != 0, text


def test_unreadable_config_refused(tmp_path: Path) -> None:
    out = run([*OURS, f"--config={tmp_path}"])  # a directory
    _assert_refused(out, f"failed to load config file {tmp_path}")
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    _assert_refused(run([*OURS, f"--config={binary}"]), "failed to load config file")


def test_in_process_errors_are_option_errors(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="unrecognized"):
        resolve(["--bogus"])
    cfg = write(tmp_path, "nsqlookupd_tcp_addresses = [1, 2]\n")
    with pytest.raises(OptionError, match="nsqlookupd_tcp_addresses"):
        resolve([f"--config={cfg}"])


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
