"""Mutated byte streams for every front-end of a daemon, and the client that delivers them
(test_fuzz.py; `python -m tests.e2e.fuzz_streams` measures a daemon's peak memory under many).

A stream is a well-formed seed (V2 commands, HTTP requests, RESP commands) put through a few
random mutations (bit flips, interesting integers where a size goes, inserted, deleted,
duplicated or cut ranges, splices of two seeds). Behind snappy or deflate, half the streams are
mutated before compression (the V2 parser's input) and half after (the codec's). Each is sent on
its own connection, which then half-closes and reads what the daemon answers until it closes
(bounded), so no stream leaves its connection open for the next ones. Everything is drawn from
one random.Random(seed): a seed replays the same streams."""

from __future__ import annotations

import json
import random
import socket
import ssl
import struct
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

import snappy

HOST = "127.0.0.1"
MAX_STREAM = 4096
DRAIN_S = 1.0  # how long a stream's connection may take to close after its half-close
PIECE_GAP_S = 0.002
_I32 = struct.Struct(">i")
# topics and channels the seeds use: few, so the fuzz does not measure topic creation
TOPICS = (b"fuzz", b"fuzz2")
CHANNELS = (b"c", b"fuzz#ephemeral")


def _cmd(line: bytes, body: bytes | None = None) -> bytes:
    return line + b"\n" + (b"" if body is None else _I32.pack(len(body)) + body)


def _mpub(bodies: list[bytes]) -> bytes:
    return _I32.pack(len(bodies)) + b"".join(_I32.pack(len(b)) + b for b in bodies)


def _identify(**fields: object) -> bytes:
    return _cmd(b"IDENTIFY", json.dumps(fields).encode())


def v2_seeds() -> list[bytes]:
    t, t2, ch = TOPICS[0], TOPICS[1], CHANNELS[0]
    mid = b"0123456789abcdef"
    return [
        _cmd(b"PUB " + t, b"hello"),
        _cmd(b"PUB " + t2, b"x" * 300),
        _cmd(b"MPUB " + t, _mpub([b"a", b"bb", b"ccc"])),
        _cmd(b"DPUB " + t + b" 1000", b"later"),
        _cmd(b"SUB " + t + b" " + ch) + b"RDY 10\n" + b"FIN " + mid + b"\n",
        _cmd(b"SUB " + t2 + b" " + CHANNELS[1]) + b"RDY 1\nREQ " + mid + b" 0\nTOUCH " + mid,
        _identify(client_id="fuzz", heartbeat_interval=1000, feature_negotiation=True),
        _identify(output_buffer_size=64, output_buffer_timeout=10, msg_timeout=1000),
        _identify(sample_rate=50, user_agent="fuzz/1.0") + _cmd(b"PUB " + t, b"y"),
        b"NOP\nNOP\nCLS\n",
        _cmd(b"AUTH", b"secret"),
        _cmd(b"PUB " + t, b"z") * 4 + b"NOP\n",
    ]


def http_seeds() -> list[bytes]:
    def req(method: bytes, target: bytes, body: bytes = b"", headers: bytes = b"") -> bytes:
        length = b"Content-Length: %d\r\n" % len(body) if body or method == b"POST" else b""
        return b"%s %s HTTP/1.1\r\nHost: x\r\n%s%s\r\n%s" % (method, target, length, headers, body)

    chunked = b"Transfer-Encoding: chunked\r\n"
    return [
        req(b"GET", b"/ping"),
        req(b"GET", b"/stats?format=json&topic=fuzz"),
        req(b"GET", b"/info") + req(b"GET", b"/ping"),
        req(b"POST", b"/pub?topic=fuzz", b"hello"),
        req(b"POST", b"/pub?topic=fuzz&defer=100", b"later"),
        req(b"POST", b"/mpub?topic=fuzz", b"one\ntwo\nthree"),
        req(b"POST", b"/mpub?topic=fuzz2&binary=true", _mpub([b"a", b"bb"])),
        req(b"POST", b"/topic/create?topic=fuzz2")
        + req(b"POST", b"/channel/create?topic=fuzz2&channel=c"),
        b"POST /pub?topic=fuzz HTTP/1.1\r\nHost: x\r\n" + chunked + b"\r\n5\r\nhello\r\n0\r\n\r\n",
        req(b"POST", b"/pub?topic=fuzz", b"expect", b"Expect: 100-continue\r\n"),
        b"GET /ping HTTP/1.0\r\n\r\n",
        req(b"GET", b"/channel/empty?topic=fuzz&channel=c"),
    ]


