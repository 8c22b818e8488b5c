#!/usr/bin/env bash
# Build the OpenID provider that auth/'s tests run against: Ory Hydra v2,
# from the Go module proxy, into $(go env GOPATH)/bin/hydra-<version> (a
# fixed path outside the repo, so it is built once per machine and every
# later `make test` reuses it). Idempotent: a no-op when that file exists.
#
# Why Hydra and not Dex: Dex tags v2 releases without a /v2 module path, so
# the module proxy serves only v2.13.0+incompatible (2018, no longer
# builds), and its go.mod has a replace directive `go install` refuses.
# Hydra's go.mod also has replace directives (which `go install pkg@v`
# refuses), so we build it through a temporary module that requires Hydra
# and repeats the one replace the binary needs (gobuffalo/pop -> ory/pop).
#
# Without the binary the OAuth tests skip, except with CI=true, where this
# script (and those tests) fail instead. Cold build: see the figure logged
# at the end (about 3 minutes on 2 cores, module download included).
set -euo pipefail

HYDRA_VERSION="${HYDRA_VERSION:-v2.3.0}"
# The replace from Hydra's own go.mod at that version.
POP_REPLACE="github.com/gobuffalo/pop/v6=github.com/ory/pop/v6@v6.2.1-0.20241121111754-e5dfc0f3344b"
GO="${GO:-go}"

log() { printf 'oidc-setup: %s\n' "$*" >&2; }
fail() {
  log "$*"
  if [ "${CI:-}" = true ]; then exit 1; fi
  log "the OAuth tests against a real OpenID provider will skip"
  exit 0
}

bindir="$($GO env GOPATH)/bin"
target="$bindir/hydra-$HYDRA_VERSION"
if [ -x "$target" ]; then
  exit 0
fi
command -v "$GO" >/dev/null 2>&1 || fail "go not found"
if ! command -v cc >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  log "a C compiler is needed for Hydra's SQLite; installing Debian gcc"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq gcc libc6-dev >&2 || { apt-get update -qq >&2 && apt-get install -y -qq gcc libc6-dev >&2; } || true
fi
command -v cc >/dev/null 2>&1 || fail "no C compiler (cc): install gcc (Hydra's SQLite needs cgo)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log "building Ory Hydra $HYDRA_VERSION into $target (once per machine)"
start=$(date +%s)
(
  cd "$work"
  export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" GOWORK=off GOTOOLCHAIN=local
  "$GO" mod init bub-mcp.invalid/hydrabuild >/dev/null 2>&1
  "$GO" mod edit -require "github.com/ory/hydra/v2@$HYDRA_VERSION" -tool github.com/ory/hydra/v2 \
    -replace "$POP_REPLACE"
  "$GO" mod tidy >&2
  mkdir -p "$bindir"
  # SQLite (cgo) for Hydra's in-memory database: dsn "memory".
  CGO_ENABLED=1 "$GO" build -tags sqlite,sqlite_omit_load_extension -o "$work/hydra" github.com/ory/hydra/v2 >&2
  mv "$work/hydra" "$target.tmp"
  mv "$target.tmp" "$target"
) || fail "building Ory Hydra $HYDRA_VERSION failed"
log "built in $(( $(date +%s) - start ))s"
