#!/usr/bin/env bash
# Install Prometheus (Debian package `prometheus`) for the real scrape in tests/http/test_metrics.py.
# Idempotent, never reads stdin; a no-op when it is already installed. The test starts its own
# server on 127.0.0.1 with its own config and storage; recommended packages (node exporter and
# its collectors) are left out.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "install_prometheus.sh: need root (or sudo) to apt-get install prometheus" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq </dev/null
$SUDO apt-get install -y -qq --no-install-recommends prometheus </dev/null >/dev/null
command -v prometheus >/dev/null
