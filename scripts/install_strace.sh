#!/usr/bin/env bash
# Install strace (Debian package `strace`) for tests/policies/test_dedupe_kill.py, which kills the
# daemon with SIGKILL at one chosen write() (strace's syscall fault injection). Idempotent, never
# reads stdin; a no-op when it is already installed.
set -euo pipefail
if command -v strace >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "install_strace.sh: need root (or sudo) to apt-get install strace" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq </dev/null
$SUDO apt-get install -y -qq --no-install-recommends strace </dev/null >/dev/null
command -v strace >/dev/null
