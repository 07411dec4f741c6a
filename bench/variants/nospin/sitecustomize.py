"""A bench variant: our daemon with the reactor loop's spin off (one poll, then sleep), for an
A/B of the spin on a machine at hand. Python runs this at start when this folder is on
PYTHONPATH, in the daemon and in each worker a group starts (they inherit the environment):

    python bench/run.py --target ours --workers auto --only ... \\
        --ours-cmd "env PYTHONPATH=$PWD/bench/variants/nospin:$PYTHONPATH python3 -m nsqd"
"""

import nsqd.net.reactor

nsqd.net.reactor.SPIN_MAX_S = 0.0
nsqd.net.reactor.SPIN_MIN_S = 0.0
