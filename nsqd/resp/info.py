"""INFO as Redis 7.0 writes it: its sections in its order, the fields clients and test suites
read (redis_version, arch_bits, cluster_enabled, role, loading, db<n>...), `INFO` alone or
`default` for the default sections, `all`/`everything` for all, and any list of section names
(case-insensitive; an unknown name adds nothing). Values this front-end does not track are
Redis's idle values (no replication, no eviction, no modules)."""

from __future__ import annotations

import os
import platform
import resource
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .server import Frontend

Fields = dict[str, object]
VERSION = "7.0.0"  # the Redis whose replies these are (INFO, HELLO)
RUN_ID = os.urandom(20).hex()


def _server(fe: Frontend) -> Fields:
    uptime = int(time.time() - fe.started)
    uname = platform.uname()
    return {
        "redis_version": VERSION,
        "redis_git_sha1": "00000000",
        "redis_git_dirty": 0,
        "redis_build_id": "0",
        "redis_mode": "standalone",
        "os": f"{uname.system} {uname.release} {uname.machine}",
        "arch_bits": 64 if platform.architecture()[0] == "64bit" else 32,
        "monotonic_clock": "POSIX clock_gettime",
        "multiplexing_api": "epoll",
        "atomicvar_api": "c11-builtin",
        "gcc_version": "0.0.0",
        "process_id": os.getpid(),
        "process_supervised": "no",
        "run_id": RUN_ID,
        "tcp_port": fe.address[1] if fe.address else 0,
        "server_time_usec": time.time_ns() // 1000,
        "uptime_in_seconds": uptime,
        "uptime_in_days": uptime // 86400,
        "hz": 10,
        "configured_hz": 10,
        "lru_clock": int(time.time()) & ((1 << 24) - 1),
        "executable": "",
        "config_file": "",
        "io_threads_active": 0,
        "server_name": "trio-nsqd",
    }


def _clients(fe: Frontend) -> Fields:
    conns = fe.connections.values()
    return {
        "connected_clients": len(fe.connections),
        "cluster_connections": 0,
        "maxclients": 10000,
        "client_recent_max_input_buffer": 0,
        "client_recent_max_output_buffer": 0,
        "blocked_clients": sum(1 for c in conns if c.blocked),
        "tracking_clients": 0,
        "clients_in_timeout_table": 0,
    }


def _memory(fe: Frontend) -> Fields:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "used_memory": rss,
        "used_memory_human": f"{rss / 1048576:.2f}M",
        "used_memory_rss": rss,
        "used_memory_peak": rss,
        "maxmemory": 0,
        "maxmemory_human": "0B",
        "maxmemory_policy": "noeviction",
        "mem_fragmentation_ratio": "1.00",
        "mem_allocator": "libc",
        "lazyfree_pending_objects": 0,
    }


def _persistence(fe: Frontend) -> Fields:
    return {
        "loading": 0,
        "async_loading": 0,
        "rdb_changes_since_last_save": 0,
        "rdb_bgsave_in_progress": 0,
        "rdb_last_save_time": int(fe.started),
        "rdb_last_bgsave_status": "ok",
        "aof_enabled": 1,
        "aof_rewrite_in_progress": 0,
        "aof_rewrite_scheduled": 0,
        "aof_last_bgrewrite_status": "ok",
        "aof_last_write_status": "ok",
    }


def _stats(fe: Frontend) -> Fields:
    return {
        "total_commands_processed": 0,
        "instantaneous_ops_per_sec": 0,
        "rejected_connections": 0,
        "expired_keys": 0,
        "evicted_keys": 0,
        "keyspace_hits": 0,
        "keyspace_misses": 0,
        "pubsub_channels": len(fe.channels),
        "pubsub_patterns": len(fe.patterns),
        "total_blocking_keys": sum(len(ks.watched) for ks in fe.ks.dbs),
    }


def _replication(fe: Frontend) -> Fields:
    return {
        "role": "master",
        "connected_slaves": 0,
        "master_failover_state": "no-failover",
        "master_replid": RUN_ID,
        "master_replid2": "0" * 40,
        "master_repl_offset": 0,
        "second_repl_offset": -1,
        "repl_backlog_active": 0,
        "repl_backlog_size": 1048576,
        "repl_backlog_first_byte_offset": 0,
        "repl_backlog_histlen": 0,
    }


def _cpu(fe: Frontend) -> Fields:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "used_cpu_sys": f"{me.ru_stime:.6f}",
        "used_cpu_user": f"{me.ru_utime:.6f}",
        "used_cpu_sys_children": f"{kids.ru_stime:.6f}",
        "used_cpu_user_children": f"{kids.ru_utime:.6f}",
    }


def _none(fe: Frontend) -> Fields:
    return {}


def _cluster(fe: Frontend) -> Fields:
    return {"cluster_enabled": 0}


def _keyspace(fe: Frontend) -> Fields:
    return {
        f"db{i}": f"keys={len(ks.data)},expires={len(ks.expires)},avg_ttl=0"
        for i, ks in enumerate(fe.ks.dbs)
        if ks.data
    }


# name -> (title, fields, in `INFO` / `INFO default`), in Redis's order
SECTIONS: dict[str, tuple[str, Callable[[Frontend], Fields], bool]] = {
    "server": ("Server", _server, True),
    "clients": ("Clients", _clients, True),
    "memory": ("Memory", _memory, True),
    "persistence": ("Persistence", _persistence, True),
    "stats": ("Stats", _stats, True),
    "replication": ("Replication", _replication, True),
    "cpu": ("CPU", _cpu, True),
    "modules": ("Modules", _none, True),
    "commandstats": ("Commandstats", _none, False),
    "errorstats": ("Errorstats", _none, True),
    "latencystats": ("Latencystats", _none, False),
    "cluster": ("Cluster", _cluster, True),
    "keyspace": ("Keyspace", _keyspace, True),
}


def render(fe: Frontend, args: list[bytes]) -> bytes:
    """The INFO text for INFO's arguments (none: the default sections)."""
    names = {a.decode("latin-1").lower() for a in args} or {"default"}
    everything = bool(names & {"all", "everything"})
    default = "default" in names
    parts = []
    for name, (title, fields, in_default) in SECTIONS.items():
        if everything or (default and in_default) or name in names:
            lines = [f"# {title}"] + [f"{k}:{v}" for k, v in fields(fe).items()]
            parts.append("\r\n".join(lines) + "\r\n")
    return "\r\n".join(parts).encode()
