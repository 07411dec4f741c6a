#!/usr/bin/env bash
# apt-get install Debian packages for the test suite's tools, as root or through sudo, never
# reading stdin, without recommended packages (no init scripts start a system-wide server we did
# not ask for):  bash scripts/apt_install.sh WHO PACKAGE...   (WHO names the caller in errors).
# The install_*.sh scripts call it when what they need is missing.
set -euo pipefail
who=$1
shift
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "$who: need root (or sudo) to apt-get install $*" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq </dev/null
$SUDO apt-get install -y -qq --no-install-recommends "$@" </dev/null >/dev/null
