"""nsqd/lazy.py's stand-ins: after the daemon's imports each deferred module is still a stand-in
(nothing read from it), and once used it is the real module, through references taken before
as well as after (run in a fresh interpreter, as the entry points do)."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO_ROOT

SCRIPT = """
import sys
from nsqd import lazy

lazy.defer()
import nsqd.cli, nsqd.daemon  # what `python -m nsqd` imports before it runs

deferrable = [n for n in lazy.DEFERRED if n not in sys.builtin_module_names]
early = {name: sys.modules[name] for name in deferrable}
still = [n for n, m in early.items() if isinstance(m, lazy._Deferred) and "__file__" not in vars(m)]
assert still == deferrable, still

import array, base64, hashlib, hmac, idna, json, locale, ssl, token, tokenize, traceback
for name in lazy.DEFERRED:  # a built-in module (array, in Debian's Python) is the real one
    early.setdefault(name, sys.modules[name])

assert early["hashlib"].sha256(b"nsq").hexdigest() == hashlib.sha256(b"nsq").hexdigest()
assert early["hmac"].compare_digest(b"a", b"a")
assert early["idna"].encode("bücher.example") == b"xn--bcher-kva.example"
assert early["ssl"].PROTOCOL_TLS_CLIENT == ssl.PROTOCOL_TLS_CLIENT
assert early["json"].loads('{"a": [1]}') == {"a": [1]}
assert early["base64"].b64encode(b"nsq") == base64.b64encode(b"nsq") == b"bnNx"
assert early["array"].array("i", [1, 2]).tolist() == [1, 2]
assert early["token"].NAME == token.NAME
assert early["locale"].getpreferredencoding(False) == locale.getpreferredencoding(False)
import io
toks = list(early["tokenize"].generate_tokens(io.StringIO("x = 1\\n").readline))
assert toks[0].string == "x", toks
try:
    1 / 0
except ZeroDivisionError as exc:
    text = "".join(early["traceback"].format_exception(exc))
assert "ZeroDivisionError" in text, text
for name in deferrable:
    real = sys.modules[name]
    assert not isinstance(real, lazy._Deferred), name
    assert vars(early[name])["__file__"] == real.__file__, name
print("ok")
"""


def run_fresh(script: str) -> None:
    """`script` in a fresh interpreter from the checkout, as the entry points start: it
    prints ok."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_deferred_modules_stay_unloaded_then_work() -> None:
    run_fresh(SCRIPT)


def test_a_group_supervisor_imports_no_trio() -> None:
    """`nsqd --workers=N`'s own process imports no trio until its workers are started: they
    start sooner for it (~45 ms of a group's start); then it imports trio to register the
    group with nsqlookupd; a worker, or one nsqd, imports it to run."""
    script = (
        "import sys; from nsqd import cli, lazy; from nsqd.group import supervisor; "
        "assert 'trio' not in sys.modules, 'trio'; import nsqd.daemon; "
        "assert 'trio' in sys.modules; print('ok')"
    )
    run_fresh(script)
