#!/usr/bin/env bash
# Install headless Chromium (Debian packages `chromium` and `chromium-driver`) for the nsqadmin
# check in tests/ops. Idempotent, never reads stdin; a no-op when both are already installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "install_browser.sh: need root (or sudo) to apt-get install chromium" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq </dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver </dev/null >/dev/null
command -v chromium >/dev/null