def resp_seeds() -> list[bytes]:
    def cmd(*args: bytes) -> bytes:
        return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)

    return [
        cmd(b"PING"),
        cmd(b"SET", b"k", b"v") + cmd(b"GET", b"k"),
        cmd(b"INCR", b"n") + cmd(b"EXPIRE", b"n", b"10"),
        cmd(b"LPUSH", b"l", b"a", b"b") + cmd(b"RPOP", b"l"),
        cmd(b"BLPOP", b"empty", b"0.01"),
        cmd(b"HSET", b"h", b"f", b"v") + cmd(b"HGETALL", b"h"),
        cmd(b"MULTI") + cmd(b"SET", b"a", b"1") + cmd(b"EXEC"),
        b"PING\r\nECHO hi\r\n",
        cmd(b"DEL", b"k", b"l", b"h") + cmd(b"EXISTS", b"k"),
        cmd(b"HELLO", b"3") + cmd(b"CLIENT", b"SETNAME", b"fuzz"),
        # the bridge to NSQ: in a group these ask the other workers
        cmd(b"RPUSH", b"topic:fuzz", b"a", b"b") + cmd(b"LLEN", b"channel:fuzz:c"),
        cmd(b"LPOP", b"channel:fuzz:c", b"2") + cmd(b"RPOP", b"channel:fuzz:c"),
        cmd(b"LMPOP", b"2", b"l", b"channel:fuzz:c", b"LEFT", b"COUNT", b"3"),
        cmd(b"LMOVE", b"channel:fuzz:c", b"l", b"LEFT", b"RIGHT"),
        cmd(b"BLPOP", b"channel:fuzz:c", b"0.01") + cmd(b"TYPE", b"topic:fuzz"),
    ]


# -- mutations -----------------------------------------------------------------------------------

_INTERESTING = (0, 1, 4, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 1 << 20, 0x7FFFFFFF, -1, -(1 << 31))
_BYTES = b'\x00\x01\x7f\x80\xff\n\r :*$-\\{}"'


def _flip(rng: random.Random, data: bytearray, _: list[bytes]) -> None:
    for _i in range(rng.randint(1, 8)):
        pos = rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8)


def _byte(rng: random.Random, data: bytearray, _: list[bytes]) -> None:
    data[rng.randrange(len(data))] = rng.choice(_BYTES)


def _int32(rng: random.Random, data: bytearray, _: list[bytes]) -> None:
    pos = rng.randrange(len(data))
    data[pos : pos + 4] = struct.pack(">i", rng.choice(_INTERESTING))


def _number(rng: random.Random, data: bytearray, _: list[bytes]) -> None:
    pos = rng.randrange(len(data))
    data[pos:pos] = str(rng.choice(_INTERESTING)).encode()


def _insert(rng: random.Random, data: bytearray, _: list[bytes]) -> None:
    pos = rng.randrange(len(data) + 1)
    data[pos:pos] = rng.randbytes(rng.randint(1, 64))


def _delete(rng: random.Random, data: bytearray, _: list[bytes]) -> None:
    pos = rng.randrange(len(data))
    del data[pos : pos + rng.randint(1, 32)]


def _duplicate(rng: random.Random, data: bytearray, _: list[bytes]) -> None:
    pos = rng.randrange(len(data))
    piece = data[pos : pos + rng.randint(1, 128)]
    data[pos:pos] = piece * rng.randint(1, 8)


def _truncate(rng: random.Random, data: bytearray, _: list[bytes]) -> None:
    del data[rng.randrange(len(data)) :]


def _splice(rng: random.Random, data: bytearray, seeds: list[bytes]) -> None:
    other = rng.choice(seeds)
    data[rng.randrange(len(data) + 1) :] = other[rng.randrange(len(other)) :]


_MUTATORS: tuple[Callable[[random.Random, bytearray, list[bytes]], None], ...] = (
    _flip, _byte, _int32, _number, _insert, _delete, _duplicate, _truncate, _splice,
)  # fmt: skip


def mutate(rng: random.Random, seeds: list[bytes], prefix: bytes = b"") -> bytes:
    """A seed (or two or three concatenated) put through 0-4 mutations; 1 in 10 unmutated."""
    data = bytearray(prefix + b"".join(rng.choice(seeds) for _ in range(rng.randint(1, 3))))
    if rng.random() >= 0.1:
        for _ in range(rng.randint(1, 4)):
            if not data:
                break
            rng.choice(_MUTATORS)(rng, data, seeds)
    return bytes(data[:MAX_STREAM])


# -- delivery -----------------------------------------------------------------------------------


