#!/usr/bin/env bash
# End-to-end suites, run by `make test` (make e2e):
#   1. the official MCP conformance suite (--suite all) against the fixture
#      binary over streamable HTTP;
#   2. the official TypeScript SDK client against the real bub-mcp, over
#      stdio and HTTP (node --test client.test.mjs).
# Installs its own Node 22 and npm packages (setup.sh); needs only Go, node
# and npm (installed from Debian when missing and running as root).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
node22="$("$here/setup.sh")"

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "e2e: building binaries" >&2
(cd "$root" && go build -o "$work/bub-mcp" ./cmd/bub-mcp && go build -o "$work/bub-mcp-conformance" ./internal/conformance/cmd/bub-mcp-conformance)

# start_http BIN LOG: serve on a free loopback port in the background and
# set $url. Not in a subshell: the PID must reach cleanup and the server
# must not hold a command substitution's pipe open.
start_http() {
  local bin="$1" log="$2"
  "$bin" serve --http 127.0.0.1:0 >/dev/null 2>"$log" &
  pids+=($!)
  url=""
  for _ in $(seq 1 100); do
    url=$(grep -o 'url=http://[^ ]*' "$log" | head -1 | cut -d= -f2 || true)
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "e2e: server did not start:" >&2; cat "$log" >&2; return 1
}

echo "e2e: MCP conformance suite (@modelcontextprotocol/conformance, --suite all)" >&2
mkdir -p "$work/conf-home"
BUB_HOME="$work/conf-home" start_http "$work/bub-mcp-conformance" "$work/conformance-server.log"
out="$work/conformance.out"
set +e
"$node22" "$here/node_modules/@modelcontextprotocol/conformance/dist/index.js" server --url "$url" --suite all >"$out" 2>&1
status=$?
set -e
sed -n '/=== SUMMARY ===/,$p' "$out"
scenarios=$(grep -cE '^✓ ' "$out" || true)
failed=$(grep -cE '^✗ ' "$out" || true)
echo "conformance: $scenarios passed, $failed failed"
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then
  echo "e2e: conformance suite failed; server log:" >&2; tail -50 "$work/conformance-server.log" >&2
  exit 1
fi

echo "e2e: TypeScript SDK client against bub-mcp (stdio and HTTP)" >&2
BUB_MCP_BIN="$work/bub-mcp" "$node22" --test --test-reporter=spec "$here/client.test.mjs"
