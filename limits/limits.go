// Package limits is the rate-limit hook for tool calls: [[limits]] rules
// in bub.toml, by principal, profile and tool glob, each with calls per
// minute and a burst. A call over its limit fails with a tool error the
// model can act on ("limit NAME: retry in N s", retryAfterSeconds in the
// error's details and in the result's _meta) instead of running. Rules without a tool glob limit
// HTTP requests instead; the HTTP edge applies those (auth/ratelimit's
// middleware), not this hook.
//
//	[[limits]]
//	name = "writes"
//	profile = "dev"
//	tool = "fs.write"
//	per_minute = 30
//	burst = 5
//
// Like confirm, it is built on the public hook API (app.AddHooks), so it
// sees direct calls and the nested calls of run_code alike; calls a human
// makes (bub-mcp call, comma commands) run no hooks and are not limited.
// The buckets live in this process, or, with [store] kind = "postgres",
// in that database, so that replicas share them.
package limits

import (
	"context"
	"fmt"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/auth/ratelimit"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions/pgstore/ratestore"
)

func init() {
	app.RegisterModule(new(Module))
}

// Rule is one [[limits]] table.
type Rule struct {
	// Name appears in refusals; "" means "limits[<index>]".
	Name string `toml:"name"`
	// Principal, Profile and Tool are globs (path.Match); "" matches
	// everything, except that a rule with no Tool limits requests, not
	// tool calls.
	Principal string `toml:"principal"`
	Profile   string `toml:"profile"`
	Tool      string `toml:"tool"`
	// PerMinute calls, Burst of them at once (0 means PerMinute, at least 1).
	PerMinute float64 `toml:"per_minute"`
	Burst     int     `toml:"burst"`
}

// Module applies the [[limits]] rules of one App to its tool calls.
type Module struct {
	rules  []ratelimit.Rule
	limits *ratelimit.Limits
	// buckets hold every rule's tokens (the tool calls' and the HTTP
	// edge's): memory, or the [store] database's shared table.
	buckets ratelimit.Limiter
	closer  func()
}

// BubModule registers the module as "limits".
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "limits", New: func() app.Module { return new(Module) }}
}

// Provision decodes [[limits]] and, when a rule names a tool glob, adds
// the hook.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	var rules []Rule
	if err := a.Config().Decode("limits", &rules); err != nil {
		return err
	}
	for i, r := range rules {
		if r.Name == "" {
			r.Name = fmt.Sprintf("limits[%d]", i)
		}
		if r.PerMinute <= 0 {
			return a.Config().Fail(fmt.Sprintf("per_minute must be > 0 (rule %q)", r.Name), "limits", "per_minute")
		}
		if r.Burst < 0 {
			return a.Config().Fail(fmt.Sprintf("burst must be >= 0 (rule %q)", r.Name), "limits", "burst")
		}
		m.rules = append(m.rules, ratelimit.Rule{Name: r.Name, Principal: r.Principal, Profile: r.Profile, Tool: r.Tool, PerMinute: r.PerMinute, Burst: r.Burst})
	}
	if len(m.rules) == 0 {
		return nil
	}
	m.buckets = ratelimit.NewMemory(nil)
	if dsn := a.StoreDSN(); dsn != "" {
		shared, err := ratestore.Open(dsn)
		if err != nil {
			return a.Config().Fail(err.Error(), "store")
		}
		m.buckets, m.closer = shared, shared.Close
	}
	l, err := ratelimit.New(ratelimit.Options{Rules: m.rules, Limiter: m.buckets, Logger: a.Logger()})
	if err != nil {
		return a.Config().Fail(err.Error(), "limits")
	}
	m.limits = l
	a.AddHooks(registry.Hooks{Name: "limits", Before: m.before})
	return nil
}

// Rules returns the decoded rules, the request-level ones included, for
// the HTTP edge's middleware.
func (m *Module) Rules() []ratelimit.Rule { return m.rules }

// Buckets is where the rules' tokens are kept, for the HTTP edge's
// request limits to share; nil without rules.
func (m *Module) Buckets() ratelimit.Limiter { return m.buckets }

// Cleanup closes the shared buckets' database connections.
func (m *Module) Cleanup() error {
	if m.closer != nil {
		m.closer()
	}
	return nil
}

// FromApp returns a's limits module, if loaded.
func FromApp(a *app.App) (*Module, bool) {
	mod, ok := a.Module("limits")
	if !ok {
		return nil, false
	}
	m, ok := mod.(*Module)
	return m, ok
}

func (m *Module) before(ctx context.Context, call *registry.ToolCall) registry.Decision {
	tc := call.Context
	if tc == nil || tc.Conn == nil {
		return registry.Proceed()
	}
	d, err := m.limits.Check(ctx, ratelimit.Subject{Principal: tc.Conn.Principal, Name: tc.Conn.Principal, Profile: tc.Conn.Profile, Tool: call.Tool.Name})
	if err != nil || d.Allowed {
		return registry.Proceed() // a failing limiter lets calls through (ratelimit logs it)
	}
	e := registry.NewError(registry.KindTemporary, d.Message(),
		map[string]any{"retryAfterSeconds": d.RetryAfterSeconds(), "rule": d.Rule})
	e.Meta = map[string]any{"retryAfterSeconds": d.RetryAfterSeconds()}
	return registry.DenyError(e)
}
