"""The front-end's flags as config keys, and the password never answered by GET /config."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from conformance.resp.servers import start_ours
from conformance.resp.wire import Conn, encode


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_config_file_keys_and_secret_option(tmp_path) -> None:
    conf = tmp_path / "nsqd.toml"
    conf.write_text('resp_password = "pw"\nresp_max_bulk = 2048\nresp_expiry_topic = "exp"\n')
    server = start_ours(tmp_path / "data", f"--config={conf}")
    try:
        c = Conn(server.port)
        c.send(encode([b"PING"]))
        assert c.reply() == b"-NOAUTH Authentication required.\r\n"
        c.send(encode([b"AUTH", b"pw"]) + encode([b"SET", b"k", b"x" * 2049]))
        assert c.reply() == b"+OK\r\n"
        assert c.until_closed() == b"-ERR Protocol error: invalid bulk length\r\n<closed>"
        base = f"http://127.0.0.1:{server.http_port}/config"  # type: ignore[attr-defined]
        assert get(f"{base}/resp_password") == (400, b'{"message":"INVALID_OPTION"}')
        assert get(f"{base}/resp_address") == (200, f"127.0.0.1:{server.port}".encode())
        assert get(f"{base}/resp_expiry_topic") == (200, b"exp")
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("flag", ["--resp-expiry-topic=bad name", "--resp-max-bulk=0"])
def test_bad_values_refuse_to_start(tmp_path, flag: str) -> None:
    with pytest.raises(RuntimeError, match="did not start"):
        start_ours(tmp_path / "data", flag)
