"""nsqd.dat: topics, channels and paused flags survive a restart; ephemeral ones are never
written; the file is byte for byte what the Go nsqd writes for the same state.

Pausing needs the HTTP API (POST /topic/pause, /channel/pause). Where the daemon has none
(GET /ping does not answer), pauses are checked by loading a hand-written nsqd.dat."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import nsqd_process
import pytest

from . import helpers

VERSION = "1.3.0"


def read_dat(data_path: Path) -> dict[str, Any]:
    return json.loads((data_path / "nsqd.dat").read_bytes())


def state(doc: dict[str, Any]) -> dict[str, tuple[bool, dict[str, bool] | None]]:
    """{topic: (paused, {channel: paused} or None)}: nsqd.dat without its (random) order."""
    out = {}
    for t in doc["topics"] or []:
        channels = t["channels"]
        out[t["name"]] = (
            t["paused"],
            None if channels is None else {c["name"]: c["paused"] for c in channels},
        )
    return out


def assert_go_format(raw: bytes) -> None:
    """Compact JSON, keys in Go's struct order (topics, version / name, paused, channels)."""
    doc = json.loads(raw)
    assert list(doc) == ["topics", "version"], raw
    for t in doc["topics"] or []:
        assert list(t) == ["name", "paused", "channels"], raw
        assert t["channels"] is None or t["channels"], "no channels is null, not []"
        for c in t["channels"] or []:
            assert list(c) == ["name", "paused"], raw
    assert json.dumps(doc, separators=(",", ":")).encode() == raw


def no_message(conn: helpers.Client, seconds: float = 0.5) -> None:
    try:
        frame = conn.read_frame(seconds)
    except TimeoutError:
        return
    raise AssertionError(f"expected no delivery (paused), got {frame}")


def wait_for_dat(data_path: Path, want: dict[str, Any], timeout: float = 3.0) -> dict[str, Any]:
    """nsqd.dat is rewritten asynchronously after a topic/channel is created."""
    last: dict[str, Any] = {}

    def matches() -> bool:
        nonlocal last
        try:
            last = state(read_dat(data_path))
        except (OSError, ValueError):
            return False
        return last == want

    helpers.wait_for(matches, timeout)
    return last


def test_topics_channels_and_pauses_survive_restart(kind: str, data_dir: Path) -> None:
    daemon = helpers.start(kind, data_dir, "--mem-queue-size=3")
    http = daemon.has_http()
    keep = []
    for channel in ("c1", "c2"):
        with daemon.client() as conn:
            conn.sub("alpha", channel)
    with daemon.client() as conn:
        for i in range(5):
            conn.pub("alpha", b"alpha-%d" % i)  # 3 in memory, 2 on disk, for both channels
            conn.pub("beta", b"beta-%d" % i)  # no channel: the topic keeps them
    for topic, channel in (("gamma#ephemeral", "x#ephemeral"), ("alpha", "eph#ephemeral")):
        conn = daemon.client()
        conn.sub(topic, channel)  # kept connected until the shutdown
        keep.append(conn)
    with daemon.client() as conn:
        conn.pub("gamma#ephemeral", b"never on disk")
    paused = False
    if http:
        assert daemon.http("POST", "/topic/pause?topic=beta")[0] == 200
        assert daemon.http("POST", "/channel/pause?topic=alpha&channel=c2")[0] == 200
        paused = True
    want = {"alpha": (False, {"c1": False, "c2": paused}), "beta": (paused, None)}
    assert wait_for_dat(data_dir, want) == want, "nsqd.dat not rewritten after creations"
    daemon.stop()
    for conn in keep:
        conn.close()

    raw = (data_dir / "nsqd.dat").read_bytes()
    assert state(json.loads(raw)) == want
    assert json.loads(raw)["version"] == VERSION
    assert_go_format(raw)
    assert stat.S_IMODE((data_dir / "nsqd.dat").stat().st_mode) == 0o600
    assert not [n for n in helpers.data_files(data_dir) if "ephemeral" in n]
    assert not list(data_dir.glob("*.tmp"))

    with helpers.running(kind, data_dir, "--mem-queue-size=3") as daemon2:
        assert state(read_dat(data_dir)) == want  # rewritten at start-up, flags kept
        # Published before anyone subscribes: only channels recreated from nsqd.dat get it.
        with daemon2.client() as conn:
            conn.pub("alpha", b"alpha-after")
        alpha = [b"alpha-%d" % i for i in range(5)] + [b"alpha-after"]
        with daemon2.client() as conn:
            conn.sub("alpha", "c1", rdy=100)
            assert sorted(helpers.bodies(conn.consume(6, timeout=5))) == sorted(alpha)
        with daemon2.client() as conn:
            conn.sub("alpha", "c2", rdy=100)
            if paused:
                no_message(conn)
                assert daemon2.http("POST", "/channel/unpause?topic=alpha&channel=c2")[0] == 200
            assert sorted(helpers.bodies(conn.consume(6, timeout=5))) == sorted(alpha)
        with daemon2.client() as conn:
            conn.sub("beta", "late", rdy=100)
            if paused:
                no_message(conn)
                assert daemon2.http("POST", "/topic/unpause?topic=beta")[0] == 200
            got = helpers.bodies(conn.consume(5, timeout=5))
            assert sorted(got) == [b"beta-%d" % i for i in range(5)]


