"""python -m conformance.resp [-v] [name...]: run the scripts against redis-server and ours."""

from __future__ import annotations

import sys

from . import script
from .servers import Pair


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    names = [a for a in argv if not a.startswith("-")]
    scripts = [s for s in script.load_all() if not names or any(n in s.name for n in names)]
    pair = Pair()
    pair.start()
    failed = 0
    try:
        for sc in scripts:
            redis, ours = pair.by_kind[sc.server]
            want, got = script.run(sc, redis.port), script.run(sc, ours.port)
            problems = script.diff(want, got)
            print(
                f"{sc.name}: {'identical' if not problems else 'differs'} ({len(sc.steps)} steps)"
            )
            for p in problems:
                print("  " + p)
            if verbose:
                for n, line, reply in want.events:
                    print(f"    {n:3} {line:50} {reply!r}")
            failed += bool(problems)
    finally:
        for p in pair.stop():
            print(p)
            failed += 1
    print(f"resp conformance: {len(scripts)} scripts, {failed} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
