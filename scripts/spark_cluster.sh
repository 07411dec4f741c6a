#!/usr/bin/env bash
# A Spark standalone master and workers (spark-class from the pyspark wheel, Java 17), the real
# nsqlookupd and nsqds (ours, or the Go one with --daemon go), a streaming NSQ -> Parquet job;
# prints rows, missing, duplicates and rows/s as one JSON line. See
# examples/spark-cluster/cluster.py for the options; all on 127.0.0.1, all stopped at the end.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "${PYTHON:-python3}" "$here/examples/spark-cluster/cluster.py" "$@"