PAUSED_DAT = {
    "topics": [
        {"name": "tpaused", "paused": True, "channels": [{"name": "c", "paused": False}]},
        {"name": "cpaused", "paused": False, "channels": [{"name": "c", "paused": True}]},
        {"name": "open", "paused": False, "channels": [{"name": "c", "paused": False}]},
        {"name": "bare", "paused": True, "channels": None},
    ],
    "version": VERSION,
}


def test_paused_flags_load_from_nsqd_dat(kind: str, data_dir: Path) -> None:
    """A hand-written nsqd.dat (pretty-printed): the paused topic and channel deliver nothing,
    the others do, and the file is rewritten at start-up with the same state."""
    (data_dir / "nsqd.dat").write_text(json.dumps(PAUSED_DAT, indent=2))
    want = state(PAUSED_DAT)
    with helpers.running(kind, data_dir) as daemon:
        raw = (data_dir / "nsqd.dat").read_bytes()
        assert_go_format(raw)
        assert state(json.loads(raw)) == want
        with daemon.client() as pub:
            for topic in ("tpaused", "cpaused", "open"):
                pub.pub(topic, b"to-" + topic.encode())
        with daemon.client() as conn:
            conn.sub("open", "c", rdy=10)
            assert conn.message().body == b"to-open"
        for topic in ("tpaused", "cpaused"):
            with daemon.client() as conn:
                conn.sub(topic, "c", rdy=10)
                no_message(conn, 0.3)
    assert state(read_dat(data_dir)) == want


def _alpha_c1(daemon: helpers.Daemon) -> None:
    with daemon.client() as conn:
        conn.sub("alpha", "c1")


def _many(daemon: helpers.Daemon) -> None:
    with daemon.client() as conn:
        for name in ("t1", "t2", "t3"):
            conn.pub(name, b"x")
    for channel in ("a", "b", "z#ephemeral"):
        with daemon.client() as conn:
            conn.sub("t1", channel)
    with daemon.client() as conn:
        conn.sub("e#ephemeral", "a")
    helpers.sleep(0.2)


def _hand_written(path: Path) -> None:
    doc = {
        "topics": [
            {"name": "tpaused", "paused": True, "channels": [{"name": "c", "paused": True}]}
        ],
        "version": VERSION,
    }
    (path / "nsqd.dat").write_text(json.dumps(doc, indent=1))


CASES: dict[str, tuple[Any, Any]] = {  # name: (prepare the data dir, act on the daemon)
    "empty": (None, None),
    "alpha_c1": (None, _alpha_c1),
    "loaded_pauses": (_hand_written, None),  # loaded, then rewritten at start-up
    "many": (None, _many),
}


def test_nsqd_dat_bytes_match_reference(reference: Path, tmp_path: Path) -> None:
    """Same state on both daemons, same nsqd.dat. Go writes topics and channels in map order
    (random), so with several of them the comparison ignores the order."""
    files: dict[str, dict[str, bytes]] = {}
    for name, (prepare, act) in CASES.items():
        for kind in ("ours", "reference"):
            path = tmp_path / kind / name / "data"
            path.mkdir(parents=True)
            if prepare is not None:
                prepare(path)
            with helpers.running(kind, path) as daemon:
                if act is not None:
                    act(daemon)
            files.setdefault(name, {})[kind] = (path / "nsqd.dat").read_bytes()
            mode = stat.S_IMODE((path / "nsqd.dat").stat().st_mode)
            assert mode == 0o600, f"{kind} {name}: mode {mode:o}"
    for name, got in files.items():
        assert_go_format(got["reference"])
        assert_go_format(got["ours"])
        if name == "many":
            assert state(json.loads(got["ours"])) == state(json.loads(got["reference"]))
        else:
            assert got["ours"] == got["reference"], name
    assert files["empty"]["reference"] == b'{"topics":null,"version":"1.3.0"}'


