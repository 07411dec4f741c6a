"""One subscribed connection to one nsqd, read by its own thread.

The consumer opens several of these per nsqd (each with its share of the in-flight budget, as
go-nsq's max_in_flight does), because nsqd caps each connection's RDY at --max-rdy-count."""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import TYPE_CHECKING

from protocol.v2 import ErrorCode, FrameType, NSQError, decode_message
from protocol.v2 import encoders as commands
from protocol.v2.frames import HEARTBEAT
from protocol.v2.message import DecodedMessage

from .conn import USER_AGENT, Connection, ConnectionClosed, parse_error
from .http import Producer

if TYPE_CHECKING:
    from .consumer import Consumer

log = logging.getLogger("pyspark_nsq")


class Link:
    """A subscribed connection. `nsqd` names the daemon (the key of its messages' identity);
    `rdy` is this connection's share of the in-flight budget."""

    def __init__(self, consumer: Consumer, producer: Producer, index: int = 0) -> None:
        self.consumer = consumer
        self.producer = producer
        self.nsqd = producer.tcp
        self.index = index
        self.conn: Connection | None = None
        self.alive = False
        self.rdy = 0
        self.max_rdy = 0  # nsqd's --max-rdy-count, from IDENTIFY
        self.msg_timeout = consumer.opts.msg_timeout_ms / 1000
        self.thread: threading.Thread | None = None
        self.closing = False

    def __repr__(self) -> str:
        return f"<Link {self.nsqd}#{self.index} alive={self.alive} rdy={self.rdy}>"

    def connect(self) -> None:
        """Connect, IDENTIFY and SUB; the RDY share is set by the consumer (`start`)."""
        opts = self.consumer.opts
        conn, negotiated = self._connect(opts.msg_timeout_ms)
        try:
            self.max_rdy = int(negotiated.get("max_rdy_count") or opts.rdy)
            self.msg_timeout = int(negotiated.get("msg_timeout") or opts.msg_timeout_ms) / 1000
            conn.request(commands.sub(opts.topic, opts.channel))
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        self.alive = True

    def start(self, rdy: int, rdy_open: bool) -> None:
        self.rdy = rdy
        name = f"nsq-{self.nsqd}-{self.index}"
        thread = threading.Thread(target=self._run, name=name, daemon=True)
        thread.start()
        # seen by finish() only once started: a consumer closed from another thread while
        # the lookupd poll starts a link it found joined a thread not started yet (a
        # RuntimeError out of close(); CI, test_spark_lookupd, once)
        self.thread = thread
        if rdy_open:
            self.send(commands.rdy(self.rdy))

    def _connect(self, msg_timeout_ms: int | None) -> tuple[Connection, dict]:
        """Connect and IDENTIFY; a msg_timeout above nsqd's --max-msg-timeout is lowered to
        that maximum (asked for on a second connection)."""
        opts = self.consumer.opts
        settings: dict[str, object] = {
            "client_id": f"pyspark_nsq-{os.getpid()}",
            "hostname": socket.gethostname(),
            "user_agent": USER_AGENT,
            "feature_negotiation": True,
        }
        if msg_timeout_ms is not None:
            settings["msg_timeout"] = msg_timeout_ms
        conn = Connection(self.nsqd, timeout=opts.connect_timeout_ms / 1000)
        try:
            return conn, conn.connect(settings)
        except NSQError as exc:
            if msg_timeout_ms is None or exc.code != ErrorCode.E_BAD_BODY:
                raise
        probe, negotiated = self._connect(None)
        probe.close()
        limit = int(negotiated.get("max_msg_timeout") or 0)
        if not limit or limit >= msg_timeout_ms:
            raise NSQError(ErrorCode.E_BAD_BODY, f"msgTimeoutMs {msg_timeout_ms} refused")
        if self.index == 0:
            log.warning(
                "%s: msgTimeoutMs %d is above nsqd's --max-msg-timeout, using %d ms",
                self.nsqd,
                msg_timeout_ms,
                limit,
            )
        return self._connect(limit)

    def send(self, data: bytes) -> bool:
        conn = self.conn
        if conn is None or not self.alive:
            return False
        try:
            conn.send(data)
            return True
        except ConnectionClosed as exc:
            log.warning("%s: %s", self.nsqd, exc)
            self.close()
            return False

    def _run(self) -> None:
        conn = self.conn
        assert conn is not None
        try:
            while self.alive:
                messages: list[DecodedMessage] = []
                for frame in conn.recv_frames():
                    if frame.frame_type == FrameType.MESSAGE:
                        messages.append(decode_message(frame.data))
                    elif frame.frame_type == FrameType.ERROR:
                        err = parse_error(frame.data)
                        log.log(
                            logging.DEBUG if not err.fatal else logging.WARNING,
                            "%s: %s",
                            self.nsqd,
                            err,
                        )
                    elif frame.data == HEARTBEAT:
                        conn.send(commands.NOP)
                if messages:
                    self.consumer.on_messages(self, messages)
        except (ConnectionClosed, OSError, ValueError) as exc:
            if self.alive and not self.closing:
                log.warning("%s: connection lost: %s", self.nsqd, exc)
        finally:
            self.close()

    def finish(self, timeout: float = 2.0) -> None:
        """Close gracefully: end our side, let nsqd read every command sent so far (a reset
        could drop them) and close its side, reading what it still sends meanwhile."""
        if self.conn is not None and self.alive:
            self.closing = True
            self.conn.shutdown_write()
            if self.thread is not None and self.thread is not threading.current_thread():
                self.thread.join(timeout)
        self.close()

    def close(self) -> None:
        was_alive, self.alive = self.alive, False
        if self.conn is not None:
            self.conn.close()
        if was_alive:
            self.consumer.on_link_closed(self)
