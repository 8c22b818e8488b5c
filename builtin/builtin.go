// Package builtin holds Bub's builtin tools: bash and its background shells
// (bash, bash.output, bash.kill), files (fs.read, fs.write, fs.edit), the
// spill reader (spill.read), the session tape (tape.info, tape.search,
// tape.anchors, tape.handoff, tape.reset), web.fetch and skill.
//
// The tools register themselves into registry.Default from init(), so a
// binary enables them with a blank import:
//
//	import _ "github.com/bubbuild/bub-mcp/builtin"
//
// Each tool returns a structured result (the MCP structuredContent) and has a
// renderer that produces the text Bub's tool returns, so models read what
// they would read from Bub. Processes and files go through the call's
// environment.Environment (ToolContext.Env); tape and spill tools work on the
// session found with sessions.FromContext. Bad input is refused with a
// *registry.Error whose message says what is wrong, before anything is
// touched.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/invopop/jsonschema"
)

// Options configure the builtin tools for the whole process. The zero value
// is the safe default; every field says what zero means.
type Options struct {
	// AllowLoopback lets web.fetch connect to loopback, private and
	// link-local addresses (127.0.0.1, 10.0.0.0/8, 169.254.169.254, ::1,
	// ...). Off by default, so a model cannot reach services that trust
	// the local network, such as cloud metadata endpoints.
	AllowLoopback bool
	// MaxBytes caps the body web.fetch reads; a larger response is
	// refused. Zero means DefaultWebMaxBytes.
	MaxBytes int64
}

// DefaultWebMaxBytes is web.fetch's body limit when Options.MaxBytes is
// zero.
const DefaultWebMaxBytes = 5 << 20

var options atomic.Pointer[Options]

// Configure sets the process-wide options. The CLI calls it from its
// configuration before serving; later calls replace the options for calls
// that start afterwards.
func Configure(o Options) {
	options.Store(&o)
}

// currentOptions returns the options in force, with defaults filled in.
func currentOptions() Options {
	var o Options
	if p := options.Load(); p != nil {
		o = *p
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultWebMaxBytes
	}
	return o
}

func init() {
	for _, t := range []*registry.Tool{
		bashTool(), bashOutputTool(), bashKillTool(),
		fsReadTool(), fsWriteTool(), fsEditTool(),
		spillReadTool(),
		tapeInfoTool(), tapeSearchTool(), tapeAnchorsTool(), tapeHandoffTool(), tapeResetTool(),
		webFetchTool(),
		skillTool(),
	} {
		if t.Preserve {
			// Preserved tools answer models in text (Bub: "they return plain
			// text"); they are never in the code-mode stub, so an output
			// schema would only make MCP clients receive the structured
			// value next to the text, in full even when the text was
			// spilled. Go callers still get the structured value.
			t.OutputSchema = nil
		}
		registry.MustRegister(t)
	}
}

// fail builds the *registry.Error a handler returns for a refused or
// failed call.
func fail(kind registry.Kind, format string, args ...any) *registry.Error {
	return &registry.Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// envOf returns the call's environment, or a config error naming the tool
// when the caller attached none.
func envOf(tc *registry.ToolContext, tool string) (environment.Environment, error) {
	if tc != nil && tc.Env != nil {
		if env, ok := tc.Env.(environment.Environment); ok {
			return env, nil
		}
		return nil, fail(registry.KindConfig, "%s needs an environment that can run processes and read files; this call's environment (%T) cannot", tool, tc.Env)
	}
	return nil, fail(registry.KindConfig, "%s needs an environment, and this call has none", tool)
}

// sessionOf returns the calling session, or a config error naming the tool.
func sessionOf(ctx context.Context, tool string) (*sessions.Session, error) {
	if s, ok := sessions.FromContext(ctx); ok {
		return s, nil
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

// nonNegative refuses a negative count argument with Bub's wording.
func nonNegative(name string, v int) error {
	if v < 0 {
		return fail(registry.KindInvalidInput, "`%s` must be >= 0.", name)
	}
	return nil
}

// hoistNullable moves the description of each nullable property
// (`jsonschema:"nullable"` wraps it in oneOf [T, null]) up to the property,
// where models and clients look for it.
func hoistNullable(s *jsonschema.Schema) {
	if s.Properties == nil {
		return
	}
	for p := s.Properties.Oldest(); p != nil; p = p.Next() {
		v := p.Value
		if len(v.OneOf) == 2 && v.OneOf[1].Type == "null" && v.Description == "" {
			v.Description, v.OneOf[0].Description = v.OneOf[0].Description, ""
		}
	}
}

// JSONSchemaExtend implementations: every argument struct with a nullable
// field hoists its descriptions.
func (bashArgs) JSONSchemaExtend(s *jsonschema.Schema)       { hoistNullable(s) }
func (bashOutputArgs) JSONSchemaExtend(s *jsonschema.Schema) { hoistNullable(s) }
func (fsReadArgs) JSONSchemaExtend(s *jsonschema.Schema)     { hoistNullable(s) }
func (tapeSearchArgs) JSONSchemaExtend(s *jsonschema.Schema) { hoistNullable(s) }
func (webFetchArgs) JSONSchemaExtend(s *jsonschema.Schema)   { hoistNullable(s) }
func (skillArgs) JSONSchemaExtend(s *jsonschema.Schema)      { hoistNullable(s) }
