#!/usr/bin/env bash
# Run the MCP conformance CLI under the pinned Node 22, installing the harness
# first if needed. All arguments go to the CLI, e.g.
#
#   e2e/conformance.sh server --url http://127.0.0.1:3000/mcp
#   e2e/conformance.sh server --url http://127.0.0.1:3000/mcp --suite all -o e2e/results
#   e2e/conformance.sh list --server
#
# The exit code is the CLI's (0 = no FAILURE checks; see CONFORMANCE.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node22="$("$here/setup.sh")"
exec "$node22" "$here/node_modules/@modelcontextprotocol/conformance/dist/index.js" "$@"
