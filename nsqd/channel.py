"""Channel: one consumer group of a topic. Its clients share its messages.

Hot path, all synchronous (no task switch per message): `put` hands a message to the next
subscribed client with credit (round robin) or queues it; FIN/REQ/TOUCH act on the in-flight
set; `refresh` runs when a client's credit changes and drains the queue into it. The daemon's
scanner calls `scan` to time out in-flight messages and release deferred ones."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import trio

from protocol import ErrorCode, NSQError

from .backlog import Backlog
from .e2e import E2ELatency
from .message import Message
from .timeouts import TimeoutQueue

if TYPE_CHECKING:
    from .client import Client
    from .topic import Topic


class Channel:
    def __init__(self, topic: Topic, name: str) -> None:
        self.topic = topic
        self.name = name
        self.ephemeral = name.endswith("#ephemeral")
        opts = topic.daemon.options
        overflow = topic.daemon.new_overflow(f"{topic.name}:{name}", self.ephemeral)
        self.backlog = Backlog(opts.mem_queue_size, overflow)
        # --mem-queue-size=0: every message goes through the disk queue, as in nsqd (ephemeral
        # channels, which have no disk, still hand messages to a waiting consumer).
        self._hand_off = opts.mem_queue_size > 0 or self.ephemeral
        self.in_flight = TimeoutQueue()
        self.deferred = TimeoutQueue()
        self.clients: dict[int, Client] = {}
        self._ready: deque[Client] = deque()
        self.paused = False
        self.deleted = False
        self.message_count = 0
        self.requeue_count = 0
        self.timeout_count = 0
        self.max_msg_timeout = opts.max_msg_timeout
        percentiles = opts.e2e_processing_latency_percentile
        self.e2e_latency = (
            E2ELatency(opts.e2e_processing_latency_window_time, percentiles)
            if percentiles
            else None
        )
        self.max_consumers = opts.max_channel_consumers

    def __repr__(self) -> str:
        return f"Channel({self.topic.name}:{self.name})"

    @property
    def depth(self) -> int:
        return len(self.backlog)

    # -- messages in -----------------------------------------------------------------------

    def put(self, msg: Message) -> None:
        """A new message from the topic."""
        self.put_many([msg])

    def put_many(self, msgs: list[Message]) -> None:
        """New messages from the topic (an MPUB, or a chunk of the topic's backlog)."""
        self.message_count += len(msgs)
        if self._ready and not self.backlog and not self.paused and self._hand_off:
            msgs = self._hand_out(msgs)  # straight to consumers with credit
            if not msgs:
                return
        self.backlog.extend(msgs)
        if self._ready:
            self._dispatch()

    def put_deferred(self, msg: Message, delay_ms: int) -> None:
        self.message_count += 1
        self.deferred.add(msg, trio.current_time() + delay_ms / 1000)

    def _requeue(self, msg: Message) -> None:
        self.backlog.put(msg)
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand queued messages to the clients in the ready rotation."""
        ready, backlog = self._ready, self.backlog
        while ready and backlog and not self.paused:
            credit = sum(c.credit() for c in ready)
            if credit <= 0:
                return
            taken = backlog.take(credit)
            if not taken:
                return  # a disk depth that was off: nothing more to read
            rest = self._hand_out(taken)
            if rest:
                backlog.push_front(rest)
                return

    def _hand_out(self, msgs: list[Message]) -> list[Message]:
        """Give `msgs` to ready clients round robin, a fair share each; return what is left."""
        ready = self._ready
        now = trio.current_time()
        while ready and msgs:
            client = ready.popleft()
            credit = client.credit()
            if credit <= 0:
                client.in_ready = False
                continue
            n = min(credit, max(1, len(msgs) // (len(ready) + 1)))
            if n >= len(msgs):
                batch, msgs = msgs, []
            else:
                batch, msgs = msgs[:n], msgs[n:]
            client.deliver_many(batch, now)
            if client.credit() > 0:
                ready.append(client)
            else:
                client.in_ready = False
        return msgs

    # -- clients ---------------------------------------------------------------------------

    def add_client(self, client: Client) -> None:
        if self.max_consumers and len(self.clients) >= self.max_consumers:
            raise NSQError(
                ErrorCode.E_SUB_FAILED,
                f"SUB failed consumers for {self.topic.name}:{self.name} "
                f"exceeds limit of {self.max_consumers}",
            )
        self.clients[client.id] = client

    def remove_client(self, client: Client) -> None:
        # Its in-flight messages stay in flight until their timeout, as in nsqd.
        if self.clients.pop(client.id, None) is None:
            return
        client.in_ready = False
        if self.ephemeral and not self.clients and not self.deleted:
            self.topic.delete_channel(self.name)

    def refresh(self, client: Client) -> None:
        """The client's credit may have changed: (re)join the rotation, hand out the queue."""
        if client.credit() > 0 and not client.in_ready:
            client.in_ready = True
            self._ready.append(client)
        self._dispatch()

    def refresh_all(self) -> None:
        for client in list(self.clients.values()):
            self.refresh(client)

    # -- FIN / REQ / TOUCH -----------------------------------------------------------------

    @staticmethod
    def _not_yours(msg: Message | None, msg_id: bytes, verb: str, code: ErrorCode) -> NSQError:
        reason = "ID not in flight" if msg is None else "client does not own message"
        return NSQError(code, f"{verb} {msg_id.decode('latin-1')} failed {reason}")

    def _take(self, client: Client, msg_id: bytes, verb: str, code: ErrorCode) -> Message:
        msg = self.in_flight.get(msg_id)
        if msg is None or msg.client is not client:
            raise self._not_yours(msg, msg_id, verb, code)
        return msg

    def finish(self, client: Client, msg_ids: list[bytes]) -> list[NSQError]:
        """FIN each id; the E_FIN_FAILED errors (non-fatal) come back in order."""
        by_id = self.in_flight.by_id
        errors: list[NSQError] = []
        done = 0
        for msg_id in msg_ids:
            msg = by_id.get(msg_id)
            if msg is None or msg.client is not client:
                errors.append(self._not_yours(msg, msg_id, "FIN", ErrorCode.E_FIN_FAILED))
                continue
            del by_id[msg_id]
            msg.client = None
            done += 1
            if self.e2e_latency is not None:
                self.e2e_latency.insert(msg.timestamp)
        client.in_flight -= done
        client.finish_count += done
        return errors

    def requeue(self, client: Client, msg_id: bytes, delay_ms: int) -> None:
        msg = self._take(client, msg_id, "REQ", ErrorCode.E_REQ_FAILED)
        del self.in_flight.by_id[msg_id]
        msg.client = None
        client.in_flight -= 1
        client.requeue_count += 1
        self.requeue_count += 1
        if delay_ms > 0:
            self.deferred.add(msg, trio.current_time() + delay_ms / 1000)
        else:
            self._requeue(msg)

    def touch(self, client: Client, msg_id: bytes) -> None:
        msg = self._take(client, msg_id, "TOUCH", ErrorCode.E_TOUCH_FAILED)
        # Never past delivery + max-msg-timeout; the heap entry catches up lazily.
        deadline = trio.current_time() + client.msg_timeout
        msg.deadline = min(deadline, msg.delivered_at + self.max_msg_timeout)

    # -- the scanner's work ----------------------------------------------------------------

    def scan(self, now: float) -> bool:
        """Time out expired in-flight messages and release due deferred ones; True if any."""
        dirty = False
        for msg in self.in_flight.pop_expired(now):
            dirty = True
            self.timeout_count += 1
            owner = msg.client
            msg.client = None
            self._requeue(msg)
            if owner is not None:
                owner.in_flight -= 1
                owner.timeout_count += 1
                if owner.channel is self:
                    self.refresh(owner)
        for msg in self.deferred.pop_expired(now):
            dirty = True
            self._requeue(msg)
        return dirty

    # -- admin -----------------------------------------------------------------------------

    def pause(self) -> None:
        self.paused = True

    def unpause(self) -> None:
        self.paused = False
        self.refresh_all()

    def empty(self) -> None:
        """Drop queued, in-flight and deferred messages (later FINs for them fail)."""
        self.backlog.clear()
        self.in_flight.clear()
        self.deferred.clear()
        for client in self.clients.values():
            client.in_flight = 0
        self.refresh_all()

    def close_clients(self) -> None:
        for client in list(self.clients.values()):
            client.close()

    def close(self) -> None:
        """Clean shutdown: queued, in-flight and deferred messages all go to disk (deferred ones
        lose their delay, as in nsqd)."""
        self.close_clients()
        extra = self.in_flight.clear() + self.deferred.clear()
        for msg in extra:
            msg.client = None
        self.backlog.close(extra)

    def delete(self) -> None:
        self.deleted = True
        self.close_clients()
        self.in_flight.clear()
        self.deferred.clear()
        self.backlog.delete()
