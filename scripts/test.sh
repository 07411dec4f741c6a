#!/usr/bin/env bash
# Install everything the test suite needs, then run it. Used by README and .ci/run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python -m pip install --quiet --disable-pip-version-check -e '.[test]'
bash scripts/install_reference.sh
bash scripts/install_browser.sh  # headless Chromium for the nsqadmin check in tests/ops
bash scripts/install_prometheus.sh  # the real scrape of /metrics in tests/http
bash scripts/install_redis.sh  # redis-server 7 + redis-benchmark for tests/resp and conformance/resp
bash scripts/install_strace.sh  # a kill -9 at one chosen write() in tests/policies
# Two test processes (pytest-xdist), each test file whole in one of them (its module fixtures
# once): most tests wait on daemons, sockets and timeouts, so one process used a quarter of two
# cores (24 minutes at 2 cores; two processes: 13). `-n 0` after this runs them in one.
python -m pytest -n 2 --dist loadfile "$@"
