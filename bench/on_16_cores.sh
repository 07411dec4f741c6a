#!/usr/bin/env bash
# The multi-core rows in one go, for a machine lent for minutes (../shared/bench16/README.md packs
# what it needs; carry .dev):  bash .dev/run_packed.sh bash bench/on_16_cores.sh
# Each run beside the Go nsqd where both are named; tables and bench/run.py's JSON under $OUT:
#   all_workers  every core, ours with --workers=auto
#   all_one      every core, ours as one process
#   two_workers  two cores (taskset -c 0,1: daemons and clients), ours with --workers=2
#   two_one      two cores, ours as one process
#   across_*     every core, --workers=auto: a message published in worker 1 and read in 0 (or 0)
set -u
out=${OUT:-/tmp/bench16}
mkdir -p "$out"
rows=${ROWS:-writer_b1_ch,writer_b200_ch,pub_rt_32,http_pub_32,reader,latency,defaults}
limit=${RUN_LIMIT:-150}
run() {  # name, then the command
    local name=$1
    shift
    echo "== $name: $*" | tee -a "$out/summary.txt"
    timeout "$limit" "$@" --results-dir "$out/$name" >"$out/$name.txt" 2>&1
    echo "rc=$?" | tee -a "$out/summary.txt"
    sed -n '/^row (/,/^results:/p' "$out/$name.txt" >>"$out/summary.txt"
}
run all_workers python3 bench/run.py --target both --quick --workers auto --only "$rows"
run all_one python3 bench/run.py --target ours --quick --only "$rows"
run two_workers taskset -c 0,1 python3 bench/run.py --target both --quick --workers 2 --only "$rows"
run two_one taskset -c 0,1 python3 bench/run.py --target ours --quick --only "$rows"
cores=$(nproc)
run across_workers python3 bench/across_workers.py --workers "$cores" --publish-in 1 --consume-in 0
run across_same python3 bench/across_workers.py --workers "$cores" --publish-in 0 --consume-in 0