def test_ephemeral_never_written(kind: str, data_dir: Path) -> None:
    """Ephemeral topics and channels, with overflowing traffic and consumers connected at the
    shutdown: no file of theirs in the data path, no entry in nsqd.dat.

    Ephemerality is by name only: a plain channel of an ephemeral topic ("eph#ephemeral:c")
    does get a disk queue in nsqd (but no nsqd.dat entry, its topic has none)."""
    daemon = helpers.start(kind, data_dir, "--mem-queue-size=2")
    conns = []
    subs = (
        ("eph#ephemeral", "c"),
        ("eph#ephemeral", "d#ephemeral"),
        ("solid", "e#ephemeral"),
    )
    for topic, channel in subs:
        conn = daemon.client()
        conn.sub(topic, channel, rdy=0)
        conns.append(conn)
    with daemon.client() as conn:
        conn.mpub("eph#ephemeral", [b"m%d" % i for i in range(20)])
        conn.mpub("solid", [b"m%d" % i for i in range(20)])
        conn.mpub("lonely#ephemeral", [b"m%d" % i for i in range(20)])
    helpers.sleep(0.3)
    daemon.stop()
    for conn in conns:
        conn.close()
    files = helpers.data_files(data_dir)
    plain_channel = "eph#ephemeral:c.diskqueue."
    ephemeral = [n for n in files if "ephemeral" in n and not n.startswith(plain_channel)]
    assert not ephemeral, files
    assert state(read_dat(data_dir)) == {"solid": (False, None)}


def test_deleted_and_emptied_stay_gone(kind: str, data_dir: Path) -> None:
    """HTTP delete/empty: a deleted topic or channel leaves the
    data path at once and nsqd.dat; nothing deleted or emptied comes back after a restart."""
    flags = ("--mem-queue-size=10",)
    daemon = helpers.start(kind, data_dir, *flags)
    assert daemon.has_http(), "no HTTP API (GET /ping) to delete or empty with"
    for topic, channel in (
        ("doomed", "ch"),
        ("kept", "emptied"),
        ("kept", "full"),
        ("kept", "gone"),
    ):
        with daemon.client() as conn:
            conn.sub(topic, channel)
    with daemon.client() as conn:
        for topic in ("doomed", "kept"):
            conn.mpub(topic, [b"%s-%03d" % (topic.encode(), i) for i in range(100)])
    assert daemon.http("POST", "/topic/delete?topic=doomed")[0] == 200
    assert daemon.http("POST", "/channel/delete?topic=kept&channel=gone")[0] == 200
    assert daemon.http("POST", "/channel/empty?topic=kept&channel=emptied")[0] == 200
    leftovers = [n for n in helpers.data_files(data_dir) if n.startswith(("doomed", "kept:gone"))]
    assert not leftovers
    daemon.stop()
    # Checked after the shutdown: the Go nsqd persists nsqd.dat for a channel deletion from
    # a goroutine that can run before the channel leaves the topic's map, so while it runs
    # the file may still list the deleted channel (until the next write, at the latest the
    # shutdown's).
    want = {"kept": (False, {"emptied": False, "full": False})}
    assert state(read_dat(data_dir)) == want

    with helpers.running(kind, data_dir, *flags) as daemon2:
        for topic, channel in (("doomed", "ch"), ("kept", "emptied"), ("kept", "gone")):
            with daemon2.client() as conn:
                conn.sub(topic, channel, rdy=100)
                no_message(conn, 0.3)
        with daemon2.client() as conn:
            conn.sub("kept", "full", rdy=100)
            assert len(conn.consume(100, timeout=5)) == 100


# -- refusals to start: Go's strictness and one FATAL line -------------------------------------

MALFORMED = {
    "paused_string": '{"topics":[{"name":"t","channels":[{"name":"c","paused":"yes"}]}]}',
    "topics_object": '{"topics":{},"version":"1.3.0"}',
    "name_number": '{"topics":[{"name":5}],"version":"1.3.0"}',
    "topic_paused_number": '{"topics":[{"name":"t","paused":1}]}',
    "version_number": '{"version":5}',
    "topic_not_object": '{"topics":[5]}',
    "channel_not_object": '{"topics":[{"name":"t","channels":[true]}]}',
    "channels_object": '{"topics":[{"name":"t","channels":{}}]}',
    "document_array": "[]",
    "truncated": '{"topics":[',
    "empty": "",
    "syntax": '{"topics":[{"name":"t"}] x',
}


