"""scripts/spark_cluster.sh once, small: a standalone master and two workers from the pyspark
wheel, the real nsqlookupd, two of our nsqds, the streaming job into Parquet; every message
arrives once, and (nsqd, id) tells the rows of the two nsqds apart."""

from __future__ import annotations

import json
import subprocess
import sys

from spark_support import REPO_ROOT, spark_env

N = 4000


def test_cluster_script_small(report: object) -> None:
    env = spark_env({"PYTHON": sys.executable})
    proc = subprocess.run(
        [str(REPO_ROOT / "scripts" / "spark_cluster.sh"), "--messages", str(N), "--timeout", "240"],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    report(f"spark_cluster.sh --messages {N}: {result}")
    assert (result["rows"], result["missing"], result["duplicates"]) == (N, 0, 0)
    assert result["distinct_nsqd_id"] == N
    assert not result["timed_out"]
