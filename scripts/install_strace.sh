#!/usr/bin/env bash
# Install strace (Debian package `strace`) for tests/policies/test_dedupe_kill.py, which kills the
# daemon with SIGKILL at one chosen write() (strace's syscall fault injection). Idempotent, never
# reads stdin; a no-op when it is already installed.
set -euo pipefail
if command -v strace >/dev/null 2>&1; then
    exit 0
fi
bash "$(dirname "${BASH_SOURCE[0]}")/apt_install.sh" install_strace.sh strace
command -v strace >/dev/null