@dataclass
class Target:
    """One front-end of a daemon: its port, the seeds, and the layers to negotiate first."""

    name: str
    port: int
    seeds: list[bytes]
    layer: str = ""  # "", "snappy", "deflate", "tls" (V2 upgrades) or "https"
    v2: bool = False


def _read_frame(sock: socket.socket | ssl.SSLSocket) -> bytes:
    """One V2 frame (IDENTIFY's answer), whole."""
    data = b""
    while len(data) < 4 or len(data) < 4 + _I32.unpack_from(data)[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed during IDENTIFY")
        data += chunk
    return data


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in pairwise(bounds) if b > a]


def _compress(layer: str, data: bytes) -> bytes:
    if layer == "snappy":
        return snappy.StreamCompressor().add_chunk(data)
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)


@dataclass
class Fuzzer:
    seed: int
    tls_context: ssl.SSLContext | None = None
    counts: Counter[str] = field(default_factory=Counter)  # streams per front-end
    lingering: Counter[str] = field(default_factory=Counter)  # still open after DRAIN_S

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def stream(self, target: Target) -> None:
        """Draw one stream for `target` and deliver it."""
        rng = self.rng
        if target.v2 and not target.layer:
            payload = mutate(rng, target.seeds, b"  V2" if rng.random() < 0.95 else b"")
        else:
            payload = mutate(rng, target.seeds)
        if target.layer in ("snappy", "deflate"):
            if rng.random() < 0.5:  # the codec's input is mutated, not the parser's
                compressed = _compress(target.layer, b"".join(rng.sample(target.seeds, 2)))
                payload = mutate(rng, [compressed])
            else:
                payload = _compress(target.layer, payload)
        # 1 in 4 goes out in pieces, a moment apart: the parsers' state between reads
        cuts = sorted(rng.sample(range(1, len(payload)), min(3, max(len(payload) - 1, 0))))
        pieces = _split(payload, cuts) if rng.random() < 0.25 else [payload]
        self.counts[target.name] += 1
        if not self._deliver(target, pieces):
            self.lingering[target.name] += 1

    def _deliver(self, target: Target, pieces: list[bytes]) -> bool:
        """Send the pieces, half-close, read until the daemon closes: False if it did not
        within DRAIN_S."""
        sock: socket.socket | ssl.SSLSocket = socket.create_connection((HOST, target.port), 5)
        try:
            sock = self._negotiate(sock, target)
            try:
                for n, piece in enumerate(pieces):
                    if n:
                        time.sleep(PIECE_GAP_S)
                    sock.sendall(piece)
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                return True  # closed already: what it had sent was enough to refuse
            end = time.monotonic() + DRAIN_S
            while (left := end - time.monotonic()) > 0:
                sock.settimeout(left)
                if not sock.recv(65536):
                    return True
            return False
        except TimeoutError:
            return False
        except (ConnectionResetError, ssl.SSLError):
            return True
        finally:
            sock.close()

    def _negotiate(self, sock: socket.socket, target: Target) -> socket.socket | ssl.SSLSocket:
        layer = target.layer
        if layer == "https":
            assert self.tls_context is not None
            return self.tls_context.wrap_socket(sock, server_hostname=HOST)
        if not layer:
            return sock
        fields = {"feature_negotiation": True, "tls_v1": layer == "tls"}
        if layer != "tls":
            fields[layer] = True
        sock.sendall(b"  V2" + _identify(**fields))
        answer = _read_frame(sock)
        if layer != "tls":
            return sock  # the upgrade's OK comes compressed: read with the rest
        assert b'"tls_v1":true' in answer, answer
        assert self.tls_context is not None
        tls = self.tls_context.wrap_socket(sock, server_hostname=HOST)
        _read_frame(tls)  # the OK
        return tls


def vm_hwm_mib(pid: int) -> float:
    """Peak resident memory of process `pid` so far (MiB)."""
    with open(f"/proc/{pid}/status") as f:
        return int(f.read().split("VmHWM:")[1].split()[0]) / 1024


def targets(tcp: int, http: int, https: int | None = None, resp: int | None = None) -> list[Target]:
    v2 = v2_seeds()
    found = [
        Target("v2", tcp, v2, v2=True),
        Target("v2+snappy", tcp, v2, "snappy", v2=True),
        Target("v2+deflate", tcp, v2, "deflate", v2=True),
        Target("v2+tls", tcp, v2, "tls", v2=True),
        Target("http", http, http_seeds()),
    ]
    if https is not None:
        found.append(Target("https", https, http_seeds(), "https"))
    if resp is not None:
        found.append(Target("resp", resp, resp_seeds()))
    return found
