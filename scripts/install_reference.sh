#!/usr/bin/env bash
# Install the real NSQ v1.3.0 tools into <repo>/.reference/bin (gitignored), with the Go toolchain.
#
#   scripts/install_reference.sh            # install whatever is missing
#   FORCE=1 scripts/install_reference.sh    # rebuild everything
#   GO_BIN=/path/to/go scripts/install_reference.sh
#
# Installed: nsqd nsqlookupd nsqadmin nsq_tail nsq_stat to_nsq (apps/) and bench_writer bench_reader
# (bench/). Tools already present are skipped, so running it again is cheap.
#
# Why not plain `go install github.com/nsqio/nsq/apps/nsqd@v1.3.0`: nsq v1.3.0's go.mod has a
# `replace` directive, and `go install pkg@version` refuses such modules (golang/go#44840). So the
# module is fetched with `go mod download` (checksum-verified against the Go checksum database and
# the hash pinned below), copied out of the read-only module cache, and each tool is built with
# `GOBIN=<bin> go install ./apps/<tool>` inside it, honouring its go.mod, go.sum and replace.
set -euo pipefail

NSQ_MODULE="github.com/nsqio/nsq"
NSQ_VERSION="v1.3.0"
NSQ_SUM="h1:v7NtyO844ieTIOCQEqQ7IUSSi1ImhgrTTto1rgIYGEU="
APPS=(nsqd nsqlookupd nsqadmin nsq_tail nsq_stat to_nsq)
BENCH=(bench_writer bench_reader)
GO_TIMEOUT="${GO_TIMEOUT:-900}" # seconds allowed for each go command

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REF_DIR="${REPO_ROOT}/.reference"
BIN_DIR="${REF_DIR}/bin"
SRC_DIR="${REF_DIR}/src/nsq-${NSQ_VERSION}"

die() {
    echo "install_reference: ERROR: $*" >&2
    exit 1
}
log() { echo "install_reference: $*" >&2; }

find_go() {
    if [[ -n "${GO_BIN:-}" ]]; then
        [[ -x "${GO_BIN}" ]] && echo "${GO_BIN}"
    elif command -v go >/dev/null 2>&1; then
        command -v go
    elif [[ -x /usr/local/go/bin/go ]]; then
        echo /usr/local/go/bin/go
    else
        return 1
    fi
}

# Run a go command with a time limit, no stdin, and no surprises from the caller's environment.
run_go() {
    GOTOOLCHAIN=local GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly" \
        timeout "${GO_TIMEOUT}" "${GO}" "$@" </dev/null
}

# Print the tool names (apps then bench) that are not yet installed.
missing_tools() {
    local tool
    for tool in "${APPS[@]}" "${BENCH[@]}"; do
        if [[ -n "${FORCE:-}" || ! -x "${BIN_DIR}/${tool}" ]]; then
            echo "${tool}"
        fi
    done
}

# Fetch the module into the module cache and copy it to SRC_DIR (writable, reused next time).
prepare_source() {
    if [[ -f "${SRC_DIR}/.complete" ]]; then
        return 0
    fi
    local json dir sum tmp
    log "downloading ${NSQ_MODULE}@${NSQ_VERSION}"
    if ! json="$(run_go mod download -json "${NSQ_MODULE}@${NSQ_VERSION}" 2>&1)"; then
        die "could not download ${NSQ_MODULE}@${NSQ_VERSION}:"$'\n'"${json}"
    fi
    dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"${json}")"
    sum="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"${json}")"
    [[ -n "${dir}" && -d "${dir}" ]] || die "go mod download gave no module directory:"$'\n'"${json}"
    [[ "${sum}" == "${NSQ_SUM}" ]] || die "module hash ${sum:-<none>} is not the expected ${NSQ_SUM}"

    mkdir -p "$(dirname "${SRC_DIR}")"
    rm -rf "${SRC_DIR}"
    tmp="$(mktemp -d "${SRC_DIR}.tmp.XXXXXX")"
    cp -R "${dir}/." "${tmp}/"
    chmod -R u+w "${tmp}"
    touch "${tmp}/.complete"
    mv "${tmp}" "${SRC_DIR}"
}

# Build the given tools into BIN_DIR with one go install.
build_tools() {
    local pkgs=() tool
    for tool in "$@"; do
        if [[ " ${BENCH[*]} " == *" ${tool} "* ]]; then
            pkgs+=("./bench/${tool}")
        else
            pkgs+=("./apps/${tool}")
        fi
    done
    log "building ${*} (go $("${GO}" env GOVERSION))"
    if ! (cd "${SRC_DIR}" && GOBIN="${BIN_DIR}" run_go install "${pkgs[@]}"); then
        die "go install of ${*} failed (see the messages above)"
    fi
}

verify_tools() {
    local tool version
    for tool in "${APPS[@]}" "${BENCH[@]}"; do
        [[ -x "${BIN_DIR}/${tool}" ]] || die "${BIN_DIR}/${tool} is missing after the build"
    done
    version="$("${BIN_DIR}/nsqd" --version 2>&1 </dev/null || true)"
    [[ "${version}" == *"${NSQ_VERSION#v}"* ]] || die "unexpected nsqd version: ${version}"
    log "ok: ${version} and friends in ${BIN_DIR}"
}

main() {
    GO="$(find_go)" || die "the Go toolchain (go) is not installed or not on PATH; install Go >= 1.17"
    mkdir -p "${BIN_DIR}"

    # One installer at a time (tests may call this from several processes).
    exec 9>"${REF_DIR}/.install.lock"
    if command -v flock >/dev/null 2>&1; then
        flock -w "${GO_TIMEOUT}" 9 || die "timed out waiting for ${REF_DIR}/.install.lock"
    fi

    local missing
    mapfile -t missing < <(missing_tools)
    if ((${#missing[@]} == 0)); then
        log "all tools already present in ${BIN_DIR}"
        exit 0
    fi
    prepare_source
    build_tools "${missing[@]}"
    verify_tools
}

main "$@"
