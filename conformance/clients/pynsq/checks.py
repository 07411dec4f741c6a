"""pynsq 0.9.1 versions of the client conformance checks (see conformance/clients/README.md).

pynsq is callback-based on tornado's IOLoop; with tornado 6 that loop is asyncio's, so each check
is a coroutine run by ``asyncio.run`` that creates its Readers/Writers inside the running loop,
records deliveries from the message handlers and awaits (always with a bound) what it expects.

Each check prints ``RESULT PASS|FAIL <check> <seconds> <detail>`` on stdout; exit status 0 when
all passed, 1 when one failed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable

from .harness import (
    CLIENT,
    MAX_LAG_S,
    RUN_ID,
    Deliveries,
    Message,
    Scope,
    Tally,
    _ClosedTopicsFilter,
    dpub,
    make_bodies,
    mpub,
    now,
    pub,
    publish_probes_until,
    secs,
    wait_for,
)

# ---------------------------------------------------------------------------------------------
# checks: each takes (topic, scope) and returns (ok, detail)

CheckResult = tuple[bool, str]


async def check_publish_consume(topic: str, scope: Scope) -> CheckResult:
    n = 2000
    w = await scope.writer()
    everything = make_bodies("m-", 0, n)
    for b in everything[: n // 2]:
        await pub(w, topic, b)
    for i in range(n // 2, n, 100):
        await mpub(w, topic, everything[i : i + 100])
    t = Tally(set(everything))
    await scope.reader(topic, "c", t.handle, max_in_flight=64)
    await wait_for(lambda: t.unique >= n, 25.0)
    await asyncio.sleep(0.2)
    return t.summary()


async def check_requeue(topic: str, scope: Scope) -> CheckResult:
    w = await scope.writer()
    ds = Deliveries()

    def handler(m: Message, at: float) -> None:
        ds.push(m, at)
        if m.attempts == 1:
            m.requeue(backoff=False, delay=0)
        elif m.attempts == 2:
            m.requeue(backoff=False, time_ms=700)
        else:
            m.finish()

    await scope.reader(topic, "c", handler, max_in_flight=2)
    await pub(w, topic, b"requeue-me")
    got = await ds.wait(3, MAX_LAG_S + 3)
    if len(got) < 3:
        return False, f"got {len(got)} deliveries ({ds.attempts()}), want 3"
    await asyncio.sleep(0.5)
    g1, g2 = got[1].at - got[0].at, got[2].at - got[1].at
    detail = f"attempts {ds.attempts()}; REQ 0 -> {secs(g1)}; REQ 700ms -> {secs(g2)}"
    if len(ds.list) > 3:
        return False, f"{detail}; delivered again after FIN"
    if not ds.same_message():
        return False, f"{detail}; redelivered a different message id/body"
    if ds.attempts() != "1,2,3":
        return False, f"{detail}; attempts should be 1,2,3"
    if g1 > 0.6:
        return False, f"{detail}; REQ 0 redelivery took too long (>0.6s)"
    if not 0.65 <= g2 <= MAX_LAG_S + 0.7:
        return False, f"{detail}; REQ 700ms redelivery outside [0.65s, {secs(MAX_LAG_S + 0.7)}]"
    return True, detail


async def check_timeout(topic: str, scope: Scope) -> CheckResult:
    w = await scope.writer()
    ds = Deliveries()

    def handler(m: Message, at: float) -> None:
        ds.push(m, at)
        if m.attempts != 1:  # attempt 1: never answered, let it time out
            m.finish()

    # max_in_flight 1: nsqd flushes each message at once (no output-buffer delay)
    await scope.reader(topic, "c", handler, max_in_flight=1, msg_timeout=1)
    await pub(w, topic, b"let-me-time-out")
    got = await ds.wait(2, MAX_LAG_S + 3)
    if len(got) < 2:
        return False, f"got {len(got)} deliveries, want 2 (no redelivery after timeout)"
    gap = got[1].at - got[0].at
    detail = f"attempts {ds.attempts()}; redelivered after {secs(gap)} (msg_timeout 1s)"
    if not ds.same_message():
        return False, f"{detail}; redelivered a different message id/body"
    if ds.attempts() != "1,2":
        return False, f"{detail}; attempts should be 1,2"
    if not 0.9 <= gap <= MAX_LAG_S + 1:
        return False, f"{detail}; redelivery outside [0.9s, {secs(MAX_LAG_S + 1)}]"
    return True, detail


async def check_touch(topic: str, scope: Scope) -> CheckResult:
    w = await scope.writer()
    ds = Deliveries()
    finished_at: list[float] = []
    tasks: list[asyncio.Task[None]] = []

    async def hold(m: Message) -> None:
        for _ in range(6):
            await asyncio.sleep(0.4)
            m.touch()
        m.finish()
        finished_at.append(now())

    def handler(m: Message, at: float) -> None:
        ds.push(m, at)
        if m.attempts != 1:
            m.finish()
            return
        tasks.append(asyncio.get_running_loop().create_task(hold(m)))

    await scope.reader(topic, "c", handler, max_in_flight=1, msg_timeout=1)
    await pub(w, topic, b"keep-me-alive")
    first = await ds.wait(1, 5.0)
    if not first:
        return False, "message never delivered"
    await wait_for(lambda: bool(finished_at) or len(ds.list) > 1, 5.0)
    if len(ds.list) > 1:
        d = ds.list[1]
        return False, (
            f"redelivered after {secs(d.at - first[0].at)} despite TOUCH every 400ms "
            f"(attempts={d.attempts})"
        )
    if not finished_at:
        return False, "touch loop did not finish"
    held = finished_at[0] - first[0].at
    await asyncio.sleep(1.3)
    if len(ds.list) > 1:
        return False, (
            f"redelivered {secs(ds.list[1].at - first[0].at)} after first delivery "
            f"(held {secs(held)} with 6 TOUCH)"
        )
    return True, f"held {secs(held)} with 6 TOUCH (msg_timeout 1s), FIN, no redelivery"


async def check_backoff(topic: str, scope: Scope) -> CheckResult:
    w = await scope.writer()
    ds = Deliveries()

    def handler(m: Message, at: float) -> None:
        ds.push(m, at)
        if m.attempts == 1:
            m.requeue(backoff=False, delay=0)
        elif m.attempts == 2:
            m.requeue(backoff=True, delay=0)
        else:
            m.finish()

    # pynsq's BackoffTimer(0, max): first interval = max * (0.25/10 + 0.75/250) = 1.008s for 36
    await scope.reader(topic, "c", handler, max_in_flight=1, max_backoff_duration=36)
    await pub(w, topic, b"back-off")
    got = await ds.wait(3, 8.0)
    if len(got) < 3:
        return False, f"got {len(got)} deliveries ({ds.attempts()}), want 3"
    g1, g2 = got[1].at - got[0].at, got[2].at - got[1].at
    detail = f"no-backoff REQ -> {secs(g1)}; backoff REQ (1.008s) -> {secs(g2)}"
    if not ds.same_message():
        return False, f"{detail}; redelivered a different message id/body"
    if ds.attempts() != "1,2,3":
        return False, f"{detail}; attempts {ds.attempts()} should be 1,2,3"
    if g1 > 0.6:
        return False, f"{detail}; requeue without backoff took >0.6s"
    if g2 < 0.8:
        return False, f"{detail}; delivered during backoff (RDY 0 not honoured?)"
    if g2 > 4.0:
        return False, f"{detail}; not delivered after backoff ended (RDY 1 not honoured?)"
    return True, detail


async def check_fanout(topic: str, scope: Scope) -> CheckResult:
    n = 1000
    w = await scope.writer()
    everything = make_bodies("m-", 0, n)
    ta, tb = Tally(set(everything)), Tally(set(everything))
    await scope.reader(topic, "a", ta.handle, max_in_flight=32)
    await scope.reader(topic, "b", tb.handle, max_in_flight=32)
    await publish_probes_until(w, topic, lambda: ta.probes > 0 and tb.probes > 0)
    for i in range(0, n, 100):
        await mpub(w, topic, everything[i : i + 100])
    await wait_for(lambda: ta.unique >= n and tb.unique >= n, 20.0)
    await asyncio.sleep(0.2)
    ok_a, sa = ta.summary()
    ok_b, sb = tb.summary()
    return ok_a and ok_b, f"channel a: {sa}; channel b: {sb}"


async def check_split(topic: str, scope: Scope) -> CheckResult:
    n = 1000
    w = await scope.writer()
    everything = make_bodies("m-", 0, n)
    t1, t2 = Tally(set(everything)), Tally(set(everything))
    await scope.reader(topic, "c", t1.handle, max_in_flight=16)
    await scope.reader(topic, "c", t2.handle, max_in_flight=16)
    await publish_probes_until(w, topic, lambda: t1.probes > 0 and t2.probes > 0)
    for i in range(0, n, 100):
        await mpub(w, topic, everything[i : i + 100])

    def union() -> int:
        return len(t1.seen.keys() | t2.seen.keys())

    await wait_for(lambda: union() >= n, 20.0)
    await asyncio.sleep(0.2)
    u = union()
    both = len(t1.seen.keys() & t2.seen.keys())
    dupes = t1.dupes + t2.dupes
    detail = (
        f"union={u}/{n} consumer1={t1.unique} consumer2={t2.unique} "
        f"on-both={both} duplicates={dupes}"
    )
    if u != n:
        return False, f"{detail}; messages missing"
    if both or dupes:
        return False, f"{detail}; a message was delivered more than once"
    if t1.unique < n // 10 or t2.unique < n // 10:
        return False, f"{detail}; one consumer got under 10%"
    return True, detail


async def check_deferred(topic: str, scope: Scope) -> CheckResult:
    delay = 1.5
    w = await scope.writer()
    ds = Deliveries()

    def handler(m: Message, at: float) -> None:
        ds.push(m, at)
        m.finish()

    await scope.reader(topic, "c", handler, max_in_flight=4)
    t0 = now()
    await dpub(w, topic, int(delay * 1000), b"later")
    await pub(w, topic, b"now")
    await ds.wait(2, MAX_LAG_S + 4)
    got = {d.body.decode(): d.at - t0 for d in ds.list}
    order = ",".join(d.body.decode() for d in ds.list)
    detail = (
        f"order [{order}]; now after {secs(got.get('now', 0))}, "
        f"later after {secs(got.get('later', 0))} (delay {secs(delay)})"
    )
    if "now" not in got or "later" not in got:
        return False, f"{detail}; message missing"
    if got["now"] > 1.0:
        return False, f"{detail}; plain publish took >1s"
    if got["later"] < delay - 0.05:
        return False, f"{detail}; deferred message arrived early"
    if got["later"] > delay + MAX_LAG_S:
        return False, f"{detail}; deferred message arrived over {secs(MAX_LAG_S)} late"
    await asyncio.sleep(0.2)
    if len(ds.list) > 2:
        return False, f"{detail}; unexpected extra delivery"
    return True, detail


CheckFn = Callable[[str, Scope], Awaitable[CheckResult]]
CHECKS: list[tuple[str, float, CheckFn]] = [
    ("publish_consume", 40.0, check_publish_consume),
    ("requeue", 20.0, check_requeue),
    ("timeout", 20.0, check_timeout),
    ("touch", 15.0, check_touch),
    ("backoff", 15.0, check_backoff),
    ("fanout", 30.0, check_fanout),
    ("split", 30.0, check_split),
    ("deferred", 20.0, check_deferred),
]
CHECK_NAMES = [name for name, _, _ in CHECKS]


# ---------------------------------------------------------------------------------------------
# main


async def run_check(nsqd: str, name: str, limit: float, fn: CheckFn) -> bool:
    topic = f"{CLIENT}_{name}_{RUN_ID}"
    scope = Scope(nsqd, topic)
    start = now()
    try:
        ok, detail = await asyncio.wait_for(fn(topic, scope), limit)
    except TimeoutError:
        ok, detail = False, f"check did not finish within {limit:.0f}s"
    except Exception as exc:
        ok, detail = False, f"error: {exc!r}"
    finally:
        scope.close()
    verdict = "PASS" if ok else "FAIL"
    detail = detail.replace("\n", " ")
    print(f"RESULT {verdict} {name} {now() - start:.3f} {detail}", flush=True)
    return ok


async def run_all(nsqd: str, names: list[str]) -> int:
    failed = 0
    for name, limit, fn in CHECKS:
        if name in names and not await run_check(nsqd, name, limit, fn):
            failed += 1
    print(f"{CLIENT}: {len(names) - failed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.clients.pynsq",
        description="Run the client conformance checks against one nsqd with pynsq.",
    )
    parser.add_argument("--nsqd", default="127.0.0.1:4150", help="nsqd TCP address host:port")
    parser.add_argument("--check", default="all", help="all, or comma-separated check names")
    parser.add_argument("--list", action="store_true", help="print the check names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CHECK_NAMES))
        return 0
    names = CHECK_NAMES if args.check == "all" else [n.strip() for n in args.check.split(",")]
    unknown = [n for n in names if n not in CHECK_NAMES]
    if unknown:
        print(f"unknown check(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pynsq %(asctime)s %(name)s %(message)s"))
    handler.addFilter(_ClosedTopicsFilter())
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    return asyncio.run(run_all(args.nsqd, names))
