package console

import (
	"context"
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
)

func init() {
	app.RegisterModule(new(Module))
}

// DefaultListen is where bub-mcp console listens when neither the flag
// nor [console] listen says.
const DefaultListen = "127.0.0.1:7777"

// DefaultMaxCalls is how many audited calls the console keeps in memory
// for its live table and filters.
const DefaultMaxCalls = 5000

// Module is the [console] table:
//
//	[console]
//	enabled = false   # true: an HTTP serve mounts it at /console too
//	listen = "127.0.0.1:7777"
//	max_calls = 5000
//	[[console.tokens]]
//	name = "ops"
//	sha256 = "…"          # or env = "BUB_CONSOLE_TOKEN"
//
// Console tokens are admins; [[auth.tokens]] with admin = true are too, and
// other [[auth.tokens]] see only their own calls and approvals.
type Module struct {
	// Enabled also mounts the console on an HTTP serve (at /console),
	// behind the same host checks and tokens.
	Enabled  bool    `toml:"enabled"`
	Listen   string  `toml:"listen"`
	MaxCalls int     `toml:"max_calls"`
	Tokens   []Token `toml:"tokens"`
}

// Token is a console token, known by its SHA-256 as [[auth.tokens]] are.
type Token struct {
	Name   string `toml:"name"`
	SHA256 string `toml:"sha256"`
	Env    string `toml:"env"`
}

// BubModule registers the module as "console", reading [console].
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "console", Config: "console", New: func() app.Module { return new(Module) }}
}

// Provision checks the table and resolves env tokens.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	cfg := a.Config()
	if m.MaxCalls < 0 {
		return cfg.Fail("must be >= 0 (0 means the default, 5000)", "console", "max_calls")
	}
	if m.MaxCalls == 0 {
		m.MaxCalls = DefaultMaxCalls
	}
	if m.MaxCalls > 1_000_000 {
		return cfg.Fail("at most 1000000", "console", "max_calls")
	}
	if m.Listen == "" {
		m.Listen = DefaultListen
	}
	for i := range m.Tokens {
		t := &m.Tokens[i]
		if t.Name == "" {
			t.Name = fmt.Sprintf("console%d", i+1)
		}
		switch {
		case t.SHA256 != "" && t.Env != "":
			return cfg.Fail("set sha256 or env, not both", "console", "tokens", "sha256")
		case t.SHA256 != "":
			t.SHA256 = strings.ToLower(t.SHA256)
			if len(t.SHA256) != 64 || strings.Trim(t.SHA256, "0123456789abcdef") != "" {
				return cfg.Fail("must be the token's SHA-256 as 64 hex digits (never the token itself): printf %s TOKEN | sha256sum", "console", "tokens", "sha256")
			}
		case t.Env != "":
			v := a.Getenv(t.Env)
			if v == "" {
				return cfg.Fail(fmt.Sprintf("environment variable %s is empty or unset", t.Env), "console", "tokens", "env")
			}
			t.SHA256 = config.HashToken(v)
			t.Env = ""
		default:
			return cfg.Fail("a token needs sha256 or env", "console", "tokens", "sha256")
		}
	}
	return nil
}

// FromApp returns the App's console module (its [console] settings).
func FromApp(a *app.App) (*Module, bool) {
	mod, ok := a.Module("console")
	if !ok {
		return nil, false
	}
	m, ok := mod.(*Module)
	return m, ok
}

// principals are the tokens the console accepts: its own and those of
// [[auth.tokens]], each with its role.
//
// Names must be unique: a login cookie names its principal, and a call's
// owner is a name too, so a second token of the same name (a plain
// [[auth.tokens]] entry named like a console admin) would take the first
// one's rights.
func (m *Module) principals(cfg *config.Config) ([]principal, error) {
	var out []principal
	for _, t := range m.Tokens {
		out = append(out, principal{Name: t.Name, SHA256: t.SHA256, Admin: true})
	}
	for _, t := range cfg.Auth.Tokens {
		out = append(out, principal{Name: t.Name, SHA256: t.SHA256, Admin: t.Admin, Profile: t.Profile})
	}
	seen := map[string]bool{}
	for _, p := range out {
		if seen[p.Name] {
			return nil, fmt.Errorf("console: two tokens are named %q: [[console.tokens]] and [[auth.tokens]] names must be unique, the console logs in by name", p.Name)
		}
		seen[p.Name] = true
	}
	return out, nil
}

var (
	_ app.Module      = (*Module)(nil)
	_ app.Provisioner = (*Module)(nil)
)
