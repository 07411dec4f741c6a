"""The version nsqd reports everywhere (/stats, /info, nsqd.dat, nsqlookupd IDENTIFY,
--version), and the build line in Go's form, naming the Python that runs it."""

from __future__ import annotations

import platform

VERSION = "1.3.0"
BUILD = f"nsqd v{VERSION} (built w/python{platform.python_version()})"
