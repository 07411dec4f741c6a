#!/usr/bin/env bash
# Install headless Chromium (Debian packages `chromium` and `chromium-driver`) for the nsqadmin
# check in tests/ops. Idempotent, never reads stdin; a no-op when both are already installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
bash "$(dirname "${BASH_SOURCE[0]}")/apt_install.sh" install_browser.sh chromium chromium-driver
command -v chromium >/dev/null
