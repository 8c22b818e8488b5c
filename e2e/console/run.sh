#!/usr/bin/env bash
# The console's browser test: builds bub-mcp, installs what it needs
# (setup.sh) and runs console.test.mjs with node's test runner. Prints
# where the screenshots and the page-weight report are.
#
#   bash e2e/console/run.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
set +e
bash "$here/setup.sh"
rc=$?
set -e
if [ "$rc" -eq 3 ]; then
  echo "e2e/console: SKIP (a dependency is missing; CI=true makes this a failure)"
  exit 0
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
fi
work="$(mktemp -d -t bub-console-e2e-XXXXXX)"
export BUB_MCP_BIN="$work/bub-mcp"
export CONSOLE_ARTIFACTS="$work/artifacts"
export FAKEUPSTREAM_BIN="$work/fakeupstream"
(cd "$root" && GOFLAGS=-trimpath go build -o "$BUB_MCP_BIN" ./cmd/bub-mcp && GOFLAGS=-trimpath go build -o "$FAKEUPSTREAM_BIN" ./upstream/internal/fakeupstream)
# The pinned Node 22 that the other end-to-end suites use (e2e/setup.sh
# installs it and prints its path); Debian's node if that fails.
node="$(bash "$root/e2e/setup.sh" 2>/dev/null)" || node=node
cd "$here"
"$node" --test --test-reporter=spec console.test.mjs
echo "e2e/console: screenshots and report in $CONSOLE_ARTIFACTS"
