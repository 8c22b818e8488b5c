#!/usr/bin/env bash
# Run the MCP conformance CLI under the pinned Node 22, installing the harness
# first if needed. All arguments go to the CLI, e.g.
#
#   e2e/conformance.sh server --url http://127.0.0.1:3000/mcp
#   e2e/conformance.sh server --url http://127.0.0.1:3000/mcp --suite all -o e2e/results
#   e2e/conformance.sh list --server
#
# A first argument --next selects 0.2.0-alpha.12 (the npm alias
# conformance-next) instead of 0.1.16, for --requirements and --spec-version:
#
#   e2e/conformance.sh --next server --url http://127.0.0.1:3000/mcp --requirements 2026-07-28
#   e2e/conformance.sh --next list --requirements 2025-11-25,2026-07-28
#
# The exit code is the CLI's (0 = no FAILURE checks; see CONFORMANCE.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pkg="@modelcontextprotocol/conformance"
if [ "${1:-}" = --next ]; then
  pkg="conformance-next"
  shift
fi
node22="$("$here/setup.sh")"
exec "$node22" "$here/node_modules/$pkg/dist/index.js" "$@"
