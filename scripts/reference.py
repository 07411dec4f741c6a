"""Locate (and if needed install) the real NSQ v1.3.0 tools used as the reference.

Stdlib only, so tests and the benchmark can import it before anything else is installed::

    import sys; sys.path.insert(0, str(REPO_ROOT / "scripts"))
    from reference import ensure_reference
    nsqd = ensure_reference() / "nsqd"
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BIN_DIR = REPO_ROOT / ".reference" / "bin"
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install_reference.sh"
TOOLS = (
    "nsqd",
    "nsqlookupd",
    "nsqadmin",
    "nsq_tail",
    "nsq_stat",
    "to_nsq",
    "bench_writer",
    "bench_reader",
)
INSTALL_TIMEOUT_S = 1800.0


class ReferenceInstallError(RuntimeError):
    """The reference tools could not be installed (no Go toolchain, download failed, ...)."""


def missing_tools(bin_dir: Path = BIN_DIR) -> list[str]:
    """Names of the reference tools not (yet) installed as executables in ``bin_dir``."""
    return [t for t in TOOLS if not os.access(bin_dir / t, os.X_OK)]


def ensure_reference() -> Path:
    """Return the directory holding the reference binaries, installing them first if missing.

    Raises ReferenceInstallError with the installer's output if the installation fails.
    """
    if not missing_tools():
        return BIN_DIR
    try:
        proc = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ReferenceInstallError(
            f"{INSTALL_SCRIPT} did not finish within {INSTALL_TIMEOUT_S:.0f}s"
        ) from exc
    still_missing = missing_tools()
    if proc.returncode != 0 or still_missing:
        raise ReferenceInstallError(
            f"{INSTALL_SCRIPT} failed (exit {proc.returncode}, missing {still_missing}):\n"
            f"{proc.stdout}{proc.stderr}"
        )
    return BIN_DIR


if __name__ == "__main__":
    print(ensure_reference())
