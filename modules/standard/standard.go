// Package standard enables bub-mcp's standard modules, as Caddy's
// modules/standard does: a program that blank-imports it gets the builtin
// tools (bash, fs.*, tape.*, web.fetch), spill, skills, code mode, tool
// search, confirmation, limits, upstream MCP servers, the sandbox
// environment (environment.sandbox; environment.local comes with package
// environment) and the PostgreSQL session store (store.postgres; store.file
// comes with package sessions) with the upstream credentials' PostgreSQL
// store. cmd/bub-mcp imports it; a program that
// wants fewer modules imports the ones it wants instead.
package standard

import (
	_ "github.com/bubbuild/bub-mcp/builtin"
	_ "github.com/bubbuild/bub-mcp/codemode"
	_ "github.com/bubbuild/bub-mcp/confirm"
	_ "github.com/bubbuild/bub-mcp/limits"
	_ "github.com/bubbuild/bub-mcp/sandbox"
	_ "github.com/bubbuild/bub-mcp/sessions/pgstore"
	_ "github.com/bubbuild/bub-mcp/sessions/pgstore/credstore"
	_ "github.com/bubbuild/bub-mcp/skills"
	_ "github.com/bubbuild/bub-mcp/spill"
	_ "github.com/bubbuild/bub-mcp/toolsearch"
	_ "github.com/bubbuild/bub-mcp/upstream"
)
