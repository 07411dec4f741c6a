#!/usr/bin/env bash
# The multi-core rows in one go, for a machine lent for minutes (../shared/bench16/README.md packs
# what it needs; carry .dev):  bash .dev/run_packed.sh bash bench/on_16_cores.sh
# Each run beside the Go nsqd where both are named; tables and bench/run.py's JSON under $OUT,
# the tables together in $OUT/summary.txt. In this order, the first ones the most wanted:
#   all_workers     every core, ours with --workers=auto
#   across_workers  every core, --workers=auto: a message published in worker 1 and read in 0
#   across_same     the same within worker 0
#   two_workers     two cores (taskset -c 0,1: daemons and clients), ours with --workers=2
#   all_one         every core, ours as one process
#   two_one         two cores, ours as one process
#   all_workers_again  all_workers once more where the budget allows (a median of two)
# Not run unless PARTS names them (each beside all_workers' ours column of the same call):
#   nospin_workers  every core, --workers=auto, ours with the loop's spin off
#                   (bench/variants/nospin): does the spin pay with a worker per core?
#   profile_workers every core, --workers=auto: where each worker's CPU goes in the round-trip
#                   rows (bench/profile_rows.py; needs py-spy: prepare.sh ... py-spy)
#   profile_two     the same on two cores (taskset -c 0,1, --workers=2)
# A device call may run 600 s: a part starts only while BUDGET (540 s) has 30 s left, each
# within RUN_LIMIT (150 s) and what is left; PARTS=a,b runs only those.
# What comes back from a call is 8 files at most: run it with OUT pointing elsewhere and send
# back a tarball, e.g.
#   mkdir -p /tmp/o; o=$OUT; OUT=/tmp/o bash .dev/run_packed.sh bash bench/on_16_cores.sh;
#   cp /tmp/o/summary.txt $o/; tar -czf $o/b16.tgz -C /tmp/o .
set -u
out=${OUT:-/tmp/bench16}
mkdir -p "$out"
rows=${ROWS:-writer_b1_ch,writer_b200_ch,pub_rt_32,http_pub_32,reader,latency,defaults}
limit=${RUN_LIMIT:-150}
budget=${BUDGET:-540}
parts=${PARTS:-all_workers,across_workers,across_same,two_workers,all_one,two_one,all_workers_again}
start=$(date +%s)
run() {  # name, then the command
    local name=$1
    shift
    case ",$parts," in
    *",$name,"*) ;;
    *) return ;;
    esac
    local left=$((budget - ($(date +%s) - start)))
    if [ "$left" -lt 30 ]; then
        echo "== $name: not run, ${left} s of the ${budget} s budget left" | tee -a "$out/summary.txt"
        return
    fi
    echo "== $name: $*" | tee -a "$out/summary.txt"
    timeout "$((left < limit ? left : limit))" "$@" --results-dir "$out/$name" >"$out/$name.txt" 2>&1
    echo "rc=$?" | tee -a "$out/summary.txt"
    sed -n '/^row (/,/^results:/p' "$out/$name.txt" >>"$out/summary.txt"
    cat "$out/$name"/profile-*.txt >>"$out/summary.txt" 2>/dev/null
}
cores=$(nproc)
run all_workers python3 bench/run.py --target both --quick --workers auto --only "$rows"
run across_workers python3 bench/across_workers.py --workers "$cores" --publish-in 1 --consume-in 0
run across_same python3 bench/across_workers.py --workers "$cores" --publish-in 0 --consume-in 0
run two_workers taskset -c 0,1 python3 bench/run.py --target both --quick --workers 2 --only "$rows"
run all_one python3 bench/run.py --target ours --quick --only "$rows"
run two_one taskset -c 0,1 python3 bench/run.py --target ours --quick --only "$rows"
run all_workers_again python3 bench/run.py --target both --quick --workers auto --only "$rows"
nospin=$PWD/bench/variants/nospin:${PYTHONPATH:-}
run nospin_workers python3 bench/run.py --target ours --quick --workers auto --only "$rows" \
    --ours-cmd "env PYTHONPATH=$nospin python3 -m nsqd"
profiled=def_writer_b1,pub_rt_32,http_pub_32
run profile_workers python3 bench/profile_rows.py --workers auto --only "$profiled"
run profile_two taskset -c 0,1 python3 bench/profile_rows.py --workers 2 --only "$profiled"
