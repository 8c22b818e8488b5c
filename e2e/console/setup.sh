#!/usr/bin/env bash
# Install what the console's browser test needs: Debian's chromium (with
# apt-get, when root) and playwright-core + axe-core from package-lock.json
# (npm ci; skipped when node_modules matches the lockfile).
#
#   e2e/console/setup.sh
#
# Exit status 0 when everything is there. A missing piece that cannot be
# installed exits 1 under CI=true, and 3 otherwise (run.sh then skips).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
log() { printf 'e2e/console/setup: %s\n' "$*" >&2; }
missing() {
  log "$*"
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 3
}
root=false
[ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1 && root=true

if [ ! -x /usr/bin/chromium ]; then
  if $root; then
    log "installing Debian chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq chromium >&2
  else
    missing "/usr/bin/chromium not found: apt-get install -y chromium (as root)"
  fi
fi
if ! command -v npm >/dev/null 2>&1; then
  if $root; then
    log "installing Debian nodejs + npm"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq nodejs npm >&2
  else
    missing "npm not found: apt-get install -y nodejs npm (as root)"
  fi
fi
stamp="node_modules/.lockhash"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  log "node_modules matches package-lock.json"
else
  log "npm ci ($(npm --version))"
  npm ci --no-audit --no-fund --loglevel=error >&2 || missing "npm ci failed"
  printf '%s\n' "$want" > "$stamp"
fi
