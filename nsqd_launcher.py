"""The `nsqd` and `nsqd-certs` console commands: our package whatever PYTHONPATH holds.

The Go binary ignores the environment's Python path; a console script does not. Test suites
(gnsq's, for one) put a folder holding their own `nsqd.py` on PYTHONPATH, which would shadow
our package. So the PYTHONPATH entries leave sys.path before `nsqd` is imported (a console
script's sys.path has no current directory to worry about). Kept outside the package, with a
name no one else uses, so that this module itself cannot be shadowed the same way."""

from __future__ import annotations

import os
import sys


def _own_path() -> None:
    extra = os.environ.get("PYTHONPATH", "")
    shadows = {os.path.abspath(p) for p in extra.split(os.pathsep) if p}
    if shadows:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) not in shadows]
    # Our packages are where this module is. An editable install puts the checkout on
    # sys.path with a .pth file, which site skips when PYTHONPATH already named the folder
    # (a developer's PYTHONPATH=. in the checkout): taken out above, it goes back here.
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in {os.path.abspath(p or os.curdir) for p in sys.path}:
        sys.path.append(here)
    for name in [n for n in sys.modules if n == "nsqd" or n.startswith("nsqd.")]:
        del sys.modules[name]


def nsqd() -> int:
    _own_path()
    from nsqd.lazy import defer

    defer()  # before trio is imported: OpenSSL loads only if TLS or AUTH is used
    from nsqd.cli import main

    return main()


def nsqd_certs() -> int | None:
    _own_path()
    from nsqd.certs import main

    return main()
