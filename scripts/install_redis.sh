#!/usr/bin/env bash
# Install the real Redis 7 (Debian packages `redis-server` and `redis-tools`: redis-cli,
# redis-benchmark) for the RESP differential suite (conformance/resp), tests/resp and
# bench/resp.py, and tclsh 8.6 (Debian `tcl`) for Redis's own Tcl suite
# (tests/resp/test_redis_tcl.py). Idempotent, never reads stdin; a no-op when both are
# already installed.
# Fails loudly: the tests need the reference, they never skip without it.
set -euo pipefail
have_redis7() {
    command -v redis-server >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1 &&
        redis-server --version | grep -Eq 'v=7\.' && command -v tclsh >/dev/null 2>&1
}
if have_redis7; then
    exit 0
fi
bash "$(dirname "${BASH_SOURCE[0]}")/apt_install.sh" install_redis.sh redis-server redis-tools tcl
if ! have_redis7; then
    echo "install_redis.sh: redis-server 7 or tclsh not available after apt-get install" \
        "(got: $(redis-server --version 2>&1 || echo none), tclsh: $(command -v tclsh || echo none))" >&2
    exit 1
fi
