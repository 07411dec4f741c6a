"""Make the repository importable (protocol/) and this folder's helpers, however pytest is run."""

import sys
from pathlib import Path

for path in (Path(__file__).resolve().parents[2], Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
