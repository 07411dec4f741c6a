"""What the DiskQueue tests share: a queue on a temp folder, payloads, files and records."""

from __future__ import annotations

import struct
from pathlib import Path

from nsqd.storage.commit import GroupCommit
from nsqd.storage.diskqueue import DiskQueue

REPO_ROOT = Path(__file__).resolve().parents[2]
MIN_SIZE = 4
MAX_SIZE = 1024


def make_queue(
    path: Path, name: str = "q", max_bytes: int = 100, commit: GroupCommit | None = None, **kw: int
) -> DiskQueue:
    return DiskQueue(
        name,
        path,
        max_bytes_per_file=max_bytes,
        min_msg_size=kw.get("min_size", MIN_SIZE),
        max_msg_size=kw.get("max_size", MAX_SIZE),
        sync_every=kw.get("sync_every", 2500),
        sync_timeout=2.0,
        commit=commit,
    )


def payload(i: int) -> bytes:
    return b"msg-%06d" % i  # 10 bytes: 14 bytes per record


def drain(dq: DiskQueue) -> list[bytes]:
    out = []
    while (data := dq.read()) is not None:
        out.append(data)
    return out


def data_files(path: Path, name: str = "q") -> list[str]:
    return sorted(p.name for p in path.glob(f"{name}.diskqueue.*.dat") if "meta" not in p.name)


def meta_text(path: Path, name: str = "q") -> str:
    return (path / f"{name}.diskqueue.meta.dat").read_text()


def record(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data
