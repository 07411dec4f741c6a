#!/usr/bin/env bash
# Install everything the test suite needs, then run it. Used by README and .ci/run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python -m pip install --quiet --disable-pip-version-check -e '.[test]'
bash scripts/install_reference.sh
bash scripts/install_browser.sh  # headless Chromium for the nsqadmin check in tests/ops
bash scripts/install_prometheus.sh  # the real scrape of /metrics in tests/http
bash scripts/install_redis.sh  # redis-server 7 + redis-benchmark for tests/resp and conformance/resp
python -m pytest "$@"
