"""nsqd.dat: the topics and channels (and their paused flags) that survive a restart.

Same file and JSON as nsqd, so the Go nsqd and this one can take turns on one --data-path.
Written atomically (atomic.py: temp file, fsync, rename, fsync of the directory); the bytes
are the Go nsqd's, and so is the temporary file's name (`nsqd.dat.<random>.tmp`)."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.v2 import is_valid_name

from ..log import log
from .atomic import rename_into, write_file

if TYPE_CHECKING:
    from ..engine.topic import Topic

FILE_NAME = "nsqd.dat"


class MetadataError(Exception):
    pass


@dataclass(slots=True)
class TopicRecord:
    name: str
    paused: bool = False
    channels: list[tuple[str, bool]] = field(default_factory=list)


def snapshot(all_topics: Iterable[Topic], version: str) -> bytes:
    """The file's bytes for the daemon's current state (ephemeral ones left out)."""
    return encode(
        (
            TopicRecord(
                topic.name,
                topic.paused,
                [(c.name, c.paused) for c in topic.channels.values() if not c.ephemeral],
            )
            for topic in all_topics
            if not topic.ephemeral
        ),
        version,
    )


def encode(records: Iterable[TopicRecord], version: str) -> bytes:
    """The file's bytes for these topics and channels, as nsqd writes them."""
    topics: list[dict[str, Any]] = []
    for rec in records:
        channels = [{"name": name, "paused": paused} for name, paused in rec.channels]
        topics.append({"name": rec.name, "paused": rec.paused, "channels": channels or None})
    doc = {"topics": topics or None, "version": version}
    return json.dumps(doc, separators=(",", ":")).encode()


def write(data_path: str, data: bytes, taken_ns: int) -> None:
    """`data` (a `snapshot` taken at `taken_ns`, time.time_ns()) as nsqd.dat. The file's time is
    the snapshot's, not the write's: a channel made while the write was under way is not in
    it, and its journal is then newer than the file (journal.written_after)."""
    path = os.path.join(data_path, FILE_NAME)
    tmp = f"{path}.{random.getrandbits(63)}.tmp"
    write_file(tmp, data, 0o600)
    os.utime(tmp, ns=(taken_ns, taken_ns))
    rename_into(tmp, path)


def written_ns(data_path: str) -> int:
    """When nsqd.dat was last written (st_mtime_ns); 0 when there is none."""
    try:
        return os.stat(os.path.join(data_path, FILE_NAME)).st_mtime_ns
    except OSError:
        return 0  # none, or one load() cannot read either and refuses in nsqd's words


def _read_or_empty(path: str) -> bytes | None:
    """nsqd's readOrEmpty: None when there is no file; an open or read that fails otherwise is
    its words, os.ReadFile's PathError ("read X: is a directory": Go opens a directory and
    fails reading it, where Python's open() refuses it)."""
    op = "open"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        op = "read"
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = os.strerror(exc.errno or 0).lower()  # Go's syscall.Errno words are lower case
        raise MetadataError(f"failed to read metadata from {path} - {op} {path}: {why}") from None
    return b"".join(chunks)


def load(data_path: str) -> list[TopicRecord]:
    """nsqd.dat's topics and channels, decoded as strictly as nsqd's Go struct decoding: a value
    of the wrong JSON type refuses the file (MetadataError, Go's message); null is a zero value;
    unknown keys are ignored; an invalid name is skipped with nsqd's warning."""
    path = os.path.join(data_path, FILE_NAME)
    raw = _read_or_empty(path)
    if raw is None:
        return []
    try:
        # Go's decoder puts U+FFFD for bytes that are not UTF-8 inside a string (where json.loads
        # of the bytes refused the whole file and the daemon did not start)
        text = raw.decode("utf-8", "replace")
        doc = json.loads(text) if text.strip() else _truncated()
        topics = _struct(doc, _METADATA, "", "nsqd.Metadata").get("topics") or []
    except ValueError as exc:
        raise MetadataError(f"failed to parse metadata in {path} - {_go_syntax(exc)}") from None
    except _TypeMismatch as exc:
        raise MetadataError(f"failed to parse metadata in {path} - {exc}") from None
    records = []
    for t in topics:
        name = t.get("name") or ""
        if not is_valid_name(name.encode("utf-8", "surrogateescape")):
            log.warning("skipping creation of invalid topic %s", name)
            continue
        rec = TopicRecord(name, bool(t.get("paused")))
        for ch in t.get("channels") or []:
            ch_name = ch.get("name") or ""
            if not is_valid_name(ch_name.encode("utf-8", "surrogateescape")):
                log.warning("skipping creation of invalid channel %s", ch_name)
                continue
            rec.channels.append((ch_name, bool(ch.get("paused"))))
        records.append(rec)
    return records


# -- Go's encoding/json, for the three structs of nsqd.dat ----------------------------------------

_CHANNEL = ("ChannelMetadata", {"name": "string", "paused": "bool"})
_TOPIC = (
    "TopicMetadata",
    {"name": "string", "paused": "bool", "channels": ("[]nsqd.ChannelMetadata", _CHANNEL)},
)
_METADATA = (
    "Metadata",
    {"topics": ("[]nsqd.TopicMetadata", _TOPIC), "version": "string"},
)
_PY_TYPES = {"string": str, "bool": bool}


class _TypeMismatch(Exception):
    pass


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _struct(value: Any, spec: Any, path: str, go_type: str) -> dict[str, Any]:
    """A JSON value decoded into a Go struct: the fields it knows, or Go's type error."""
    struct_name, fields = spec
    if value is None:
        return {}
    if not isinstance(value, dict):
        if not path:
            raise _TypeMismatch(
                f"json: cannot unmarshal {_json_kind(value)} into Go value of type {go_type}"
            )
        raise _mismatch(value, struct_name, path, go_type)
    out: dict[str, Any] = {}
    for key, item in value.items():
        field = key if key in fields else next((f for f in fields if f == key.lower()), None)
        if field is None or item is None:
            continue  # unknown keys are ignored; null leaves the zero value
        kind = fields[field]
        where = f"{path}.{field}" if path else field
        if isinstance(kind, tuple):  # a slice of structs
            slice_type, inner = kind
            if not isinstance(item, list):
                raise _mismatch(item, struct_name, where, slice_type)
            elem_type = slice_type[2:]
            for v in item:
                if v is not None and not isinstance(v, dict):
                    raise _mismatch(v, struct_name, where, elem_type)
            out[field] = [_struct(v, inner, where, elem_type) for v in item]
        elif type(item) is not _PY_TYPES[kind]:
            raise _mismatch(item, struct_name, where, kind)
        else:
            out[field] = item
    return out


def _mismatch(value: Any, struct_name: str, path: str, go_type: str) -> _TypeMismatch:
    return _TypeMismatch(
        f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
        f"{struct_name}.{path} of type {go_type}"
    )


def _truncated() -> Any:
    raise ValueError("unexpected end of JSON input")


def _go_syntax(exc: ValueError) -> str:
    """Go's words for the commonest syntax error (a file cut short); Python's for the rest."""
    if isinstance(exc, json.JSONDecodeError):
        if exc.pos >= len(exc.doc.rstrip()):
            return "unexpected end of JSON input"
        return f"invalid JSON at byte {exc.pos + 1}: {exc.msg}"
    return str(exc)
