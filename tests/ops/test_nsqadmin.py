"""nsqadmin v1.3.0 pointed at the real nsqlookupd shows our node, topic and channel with their
depths: its pages, rendered by headless Chromium, read the same as with the real nsqd."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from .conftest import HOST, REPO_ROOT, V2, Launcher, Proc, http_json, wait_until

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--virtual-time-budget=10000",  # let the page's XHRs to nsqadmin's /api finish
]
TOPIC, CHANNEL = "adm_topic", "adm_chan"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        subprocess.run(
            ["bash", str(REPO_ROOT / "scripts" / "install_browser.sh")],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=900,
            check=False,
        )
        found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium could not be installed (scripts/install_browser.sh)", pytrace=False)
    return found


def page_text(url: str) -> str:
    """The text of the page as the browser rendered it (scripts dropped, blanks squeezed)."""
    with tempfile.TemporaryDirectory(prefix="nsqd-ops-chromium-") as profile:
        out = subprocess.run(
            [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    dom = re.sub(r"<script.*?</script>", " ", out.stdout, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    return re.sub(r"\s+", " ", text).strip()


def setup_cluster(launcher: Launcher, kind: str) -> tuple[Proc, Proc]:
    lookupd = launcher.nsqlookupd()
    nsqd = launcher.nsqd(
        kind, f"--lookupd-tcp-address={lookupd.addr('tcp')}", f"--broadcast-address={HOST}"
    )
    admin = launcher.nsqadmin(lookupd)
    pub = V2(nsqd.ports["tcp"])
    for i in range(7):
        pub.pub(TOPIC, b"m%d" % i)
    pub.close()
    sub = V2(nsqd.ports["tcp"])
    sub.sub(TOPIC, CHANNEL)
    sub.rdy(2)  # two in flight, five waiting
    sub.message()
    sub.message()
    setup_cluster.keep = sub  # type: ignore[attr-defined]
    wait_until(
        lambda: http_json(f"http://{admin.addr('http')}/api/topics/{TOPIC}")["channels"],
        10,
        "nsqadmin to see the channel",
    )
    return nsqd, admin


def pages(launcher: Launcher, kind: str) -> dict[str, str]:
    nsqd, admin = setup_cluster(launcher, kind)
    base = f"http://{admin.addr('http')}"
    try:
        texts = {
            path: page_text(base + path)
            for path in ("/", f"/topics/{TOPIC}", f"/topics/{TOPIC}/{CHANNEL}", "/nodes")
        }
    finally:
        setup_cluster.keep.close()  # type: ignore[attr-defined]
    ports = {str(nsqd.ports["tcp"]): "TCP_PORT", str(nsqd.ports["http"]): "HTTP_PORT"}
    for path, text in texts.items():
        for port, name in ports.items():
            text = text.replace(port, name)
        texts[path] = text
    return texts


def test_nsqadmin_shows_our_topic_channel_and_node(launcher: Launcher) -> None:
    texts = pages(launcher, "ours")
    assert TOPIC in texts["/"]
    topic = texts[f"/topics/{TOPIC}"]
    # topic row: host, depth, memory + disk, messages, channels; then the channel row:
    # depth, memory + disk, in flight, deferred, requeued, timed out, messages, connections
    assert f"( {HOST}:HTTP_PORT ) 0 0 + 0 7 1" in topic, topic
    assert f"{CHANNEL} 5 5 + 0 2 0 0 0 7 1" in topic, topic
    channel = texts[f"/topics/{TOPIC}/{CHANNEL}"]
    assert f"{HOST}:HTTP_PORT" in channel and " 5 5 + 0 2 0 0 0 7 1" in channel, channel
    nodes = texts["/nodes"]
    assert "HTTP_PORT" in nodes and "TCP_PORT" in nodes and "1.3.0" in nodes, nodes


def test_nsqadmin_pages_read_as_with_the_real_nsqd(launcher: Launcher) -> None:
    ours = pages(launcher, "ours")
    for p in list(launcher.procs):
        p.stop()
    launcher.procs.clear()
    time.sleep(0.2)
    reference = pages(launcher, "reference")

    def normal(text: str) -> str:  # a client's own port and how long it has been connected
        text = re.sub(rf"{HOST}:\d+", f"{HOST}:PORT", text)
        return re.sub(r"\b\d+s\b", "Ns", text)

    for path in ours:
        assert normal(ours[path]) == normal(reference[path]), path
