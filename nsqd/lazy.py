"""Deferred modules for the daemon's start: modules trio (or the standard library under it)
imports at import time but uses only inside functions are loaded on first use instead.

trio imports `ssl` (for SSLStream) and `hmac` (for DTLS cookies) at import time, and both load
OpenSSL's libcrypto and libssl: ~5 MiB of resident memory and ~10 ms of start before a
configuration without TLS or AUTH uses either. trio only touches these modules inside
functions, so a module whose body runs on first attribute access is the same module to it. A
configuration with TLS loads `ssl` when it builds its context; the AUTH client (httpx) loads
it when it is first made. The others, ~6 ms and ~0.9 MiB together: trio's `idna` (its
tables) encodes host names that are not ASCII; `traceback` formats errors; `tokenize` and
`token` are inspect's and linecache's for reading source; `locale` is subprocess's for text
mode (trio's import runs one binary-mode subprocess, ctypes' find_library); socket's `array`
passes file descriptors. `json` and `base64` are our modules' for requests and files a start
does not need (IDENTIFY, /stats?format=json, nsqd.dat changes, /messages ids).

Only the entry points (`python -m nsqd`, the `nsqd` console script) call `defer()`, before
they import trio: importing the package (tests, tools) changes nothing."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

DEFERRED = (
    "ssl",
    "hmac",
    "hashlib",
    "idna",
    "traceback",
    "tokenize",
    "locale",
    "token",
    "array",
    "json",
    "base64",
)


class _Deferred(types.ModuleType):
    """Stands in for a module until one of its attributes is read; then imports the real
    module and takes on its namespace (so references taken before stay good).

    Not importlib's LazyLoader: on Python 3.11 every `import name` reads `__spec__` from the
    module in sys.modules, which makes a LazyLoader module load at the first import statement.
    Here `__spec__` is a plain entry and only a missing attribute (`__getattr__`) loads."""

    def __getattr__(self, attr: str) -> Any:
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)
        self.__dict__.update(real.__dict__)
        return getattr(real, attr)


def defer(names: tuple[str, ...] = DEFERRED) -> None:
    """Put a stand-in in sys.modules for each name not imported yet and not built into the
    interpreter (Debian's Python has `array` built in: nothing to load, nothing to save)."""
    for name in names:
        if name in sys.modules or name in sys.builtin_module_names:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        stand_in = _Deferred(name)
        stand_in.__spec__ = spec
        sys.modules[name] = stand_in
