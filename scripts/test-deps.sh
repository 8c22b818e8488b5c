#!/usr/bin/env bash
# Install what the Go tests need besides Go: bubblewrap for the sandbox
# environment's tests. Idempotent; as root it installs the Debian package
# when bwrap is missing. Without it the sandbox tests skip, except with
# CI=true, where this script (and those tests) fail instead.
set -euo pipefail

log() { printf 'test-deps: %s\n' "$*" >&2; }

if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "bwrap not found; installing Debian bubblewrap"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq bubblewrap >&2 || { apt-get update -qq >&2 && apt-get install -y -qq bubblewrap >&2; }
  fi
fi
if ! command -v bwrap >/dev/null 2>&1; then
  log "bubblewrap (bwrap) is missing: install it (apt-get install -y bubblewrap); the sandbox tests need it"
  [ "${CI:-}" != true ] || exit 1
fi
