"""The reactor under awkward clients: a big reply to a client that does not read waits for
EPOLLOUT without holding up anyone else, then arrives whole, and that client is not read
meanwhile; many short blocking waits served
at once leave nothing behind (INFO's blocked_clients is 0), and the timeouts of the waits that
come after them still fire (their deadlines share the reactor's heap with the spent ones)."""

from __future__ import annotations

import os
import socket
import time

import pytest

from conformance.resp.wire import Conn, encode


def test_big_reply_to_a_slow_reader_blocks_no_one(pair) -> None:
    _, ours = pair.by_kind["plain"]
    setup = Conn(ours.port)
    setup.send(encode([b"DEL", b"big"]))
    setup.reply()
    elem = b"e" * 10_000
    for _ in range(20):
        setup.send(encode([b"RPUSH", b"big", *[elem] * 100]))
        assert setup.reply().startswith(b":")
    slow = socket.create_connection(("127.0.0.1", ours.port))
    slow.sendall(encode([b"LRANGE", b"big", b"0", b"-1"]) + encode([b"LLEN", b"big"]))
    time.sleep(0.3)  # 20 MB: the socket buffers fill, the rest waits for EPOLLOUT
    t0 = time.monotonic()
    setup.send(encode([b"PING"]))
    assert setup.reply() == b"+PONG\r\n"
    assert time.monotonic() - t0 < 1.0
    got = bytearray()
    slow.settimeout(10)
    expected_len = len(b"*2000\r\n") + 2000 * (len(b"$10000\r\n") + 10_000 + 2) + len(b":2000\r\n")
    while len(got) < expected_len:
        chunk = slow.recv(1 << 20)
        assert chunk, len(got)
        got += chunk
    assert got.startswith(b"*2000\r\n$10000\r\neee") and got.endswith(b"e\r\n:2000\r\n")
    assert len(got) == expected_len
    slow.close()
    setup.close()


