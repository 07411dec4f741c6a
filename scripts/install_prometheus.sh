#!/usr/bin/env bash
# Install Prometheus (Debian package `prometheus`) for the real scrape in tests/http/test_metrics.py.
# Idempotent, never reads stdin; a no-op when it is already installed. The test starts its own
# server on 127.0.0.1 with its own config and storage; recommended packages (node exporter and
# its collectors) are left out.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1; then
    exit 0
fi
bash "$(dirname "${BASH_SOURCE[0]}")/apt_install.sh" install_prometheus.sh prometheus
command -v prometheus >/dev/null
