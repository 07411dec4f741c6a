"""The plain command-line reader (nsqd/config/argv.py) against argparse, differentially: over
thousands of generated command lines it must give argparse's exact namespace or step aside
(None), never a different reading; and resolve() must give the same Options or the same error
through either path, config file included."""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path
from typing import Any

import pytest

from nsqd import cli
from nsqd.config.argv import read_plain
from nsqd.config.flags import FLAGS
from nsqd.config.options import OptionError
from nsqd.config.parser import build_parser

NAMES = [
    "config",
    "version",
    "log-level",
    "data-path",
    "node-id",
    "deflate",
    "snappy",
    "tls-required",
    "lookupd-tcp-address",
    "auth-http-address",
    "e2e-processing-latency-percentile",
    "msg-timeout",
    "mem-queue-size",
    "max-deflate-level",
    "broadcast-address",
    "statsd-prefix",
    "dedupe-window",
    # not flags, or not spelled in full: argparse's to read (and refuse or abbreviate)
    "bogus",
    "data-pat",
    "dedupe",
    "h",
    "help",
    "",
]
VALUES = [
    "",
    "x",
    "1",
    "0",
    "-1",
    "-1.5",
    "0x10",
    "true",
    "false",
    "1s",
    "250ms",
    "soon",
    "-",
    "--",
    "a b",
    "-a b",
    "=",
    "a=b",
    "-data-path",
    "--deflate",
    "--data-path=/tmp",
    "-h",
    "1.0,0.5",
    "0.99",
    "127.0.0.1:4160",
    "tcp-https",
    "DEBUG",
    "/tmp/some dir",
]


KNOWN = NAMES[: NAMES.index("bogus")]
PLAIN_VALUES = [v for v in VALUES if not v.startswith("-")]


def _token(rng: random.Random, plain: bool) -> list[str]:
    """One flag (or stray word) in one of the forms; `plain`: known flags and values that do
    not start with "-" only, the command lines a daemon is usually given."""
    name = rng.choice(KNOWN if plain else NAMES)
    value = rng.choice(PLAIN_VALUES if plain else VALUES)
    dashes = rng.choice(["--", "-"] if plain else ["--", "--", "-", "---"])
    form = rng.randrange(4 if plain else 5)
    if form == 0:
        return [f"{dashes}{name}={value}"]
    if form in (1, 2):
        return [f"{dashes}{name}", value]
    if form == 3:
        return [f"{dashes}{name}"]  # bare: a bool's true, or a missing value
    return [value]  # a stray word


def samples(count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    out: list[list[str]] = [[]]
    for _ in range(count):
        argv: list[str] = []
        plain = rng.random() < 0.5
        for _ in range(rng.randrange(1, 7)):
            argv += _token(rng, plain)
        out.append(argv)
    return out


PLAIN = [
    ["--data-path=/tmp/x", "--tcp-address=127.0.0.1:4150", "--http-address=127.0.0.1:4151"],
    ["-data-path", "/tmp/x", "-mem-queue-size", "100", "--deflate", "--snappy=false"],
    ["--lookupd-tcp-address=a:1", "--lookupd-tcp-address", "b:2", "-lookupd-tcp-address=c:3"],
    ["--e2e-processing-latency-percentile=1.0,0.99", "--e2e-processing-latency-percentile", "0.5"],
    ["--deflate", "--version"],
    ["--deflate", "--data-path=/tmp"],
    ["--deflate", ""],
    ["--tls-required"],
    ["--tls-required", "tcp-https"],
    ["--node-id=5", "--node-id=7"],
    ["--msg-timeout=", "--data-path="],
    ["--log-prefix=[a] b=c", "--statsd-prefix", "nsq.%s"],
    ["--broadcast-address", "host name with spaces"],
]


def argparse_reading(argv: list[str]) -> Any:
    """argparse's namespace as a dict, or what it did instead (an error, an exit)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            return vars(build_parser().parse_args(argv))
    except OptionError as exc:
        return ("error", str(exc))
    except SystemExit as exc:  # --help
        return ("exit", exc.code)


@pytest.mark.parametrize("argv", PLAIN, ids=[" ".join(a) for a in PLAIN])
def test_plain_command_lines_are_read_without_argparse(argv: list[str]) -> None:
    fast = read_plain(argv)
    assert fast is not None, "a plain command line went to argparse"
    assert fast == argparse_reading(argv)


def test_generated_command_lines_agree_with_argparse() -> None:
    read = 0
    for argv in samples(4000, seed=14):
        fast = read_plain(argv)
        if fast is None:
            continue  # argparse reads it
        read += 1
        assert fast == argparse_reading(argv), argv
    # the generator must exercise the reader, not only the fallback
    assert read > 1000, read


def test_unusual_command_lines_go_to_argparse() -> None:
    for argv in (
        ["--help"],
        ["-h"],
        ["--data-path"],
        ["--data-path", "-x"],
        ["--node-id", "-5"],
        ["--deflate", "-"],
        ["--deflate", "-1"],
        ["--data-pat=x"],
        ["-data=x"],
        ["stray"],
        ["--", "--data-path=x"],
        ["---data-path=x"],
        ["--data-path=--"],
    ):
        assert read_plain(argv) is None, argv


CONFIGS = [
    "",
    'data_path = "/tmp/from-file"\nmem_queue_size = 7\n',
    'nsqlookupd_tcp_addresses = ["f:1", "f:2"]\ndeflate = false\n',
    'e2e_processing_latency_percentiles = [0.5]\nmsg_timeout = "5s"\nid = 12\n',
    "msg_timeout = 1500\nsnappy = 0\n",
    'tls_required = true\nlog_level = "debug"\n',
    'mem_queue_size = "lots"\n',
    "[unclosed",
]


def _resolved(argv: list[str]) -> Any:
    try:
        return cli.resolve(argv).values
    except OptionError as exc:
        return ("error", str(exc))


def test_resolve_is_the_same_through_either_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Options (or the error) from defaults < config file < flags, with the plain reader and
    with argparse alone, for generated command lines with and without a config file."""
    files = []
    for i, text in enumerate(CONFIGS):
        path = tmp_path / f"c{i}.toml"
        path.write_text(text)
        files.append(str(path))
    rng = random.Random(6)
    compared = 0
    plain = [[*argv, f"--config={path}"] for argv in PLAIN for path in files]
    for argv in [*plain, *samples(1500, seed=26)]:
        argv = [*argv, f"--config={rng.choice(files)}"] if rng.random() < 0.7 else argv
        if "help" in " ".join(argv) or read_plain(argv) is None:
            continue
        fast = _resolved(argv)
        with monkeypatch.context() as m:
            m.setattr(cli, "read_plain", lambda argv: None)
            slow = _resolved(argv)
        assert fast == slow, argv
        compared += 1
    assert compared > 300, compared


def test_every_flag_is_read() -> None:
    """Each flag of the table in both dash forms and both value forms."""
    for flag in FLAGS:
        for argv in (
            [f"--{flag.name}=v"],
            [f"-{flag.name}", "v"],
            [f"--{flag.name}", "v", f"-{flag.name}=w"],
        ):
            fast = read_plain(argv)
            assert fast is not None and fast == argparse_reading(argv), argv
