"""Who a worker is: its index in the group (given by the supervisor in the environment), its
partition of --data-path, its node id (message ids carry it, as nsqd's carry --node-id) and the
file in which it tells its peers where its private link listens."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..config.options import WORKER_ENV, Options

ENV = WORKER_ENV  # "index/count", set by the supervisor for each worker it starts
# the group's link secret, drawn by the supervisor once: a worker's links AUTH with it at its
# peers (with --auth-http-address), which grant it everything without asking an auth server
SECRET_ENV = "NSQD_GROUP_SECRET"
# when the group started (unix seconds): every worker's start_time in /stats, /info and
# /metrics, the group's whichever worker answers and however often one was started again
STARTED_ENV = "NSQD_GROUP_STARTED"
# a worker's end of the socket pair on which it reports its topics and channels to the
# supervisor, which registers the group with nsqlookupd once (nsqd.group.lookupd)
LOOKUPD_FD_ENV = "NSQD_GROUP_LOOKUPD_FD"
# set for a worker started again: it takes the supervisor's first word (the nsqlookupd addresses
# in effect, maybe changed by a PUT while it was down) before it listens
LOOKUPD_HELLO_ENV = "NSQD_GROUP_LOOKUPD_HELLO"
LINK_AGENT = "trio-nsqd-group-link"  # the user_agent a peer's link identifies with


@dataclass(frozen=True, slots=True)
class Identity:
    index: int
    count: int
    group_path: str  # the --data-path given: the group's; each worker has a folder in it
    secret: bytes = b""  # the group's link secret (SECRET_ENV)
    started: int = 0  # the group's start (STARTED_ENV); 0: this process's

    @property
    def data_path(self) -> str:
        return os.path.join(self.group_path, f"worker-{self.index}")

    def link_file(self, index: int) -> str:
        return os.path.join(self.group_path, f"worker-{index}.link")

    @property
    def peers(self) -> list[int]:
        return [i for i in range(self.count) if i != self.index]


def from_environment(opts: Options) -> Identity | None:
    """This process's identity when the supervisor started it, else None (the supervisor)."""
    text = os.environ.get(ENV)
    if not text:
        return None
    index, _, count = text.partition("/")
    group_path = os.path.abspath(opts.data_path or os.getcwd())
    secret = os.environ.get(SECRET_ENV, "").encode()
    started = int(os.environ.get(STARTED_ENV) or 0)
    return Identity(int(index), int(count), group_path, secret, started)


CURRENT: list[Identity] = []  # this process's, once it became a worker


def become(identity: Identity, opts: Options) -> None:
    """Turn the group's options into this worker's: its own partition (data directory), node
    id (node id + index, mod 1024: two workers never make the same message id) and listeners
    that share their ports with the other workers."""
    from ..net import listeners

    os.makedirs(identity.data_path, exist_ok=True)
    CURRENT[:] = [identity]
    listeners.share_ports()
    # GET /config answers these as given, from every worker (not the partition, nor node
    # id + index), as one process would
    opts.given.update(data_path=opts.data_path, node_id=opts.node_id)
    opts.values["data_path"] = identity.data_path
    opts.values["node_id"] = (opts.node_id + identity.index) % 1024


def refusal(opts: Options) -> str:
    """Why these options cannot run as a group ("" when they can)."""
    # a kernel's port: each worker would bind another (worker 0's Redis one, each restart)
    for name in ("tcp_address", "http_address", "https_address", "resp_address"):
        address = opts.values[name]
        if address and address.rpartition(":")[2] in ("", "0"):
            flag = "--" + name.replace("_", "-")
            return f"--workers={opts.workers} needs a fixed port for {flag}, not {address}"
    return ""


def link_address(link_file: str, line: int) -> tuple[str, int] | None:
    """Where a worker's link (line 0) or private HTTP (line 1) listens, from its link file
    (None before it wrote it, or without that line: no HTTP). Read again each time: a
    restarted worker moves."""
    try:
        with open(link_file) as f:
            host, _, port = f.read().split()[line].rpartition(":")
        return host, int(port)
    except (OSError, ValueError, IndexError):
        return None
