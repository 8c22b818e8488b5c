#!/usr/bin/env bash
# Install what the Go tests need besides Go: bubblewrap for the sandbox
# environment's tests, ripgrep for fs.grep's. Idempotent; as root it
# installs the Debian packages when bwrap or rg is missing. Without
# bubblewrap the sandbox tests skip, except with CI=true, where this script
# (and those tests) fail instead. ripgrep is optional for users (fs.grep
# falls back to its Go walker), so this script never fails for it; the
# tests comparing rg with the walker skip without it, and fail with
# CI=true, where this script has installed it.
set -euo pipefail

log() { printf 'test-deps: %s\n' "$*" >&2; }

# install CMD PACKAGE: as root, apt-get install PACKAGE when CMD is missing.
install() {
  if ! command -v "$1" >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      log "$1 not found; installing Debian $2"
      export DEBIAN_FRONTEND=noninteractive
      apt-get install -y -qq "$2" >&2 || { apt-get update -qq >&2 && apt-get install -y -qq "$2" >&2; } || true
    fi
  fi
}

install bwrap bubblewrap
install rg ripgrep
if ! command -v rg >/dev/null 2>&1; then
  log "ripgrep (rg) is missing: fs.grep's tests compare it with the Go walker only where it is installed (apt-get install -y ripgrep)"
fi
if ! command -v bwrap >/dev/null 2>&1; then
  log "bubblewrap (bwrap) is missing: install it (apt-get install -y bubblewrap); the sandbox tests need it"
  [ "${CI:-}" != true ] || exit 1
fi