def refuse(kind: str, data_dir: Path, *flags: str) -> str:
    """Run a daemon that must refuse to start: its output (exit status 1, one FATAL line)."""
    tcp, http = nsqd_process.free_ports(2)
    argv = [*helpers.daemon_command(kind), f"--data-path={data_dir}"]
    argv += [f"--tcp-address={helpers.HOST}:{tcp}", f"--http-address={helpers.HOST}:{http}"]
    argv += flags  # last: they win over the free ports above
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 1, f"{kind}: exit {done.returncode}\n{out}"
    assert "Traceback" not in out, out
    fatal = [line for line in out.splitlines() if "FATAL" in line]
    assert len(fatal) == 1, out
    return fatal[0].split("FATAL: ", 1)[1]


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_nsqd_dat_refuses_as_go(case: str, tmp_path: Path, reference: Path) -> None:
    said = {}
    for kind in ("reference", "ours"):
        data = tmp_path / kind
        data.mkdir()
        (data / "nsqd.dat").write_text(MALFORMED[case])
        said[kind] = refuse(kind, data).replace(str(data), "<data>")
    assert said["ours"].startswith("failed to load metadata - failed to parse metadata in "), said
    assert "<data>/nsqd.dat - " in said["ours"], said
    if case != "syntax":  # Python's JSON parser words other syntax errors its own way
        assert said["ours"] == said["reference"], said


# an nsqd.dat that cannot be read (permissions are no test as root: a symlink loop fails the
# open the same way): nsqd's readOrEmpty words, os.ReadFile's "open"/"read" PathError
UNREADABLE = {
    "directory": lambda dat: dat.mkdir(),
    "symlink_loop": lambda dat: dat.symlink_to(dat.name),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_unreadable_nsqd_dat_refuses_as_go(case: str, tmp_path: Path, reference: Path) -> None:
    """Ours said "failed to instantiate nsqd - Is a directory" (or "- Too many levels of
    symbolic links"); nsqd names the file and the failed call."""
    said = {}
    for kind in ("reference", "ours"):
        data = tmp_path / kind
        data.mkdir()
        UNREADABLE[case](data / "nsqd.dat")
        said[kind] = refuse(kind, data).replace(str(data), "<data>")
    assert said["ours"] == said["reference"], said
    assert said["ours"].startswith("failed to load metadata - failed to read metadata from "), said


def test_bytes_that_are_not_utf8_in_nsqd_dat_start_as_go(tmp_path: Path, reference: Path) -> None:
    """One byte inside a JSON string that is not UTF-8 (a bit flipped in "version", a channel
    name): the Go nsqd reads it as U+FFFD and starts (skipping the name that is now invalid);
    json.loads of the bytes refused the whole file, and ours did not start (found by
    fuzzing)."""
    dat = (
        b'{"topics":[{"name":"t","paused":false,"channels":[{"name":"c","paused":false},'
        b'{"name":"b\xeed","paused":false}]}],"version":"1\xee3.0"}'
    )
    seen = {}
    for kind in ("reference", "ours"):
        data = tmp_path / kind
        data.mkdir()
        (data / "nsqd.dat").write_bytes(dat)
        with helpers.running(kind, data) as daemon:
            _, body = daemon.http("GET", "/stats?format=json")
            topics = json.loads(body)["topics"]
            seen[kind] = {
                t["topic_name"]: sorted(c["channel_name"] for c in t["channels"]) for t in topics
            }
    assert seen["ours"] == seen["reference"] == {"t": ["c"]}, seen


def test_other_refusals_to_start_are_one_fatal_line(tmp_path: Path, reference: Path) -> None:
    holder = helpers.start("ours", tmp_path)  # holds the data path's lock and its ports
    cases = {
        "locked": [],
        "tcp port taken": [f"--tcp-address={helpers.HOST}:{holder.tcp_port}"],
        "http port taken": [f"--http-address={helpers.HOST}:{holder.http_port}"],
        "tls files missing": ["--tls-cert=/nonexistent.pem", "--tls-key=/nonexistent.key"],
    }
    for name, flags in cases.items():
        data = tmp_path if name == "locked" else tmp_path / name.replace(" ", "_")
        data.mkdir(exist_ok=True)
        said = refuse("ours", data, *flags)
        assert said.startswith("failed to instantiate nsqd - "), (name, said)
    said = refuse("ours", tmp_path / "missing")
    assert said == (
        "failed to instantiate nsqd - failed to lock data-path: "
        f"open {tmp_path}/missing: no such file or directory"
    ), said
    holder.stop()
