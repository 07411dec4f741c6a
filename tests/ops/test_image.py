"""The image, built and run for real (scripts/image_test.py): a stand-in base from Debian's
packages, our Dockerfile on it with buildah, the container started as the image's own user,
entrypoint and default flags in a network namespace of its own. go-nsq and pynsq publish and
consume through it, the HTTP API answers, the HEALTHCHECK command exits 0, SIGTERM stops it with
exit 0 and its queue in /data, and the same container started again delivers what was queued,
none twice. Also --help and a bad flag through the entrypoint. Nothing here skips: a tool that
cannot be installed fails the test."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from .conftest import REPO_ROOT, reference_bin

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import image_test

from conformance.clients.runner import setup_gonsq

PYNSQ_WORKER = REPO_ROOT / "tests" / "durability" / "pynsq_worker.py"


@pytest.fixture(scope="module")
def built() -> float:
    try:
        return image_test.build()
    except image_test.ImageError as exc:
        pytest.fail(f"the image could not be built: {exc}", pytrace=False)


@pytest.fixture
def box(built: float) -> Iterator[image_test.Container]:
    with image_test.netns() as ns:
        container = image_test.Container(ns)
        try:
            yield container
        finally:
            container.remove()


def http(ns: str, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    code = (
        "import sys, urllib.request\n"
        f"req = urllib.request.Request('http://127.0.0.1:4151{path}', data={body!r} or None,"
        f" method={method!r})\n"
        "with urllib.request.urlopen(req, timeout=5) as r:\n"
        "    sys.stdout.write(str(r.status) + ' ' + r.read().decode())\n"
    )
    done = image_test.in_ns(ns, code)
    assert done.returncode == 0, done.stderr
    status, _, text = done.stdout.partition(" ")
    return int(status), text.encode()


def consume_with_pynsq(ns: str, topic: str, n: int) -> list[str]:
    argv = ["ip", "netns", "exec", ns, sys.executable, str(PYNSQ_WORKER), "--nsqd",
            "127.0.0.1:4150", "--topic", topic, "--channel", "ch", "--n", str(n)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line.split()[0] for line in done.stdout.splitlines()]


def start_and_wait(box: image_test.Container) -> tuple[object, float]:
    start = time.monotonic()
    proc = box.start()
    ping = image_test.in_ns(box.ns, image_test.PING)
    assert ping.returncode == 0, "no /ping from the container"
    return proc, time.monotonic() - start


def stop(box: image_test.Container, proc: object) -> tuple[int, str]:
    os.kill(box.nsqd_pid(), signal.SIGTERM)  # what `docker stop` sends to PID 1
    rc = proc.wait(30)  # type: ignore[attr-defined]
    return rc, proc.stdout.read()  # type: ignore[attr-defined]


def test_the_image_serves_stops_cleanly_and_keeps_its_queue(
    box: image_test.Container, record_property: pytest.RecordProperty
) -> None:
    ns = box.ns
    assert box.config.user.split(":")[0] not in ("", "0", "root")
    proc, started = start_and_wait(box)
    record_property("image_size", image_test.image_size())
    record_property("start_to_ping_s", round(started, 2))

    # HEALTHCHECK, run inside the container as Docker would
    health = box.exec_alongside(*box.config.healthcheck)
    assert health.returncode == 0, health.stdout + health.stderr

    # go-nsq
    checks = "publish_consume,deferred"
    gonsq = image_test.run(
        ["ip", "netns", "exec", ns, *setup_gonsq(), "-nsqd", "127.0.0.1:4150", "-check", checks]
    )
    assert gonsq.stdout.count("RESULT PASS") == 2, gonsq.stdout
    # pynsq, after an HTTP publish
    assert http(ns, "POST", "/mpub?topic=py", b"\n".join(b"py-%d" % i for i in range(20)))[0] == 200
    assert sorted(consume_with_pynsq(ns, "py", 20)) == sorted(f"py-{i}" for i in range(20))
    status, body = http(ns, "GET", "/stats?format=json")
    assert status == 200 and {t["topic_name"] for t in json.loads(body)["topics"]} >= {"py"}

    # a queue for later, then SIGTERM: exit 0, and the queue is in /data
    assert http(ns, "POST", "/topic/create?topic=keep")[0] == 200
    assert http(ns, "POST", "/channel/create?topic=keep&channel=ch")[0] == 200
    kept = [f"keep-{i}" for i in range(50)]
    assert http(ns, "POST", "/mpub?topic=keep", "\n".join(kept).encode())[0] == 200
    rc, log = stop(box, proc)
    assert rc == 0, log
    files = box.exec("ls", "/data").stdout.split()
    assert "nsqd.dat" in files and any(f.startswith("keep:ch.diskqueue") for f in files), files

    # started again, as `docker restart` would: every queued message once
    proc2, _ = start_and_wait(box)
    got = consume_with_pynsq(ns, "keep", 50)
    time.sleep(1)
    status, body = http(ns, "GET", "/stats?format=json&topic=keep")
    channel = json.loads(body)["topics"][0]["channels"][0]
    rc2, log2 = stop(box, proc2)
    assert rc2 == 0, log2
    assert Counter(got) == Counter(kept), Counter(got) - Counter(kept)
    assert channel["depth"] == 0, channel


def test_help_and_a_bad_flag_through_the_entrypoint(box: image_test.Container) -> None:
    entry = [*box.config.entrypoint, *box.config.cmd]
    helped = box.exec(*entry, "--help")
    assert helped.returncode == 0 and "-tcp-address" in helped.stdout, helped.stdout[-500:]
    ours = box.exec(*entry, "--no-such-flag")
    assert ours.returncode == 1 and "--no-such-flag" in ours.stdout + ours.stderr
    go = subprocess.run(
        [str(reference_bin("nsqd")), "--no-such-flag"], capture_output=True, text=True
    )
    assert go.returncode in (0, 2) and "no-such-flag" in go.stdout + go.stderr  # Go's answer


def test_start_time_and_size_are_reported(built: float) -> None:
    size = image_test.image_size()
    assert size.endswith("MB") and float(size.split()[0]) < 600, size
    assert built < 600, built


def test_two_containers_register_with_nsqlookupd_and_nsqadmin_sees_both(built: float) -> None:
    """examples/cluster/docker-compose.yml as far as it runs here: two containers of the image
    with its entrypoint and flags like the compose file's, registered with the real nsqlookupd,
    and the real nsqadmin listing both nodes. One network namespace holds them all (distinct
    ports stand in for the compose network's names)."""
    compose = (REPO_ROOT / "examples" / "cluster" / "docker-compose.yml").read_text()
    assert "--lookupd-tcp-address=nsqlookupd:4160" in compose and "image: trio-nsqd" in compose
    with image_test.netns() as ns:
        lookupd = subprocess.Popen(
            ["ip", "netns", "exec", ns, str(reference_bin("nsqlookupd"))],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        admin = subprocess.Popen(
            ["ip", "netns", "exec", ns, str(reference_bin("nsqadmin")),
             "--lookupd-http-address=127.0.0.1:4161"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        boxes = [image_test.Container(ns), image_test.Container(ns)]
        procs = []
        try:
            for i, box in enumerate(boxes):
                tcp, port = 4150 + 100 * i, 4151 + 100 * i
                procs.append(
                    box.start(
                        f"--tcp-address=0.0.0.0:{tcp}", f"--http-address=0.0.0.0:{port}",
                        "--broadcast-address=127.0.0.1", "--lookupd-tcp-address=127.0.0.1:4160",
                    )
                )  # fmt: skip
            code = (
                "import json, sys, time, urllib.request\n"
                "end = time.monotonic() + 30\n"
                "while time.monotonic() < end:\n"
                "    try:\n"
                "        for port in (4151, 4251):\n"
                "            urllib.request.urlopen(f'http://127.0.0.1:{port}/pub?topic=events',"
                " data=b'x', timeout=2)\n"
                "        r = urllib.request.urlopen('http://127.0.0.1:4171/api/nodes', timeout=2)\n"
                "        nodes = json.load(r)['nodes']\n"
                "        ports = sorted(n['tcp_port'] for n in nodes)\n"
                "        if ports == [4150, 4250] and all(n['topics'] for n in nodes):\n"
                "            print(json.dumps(nodes)); sys.exit(0)\n"
                "    except OSError:\n"
                "        pass\n"
                "    time.sleep(0.2)\n"
                "sys.exit(1)\n"
            )
            seen = image_test.in_ns(ns, code)
            assert seen.returncode == 0, seen.stdout + seen.stderr
            nodes = json.loads(seen.stdout)
            assert {n["version"] for n in nodes} == {"1.3.0"}, nodes
        finally:
            for box, proc in zip(boxes, procs, strict=False):
                with contextlib.suppress(image_test.ImageError):
                    stop(box, proc)
            for box in boxes:
                box.remove()
            for p in (lookupd, admin):
                p.kill()
                p.wait(10)
