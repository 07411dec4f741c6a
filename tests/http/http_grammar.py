"""A seeded grammar of HTTP requests to nsqd v1.3.0's API, for the differential fuzz
(test_http_fuzz.py): every route the Go nsqd has, the methods, query strings with each
parameter present, missing, duplicated, empty, percent-encoded or not UTF-8, topic and channel
names valid and not, bodies around --max-msg-size and --max-body-size, text and binary /mpub,
`defer`, `format`, and a few headers real clients send. Each request is well-formed HTTP/1.1
(Content-Length or chunked, always right).

Left out, and why (what cannot or should not match):
- /debug/pprof/*: Go's runtime profiles (a heap or goroutine dump, a 30 s CPU profile) have no
  Python counterpart; ours answers 404 for them (docs/http-api.md).
- ours' own routes (/metrics, /message/*, /channel/peek|receive|pop, /topic|channel/config):
  the Go nsqd has none of them (404), which is the point of them.
- a valid non-zero `defer` under a minute: when it falls due is timing (nsqd's scanner is up to
  100 ms late, 5 s for a channel created in the last 5 s: docs/compatibility.md). The daemons
  run with --max-req-timeout=1h, so the bound itself (3600000 / 3600001) is still sent.
- real addresses in PUT /config/nsqlookupd_tcp_addresses: both daemons would start dialling
  them; the JSON that sets none or is refused is sent.
- bodies past 64 KiB: a daemon may answer 413 before reading them and close; the client
  writes a request whole before reading, so such a body could meet a reset instead of the
  answer. 20,000 bytes is well past both limits."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

MAX_MSG = 100  # the daemons' --max-msg-size and --max-body-size (test_http_fuzz.FLAGS)
MAX_BODY = 1000
METHODS = ("GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS")

TOPICS_OK = ["t", "t.2", "A-z_9", ".", "x" * 64, "e#ephemeral", "f" * 54 + "#ephemeral"]
CHANNELS_OK = ["c", "c.1", "-", "c" * 64, "d#ephemeral"]
# invalid for nsqd's ^[.a-zA-Z0-9_-]+(#ephemeral)?$ with 1..64 bytes: too long, other
# characters, a suffix that is not quite #ephemeral, a newline (Go's $ is the end of text)
NAMES_BAD = [
    "",
    "x" * 65,
    "f" * 55 + "#ephemeral",
    "t*",
    "t/x",
    "#ephemeral",
    "t#ephemera",
    "t#Ephemeral",
    "t#ephemeral#ephemeral",
    "tö",
    "t t",
    "t\n",
    "t\x00",
    "日本",
]
BAD_UTF8 = [b"\xff", b"t\xc3", b"\xed\xa0\x80", b"\xc0\xaf"]

CONFIG_OPTS = [
    "log_level",
    "mem_queue_size",
    "max_msg_size",
    "max_body_size",
    "data_path",
    "nsqlookupd_tcp_addresses",
    "e2e_processing_latency_percentiles",
    "tls_min_version",
    "statsd_prefix",
    "max_req_timeout",
    "msg_timeout",
    "nope",
    "LOG_LEVEL",
    "log-level",
    "log%5Flevel",
    "a%2Fb",
    "%ZZ",
    "é",
    "log_level/",
    "",
]
LOG_LEVELS = [b"debug", b"info", b"warn", b"error", b"fatal", b"INFO", b"warning", b"x", b""]
LOOKUPD_VALUES = [b"[]", b"null", b" [ ] ", b'"x"', b"[1]", b"{}", b"[", b'["a:1"] x', b""]
BOOLS = [b"true", b"false", b"1", b"0", b"T", b"yes", b"", b"maybe", b"TRUE"]
DEFERS = [
    *(b"0", b"00", b"-0", b"+0", b"60000", b"3600000", b"3600001", b"-1", b"abc", b""),
    *(b"5_0", b"0x10", b"1e3", b" 5", b"99999999999999999999", b"9223372036854775807"),
    *(b"-9223372036854775808", b"\xd9\xa1", b"\xc2\xb2"),
]
RATES = [b"0", b"1", b"-1", b"x", b"", b"+5", b"99999999999999999999", b"1e3", b"\xff", b"<&>"]
FORMATS = [b"json", b"text", b"JSON", b"", b"xml"]
HEADERS = [
    b"Accept: application/vnd.nsq; version=1.0",
    b"Accept: */*",
    b"User-Agent: curl/8.5.0",
    b"Content-Type: application/octet-stream",
    b"Content-Type: application/x-www-form-urlencoded",
    b"Accept-Encoding: gzip",
    b"Connection: keep-alive",
    b"X-Forwarded-For: 10.0.0.1",
]
JUNK_PARAMS = [b"x=1", b"a=%", b"%zz=1", b"k=%g0", b"", b"=v", b"x", b"a=1;b=2", b"\xff=\xfe"]


@dataclass
class Request:
    method: str
    target: bytes
    headers: list[bytes]
    body: bytes | None
    chunks: list[bytes] | None  # the body's chunks when sent chunked

    @property
    def path(self) -> bytes:
        return self.target.split(b"?", 1)[0]

    def wire(self) -> bytes:
        lines = [b"%s %s HTTP/1.1" % (self.method.encode(), self.target), b"Host: x"]
        lines += self.headers
        if self.chunks is not None:
            lines.append(b"Transfer-Encoding: chunked")
            framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in self.chunks if c)
            return b"\r\n".join(lines) + b"\r\n\r\n" + framed + b"0\r\n\r\n"
        if self.body is not None:
            lines.append(b"Content-Length: %d" % len(self.body))
        return b"\r\n".join(lines) + b"\r\n\r\n" + (self.body or b"")

    def __str__(self) -> str:
        body = self.body if self.body is None or len(self.body) <= 120 else self.body[:120]
        size = "" if self.body is None else f" ({len(self.body)} bytes)"
        framing = " chunked" if self.chunks is not None else ""
        return f"{self.method} {self.target!r} {self.headers}{framing} body={body!r}{size}"


class Grammar:
    """`request()` draws the next request from the seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.routes: list[tuple[str, str, Callable[[], tuple[list, bytes | None]], int]] = [
            ("/ping", "GET", self._no_params, 2),
            ("/info", "GET", self._no_params, 1),
            ("/stats", "GET", self._stats, 6),
            ("/pub", "POST", self._pub, 10),
            ("/mpub", "POST", self._mpub, 8),
            *[(f"/topic/{a}", "POST", self._topic, 2) for a in ACTIONS],
            *[(f"/channel/{a}", "POST", self._channel, 2) for a in ACTIONS],
            ("/config/", "GET", self._config_get, 2),
            ("/config/", "PUT", self._config_put, 2),
            ("/debug/setblockrate", "PUT", self._set_block_rate, 1),
            ("/debug/freememory", "POST", self._no_params, 1),
            ("/nope", "GET", self._no_params, 1),
        ]

    # -- the request -------------------------------------------------------------------------

    def request(self) -> Request:
        rng = self.rng
        path, method, build, _ = rng.choices(self.routes, [r[3] for r in self.routes])[0]
        params, body = build()
        if path == "/config/":
            path += rng.choice(CONFIG_OPTS)
        if rng.random() < 0.2:
            method = rng.choice(METHODS)
        if rng.random() < 0.1:
            path = self._mutate_path(path)
        target = path.encode() + self._query(params)
        if rng.random() < 0.03:  # the absolute form a client sends to a proxy
            authority = [
                b"http://127.0.0.1:4151",
                b"HTTP://h",
                b"http://u@h",
                b"http://",
                # a host Go refuses (400) only without a body: Go closes with the body unread,
                # and the reset that makes can destroy its answer before the client reads it
                *([b"http://h%41"] if body is None else []),
            ]
            target = rng.choice(authority) + target
        headers = rng.sample(HEADERS, rng.choice((0, 0, 0, 1, 2)))
        if rng.random() < 0.1:  # the answer ends the connection: the body is read up to it
            headers.append(b"Connection: close")
        if body is not None and rng.random() < 0.1:
            headers.append(b"Expect: 100-continue")
        if body is None and method in ("POST", "PUT") and rng.random() < 0.3:
            body = b""  # an explicit Content-Length: 0
        chunks = None
        if body is not None and rng.random() < 0.2:
            cuts = sorted(rng.randrange(len(body) + 1) for _ in range(rng.randrange(3)))
            chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        return Request(method, target, headers, body, chunks)

    def _mutate_path(self, path: str) -> str:
        rng = self.rng
        return rng.choice(
            [
                path + "/",
                path.upper(),
                path.title(),
                "/" + path,
                path.replace("/", "/./", 1),
                f"{path[:-1]}%{ord(path[-1]):02X}",
                path + "x",
                path + rng.choice(["/./", "//", "/..", "/../", "/%2E/"]),
                path + "é",  # raw UTF-8 in the path
                path + "%C3%A9",
            ]
        )

    # -- query strings -----------------------------------------------------------------------

    def _query(self, params: list[tuple[bytes, bytes | None]]) -> bytes:
        """`?k=v&...`: each value in one of the encodings a client may use; junk at times."""
        rng = self.rng
        parts = [self._key(k) + (b"" if v is None else b"=" + self._encode(v)) for k, v in params]
        if rng.random() < 0.15:
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(JUNK_PARAMS))
        if not parts:
            return b"?" if rng.random() < 0.05 else b""
        return b"?" + b"&".join(parts)

    def _key(self, key: bytes) -> bytes:
        if self.rng.random() < 0.05:  # %74opic is topic
            return b"%%%02x" % key[0] + key[1:]
        return key

    def _encode(self, value: bytes) -> bytes:
        style = self.rng.choice(("minimal", "minimal", "minimal", "all", "raw", "plus"))
        out = bytearray()
        for byte in value:
            char = bytes([byte])
            if style == "all":
                out += b"%%%02X" % byte
            elif style == "plus" and char == b" ":
                out += b"+"
            elif byte <= 0x20 or byte == 0x7F or char in b"%&+;=":
                out += b"%%%02X" % byte
            elif byte >= 0x80 and style != "raw":
                out += b"%%%02x" % byte
            else:  # '#', '/', '*', and in "raw" the bytes past ASCII, as they are
                out += char
        return bytes(out)

    def _param(self, key: bytes, values: list[bytes]) -> list[tuple[bytes, bytes | None]]:
        """The parameter as given, missing, duplicated, empty or with no '='."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.08:
            return []
        if roll < 0.14:
            return [(key, rng.choice(values)), (key, rng.choice(values))]
        if roll < 0.18:
            return [(key, b"")]
        if roll < 0.2:
            return [(key, None)]
        return [(key, rng.choice(values))]

    def _name(self, valid: list[str]) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.75:
            return rng.choice(valid).encode()
        if roll < 0.95:
            return rng.choice(NAMES_BAD).encode()
        return rng.choice(BAD_UTF8)

    # -- parameters and bodies by route --------------------------------------------------------

    def _no_params(self) -> tuple[list, bytes | None]:
        return [], None

    def _topic(self) -> tuple[list, bytes | None]:
        return self._param(b"topic", [self._name(TOPICS_OK)]), self._ignored_body()

    def _channel(self) -> tuple[list, bytes | None]:
        params = self._param(b"topic", [self._name(TOPICS_OK)])
        params += self._param(b"channel", [self._name(CHANNELS_OK)])
        if self.rng.random() < 0.2:
            self.rng.shuffle(params)
        return params, self._ignored_body()

    def _ignored_body(self) -> bytes | None:
        return self.rng.choice([None] * 6 + [b"ignored", b"z" * 5000])

    def _stats(self) -> tuple[list, bytes | None]:
        rng = self.rng
        params = self._param(b"format", FORMATS)
        if rng.random() < 0.5:
            params += self._param(b"topic", [self._name(TOPICS_OK)])
        if rng.random() < 0.3:
            params += self._param(b"channel", [self._name(CHANNELS_OK)])
        params += self._param(b"include_clients", BOOLS)
        params += self._param(b"include_mem", BOOLS)
        rng.shuffle(params)
        return params, None

    def _pub(self) -> tuple[list, bytes | None]:
        rng = self.rng
        params = self._param(b"topic", [self._name(TOPICS_OK)])
        if rng.random() < 0.3:
            params += self._param(b"defer", DEFERS)
        return params, self._pub_body()

    def _pub_body(self) -> bytes | None:
        rng = self.rng
        size = rng.choice([0, 1, 5, 50, MAX_MSG, MAX_MSG + 1, MAX_BODY + 1, 20_000])
        if rng.random() < 0.05:
            return None
        return rng.randbytes(size) if rng.random() < 0.3 else b"m" * size

    def _mpub(self) -> tuple[list, bytes | None]:
        rng = self.rng
        params = self._param(b"topic", [self._name(TOPICS_OK)])
        if rng.random() < 0.4:
            params += self._param(b"binary", BOOLS)
        # nsqd reads the first `binary`: true unless it is false or 0
        modes = [(v or b"") not in (b"false", b"0") for k, v in params if k == b"binary"]
        binary = modes[0] if modes else False
        if rng.random() < 0.1:
            binary = not binary  # the other format's body
        return params, self._binary_body() if binary else self._text_body()

    def _text_body(self) -> bytes:
        rng = self.rng
        sizes = [0, 1, 3, MAX_MSG - 1, MAX_MSG, MAX_MSG + 1]
        lines = [b"l" * rng.choice(sizes) for _ in range(rng.randrange(12))]
        if rng.random() < 0.15:  # at --max-body-size exactly, or one past it
            lines = [b"z" * (MAX_MSG - 1)] * 10 + ([b""] if rng.random() < 0.5 else [b"z"])
        body = rng.choice([b"\n", b"\r\n"]).join(lines)
        return body + (b"\n" if rng.random() < 0.3 else b"")

    def _binary_body(self) -> bytes:
        rng = self.rng
        sizes = [0, 1, 4, MAX_MSG, MAX_MSG + 1]
        bodies = [rng.randbytes(rng.choice(sizes)) for _ in range(rng.randrange(6))]
        count = len(bodies)
        if rng.random() < 0.2:
            count = rng.choice([0, -1, count + 1, max(count - 1, 0), 2**31 - 1, 200, 10_000])
        body = struct.pack(">i", count) + b"".join(struct.pack(">i", len(b)) + b for b in bodies)
        roll = rng.random()
        if roll < 0.1:
            return body[: rng.randrange(len(body) + 1)]  # cut anywhere
        if roll < 0.15:
            return body + b"trailing"
        return body

    def _config_get(self) -> tuple[list, bytes | None]:
        return [], None

    def _config_put(self) -> tuple[list, bytes | None]:
        rng = self.rng
        return [], rng.choice(LOG_LEVELS + LOOKUPD_VALUES + [b"5", b"x" * (MAX_MSG + 1), None])

    def _set_block_rate(self) -> tuple[list, bytes | None]:
        # a form body is read for `rate` where the Content-Type header says so
        bodies = [None, None, None, b"rate=5", b"rate=x&a=%", b"a=%", b"rate=%ff;"]
        return self._param(b"rate", RATES), self.rng.choice(bodies)


ACTIONS = ("create", "delete", "empty", "pause", "unpause")