def test_a_pipeline_that_never_reads_is_not_read_either(ours) -> None:
    """Its replies wait for EPOLLOUT and its commands in the kernel's buffers: they were read
    into its parser up to QUERY_MAX (1 GiB) while it read nothing, one client's way to grow the
    daemon by a gigabyte (here: 64 MB of LRANGEs taken whole in a few seconds)."""
    server = ours.start()
    setup = Conn(server.port)
    setup.send(encode([b"RPUSH", b"big", *[b"e" * 1000] * 100]))
    assert setup.reply() == b":100\r\n"
    slow = socket.create_connection(("127.0.0.1", server.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.settimeout(2)
    chunk = encode([b"LRANGE", b"big", b"0", b"-1"]) * 2000
    taken = 0
    try:
        while taken < 64 << 20:
            slow.sendall(chunk)
            taken += len(chunk)
    except TimeoutError:
        pass
    assert taken < 16 << 20, f"{taken >> 20} MB of commands taken from a client that reads none"
    setup.send(encode([b"PING"]))
    assert setup.reply() == b"+PONG\r\n"
    slow.close()
    setup.close()


def test_many_short_waits_leave_nothing_behind(pair) -> None:
    _, ours = pair.by_kind["plain"]
    waiter, pusher = Conn(ours.port), Conn(ours.port)
    for i in range(300):
        waiter.send(encode([b"BLPOP", b"w", b"30"]))
        pusher.send(encode([b"RPUSH", b"w", b"%d" % i]))
        assert pusher.reply() == b":1\r\n"
        assert waiter.reply() == b"*2\r\n$1\r\nw\r\n$%d\r\n%d\r\n" % (len(b"%d" % i), i)
    waiter.send(encode([b"INFO"]))
    assert b"blocked_clients:0\r\n" in waiter.reply()
    for key in (b"w", b"w2"):  # then waits that nothing serves end at their timeout
        waiter.send(encode([b"BLPOP", key, b"0.2"]))
        assert waiter.reply(timeout=4) == b"*-1\r\n"
    pusher.send(encode([b"RPUSH", b"w", b"late"]))  # no waiter left to take it
    assert pusher.reply() == b":1\r\n"
    waiter.send(encode([b"LPOP", b"w"]))
    assert waiter.reply() == b"$4\r\nlate\r\n"
    waiter.close()
    pusher.close()


def test_clean_stop_with_blocked_and_idle_clients(ours) -> None:
    server = ours.start()
    blocked, idle = Conn(server.port), Conn(server.port)
    blocked.send(encode([b"BLPOP", b"never", b"0"]))
    idle.send(encode([b"RPUSH", b"kept", b"x"]))
    assert idle.reply() == b":1\r\n"
    time.sleep(0.1)
    t0 = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - t0 < 5
    assert blocked.until_closed(2).endswith(b"<closed>")
    blocked.close()
    idle.close()


def _epolls(pid: int) -> dict[int, set[int]]:
    """The process's epoll fds -> the fds each one watches (from /proc)."""
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target == "anon_inode:[eventpoll]":
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                found[int(fd)] = {int(line.split()[1]) for line in info if line.startswith("tfd:")}
    return found


def _v2_answered(port: int, commands: bytes) -> socket.socket:
    """A V2 connection whose first command (a PUB, a SUB) was answered OK."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn.sendall(b"  V2" + commands)
    assert conn.recv(100) == b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    return conn


def test_one_reactor_serves_tcp_http_and_resp(ours) -> None:
    """The daemon runs one epoll reactor for its three front-ends: with a publisher on each
    (TCP PUB, HTTP /pub kept alive, RESP RPUSH) the process has trio's epoll set and the
    reactor's, which watches the three connections and its bell (an eventfd), and the loop's
    probe of trio (a set that watches trio's set alone)."""
    server = ours.start()
    tcp = _v2_answered(server.tcp_port, b"PUB t\n\x00\x00\x00\x01x")
    http = socket.create_connection(("127.0.0.1", server.http_port), timeout=5)
    http.sendall(b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\ny")
    assert http.recv(1000).startswith(b"HTTP/1.1 200 OK")
    resp = Conn(server.port)
    resp.send(encode([b"RPUSH", b"k", b"v"]))
    assert resp.reply() == b":1\r\n"
    time.sleep(0.2)  # the HTTP connection goes back to the reactor after its answer
    epolls = _epolls(server.proc.pid)
    assert len(epolls) == 3, epolls
    # trio's set watches the reactor's (trio sleeps on it), the probe watches trio's alone,
    # the reactor's watches no epoll
    (probe,) = [
        fd for fd, watched in epolls.items() if len(watched) == 1 and watched < epolls.keys()
    ]
    (trio_set,) = epolls[probe]
    assert epolls[trio_set] & epolls.keys(), epolls
    (reactor_set,) = epolls.keys() - {trio_set, probe}
    assert epolls[trio_set] & epolls.keys() == {reactor_set}, epolls
    watched = epolls[reactor_set]
    assert len(watched) == 4, epolls
    for conn in (tcp, http):
        conn.close()
    resp.close()


def test_a_plain_tcp_consumer_stays_in_the_reactor(ours) -> None:
    """A plain TCP consumer (SUB, RDY, messages, FIN) is watched by the reactor's epoll set,
    not by trio's (where a connection with tasks of its own waits): its commands are read in
    the loop's passes like a publisher's."""
    server = ours.start()
    consumer = _v2_answered(server.tcp_port, b"SUB t c\nRDY 10\n")
    publisher = _v2_answered(server.tcp_port, b"PUB t\n\x00\x00\x00\x01x")
    frame = consumer.recv(100)
    assert frame[4:8] == b"\x00\x00\x00\x02" and frame.endswith(b"x"), frame  # a message
    consumer.sendall(b"FIN " + frame[18:34] + b"\n")
    time.sleep(0.2)
    consumer.setblocking(False)
    with pytest.raises(BlockingIOError):  # the FIN taken: no E_FIN_FAILED
        consumer.recv(100)
    epolls = _epolls(server.proc.pid)
    (reactor_set,) = [fd for fd, watched in epolls.items() if not watched & epolls.keys()]
    # the bell, the publisher and the consumer; trio's set watches none of the two
    assert len(epolls[reactor_set]) == 3, epolls
    others = set().union(*(w for fd, w in epolls.items() if fd != reactor_set))
    assert not others & epolls[reactor_set], epolls
    for conn in (consumer, publisher):
        conn.close()
