"""Bad flag and config values: refused at start with nsqd's message and exit 1 (never a
traceback), the same values the Go nsqd refuses, and the ones it starts with and cannot
work with (negative sizes) refused too."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nsqd.cli import resolve
from nsqd.config.options import OptionError

from .conftest import HOST, OURS, free_ports, reference_bin
from .test_config import run, write

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
