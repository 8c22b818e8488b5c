// Package builtin holds Bub's builtin tools: bash and its background shells
// (bash, bash.output, bash.input, bash.kill), files (fs.read, fs.write, fs.edit, and
// the searches fs.grep and fs.glob, which Bub has not), the
// session tape (tape.info, tape.search, tape.anchors, tape.handoff,
// tape.reset) and web.fetch. The spill reader lives in package spill and
// the skill tool in package skills.
//
// The tools come as the module "builtin", which registers itself from
// init(); a binary enables it with a blank import:
//
//	import _ "github.com/bubbuild/bub-mcp/builtin"
//
// Each App gets its own Module, so the [web] settings and the background
// shells of one App never leak into another.
//
// Each tool returns a structured result (the MCP structuredContent) and has a
// renderer that produces the text Bub's tool returns, so models read what
// they would read from Bub. Processes and files go through the call's
// environment.Environment (ToolContext.Env); tape tools work on
// ToolContext.Session. Bad input is refused with a *registry.Error whose
// message says what is wrong, before anything is touched.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/invopop/jsonschema"
)

// fail builds the *registry.Error a handler returns for a refused or
// failed call.
func fail(kind registry.Kind, format string, args ...any) *registry.Error {
	return &registry.Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// envOf returns the call's environment, or a config error naming the tool
// when the caller attached none.
func envOf(tc *registry.ToolContext, tool string) (environment.Environment, error) {
	if tc != nil && tc.Env != nil {
		return tc.Env, nil
	}
	return nil, fail(registry.KindConfig, "%s needs an environment, and this call has none", tool)
}

// sessionOf returns the calling session, or a config error naming the tool.
func sessionOf(tc *registry.ToolContext, tool string) (registry.Session, error) {
	if tc != nil && tc.Session != nil {
		return tc.Session, nil
	}
	return nil, fail(registry.KindConfig, "%s needs a session, and this call has none (run it through the MCP server, the agent or `bub-mcp call`)", tool)
}

// envError classifies an environment failure and keeps its message, which
// names the path and what is wrong with it. The "environment: " prefix is
// dropped: the model asked a tool, not the environment.
func envError(err error) *registry.Error {
	kind := registry.KindTool
	switch {
	case errors.Is(err, fs.ErrNotExist):
		kind = registry.KindNotFound
	case errors.Is(err, environment.ErrIsDir), errors.Is(err, environment.ErrBinary),
		errors.Is(err, environment.ErrOutsideWorkspace), errors.Is(err, environment.ErrTooLarge):
		kind = registry.KindInvalidInput
	case errors.Is(err, environment.ErrClosed):
		kind = registry.KindConfig
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		kind = registry.KindTemporary
	}
	return &registry.Error{Kind: kind, Message: strings.TrimPrefix(err.Error(), "environment: "), Cause: err}
}

// seconds converts a count of seconds to a Duration, capping it (at about
// 68 years) so that a huge count cannot overflow into a negative one.
func seconds(n int) time.Duration {
	return time.Duration(min(n, math.MaxInt32)) * time.Second
}

// JSONSchemaExtend implementations: every argument struct with a nullable
// field hoists its descriptions.
func (bashArgs) JSONSchemaExtend(s *jsonschema.Schema)       { registry.HoistNullable(s) }
func (bashOutputArgs) JSONSchemaExtend(s *jsonschema.Schema) { registry.HoistNullable(s) }
func (fsReadArgs) JSONSchemaExtend(s *jsonschema.Schema)     { registry.HoistNullable(s) }
func (tapeSearchArgs) JSONSchemaExtend(s *jsonschema.Schema) { registry.HoistNullable(s) }
func (webFetchArgs) JSONSchemaExtend(s *jsonschema.Schema)   { registry.HoistNullable(s) }
