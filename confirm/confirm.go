// Package confirm is the approval hook: a profile's confirm globs name the
// tools whose calls, direct or nested in run_code, run only after the user
// says yes through MCP elicitation. It is built on the public hook API
// (registry.Hooks via app.AddHooks) like any plugin's policy, so a plugin
// can write its own the same way.
//
//	[profiles.coder]
//	confirm = ["bash*", "fs.write", "fs.edit"]
//	confirm_timeout = "2m"
//
// A call the user declines, cancels or leaves unanswered for
// confirm_timeout fails with a tool error saying so, which the model can
// read. A client that cannot be asked (no elicitation capability) gets the
// call refused with a message naming the profile key. Calls a human makes
// (bub-mcp call, comma commands) run no hooks and are not asked about.
//
// Enable it with a blank import, as cli does:
//
//	import _ "github.com/bubbuild/bub-mcp/confirm"
package confirm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

func init() {
	app.RegisterModule(new(Module))
}

// DefaultTimeout is how long a confirmation waits for the user when the
// profile sets no confirm_timeout.
const DefaultTimeout = 60 * time.Second

// maxArgsShown bounds the arguments quoted in the question.
const maxArgsShown = 2000

// Module is the approval hook of one App; it has no table of its own (the
// keys are the profiles').
type Module struct {
	profiles map[string]*config.Profile
}

// BubModule registers the module as "confirm".
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "confirm", New: func() app.Module { return new(Module) }}
}

// Provision adds the hook when some profile asks for confirmations.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	m.profiles = map[string]*config.Profile{}
	for name, p := range a.Config().Profiles {
		if len(p.Confirm) > 0 {
			m.profiles[name] = p
		}
	}
	if len(m.profiles) > 0 {
		a.AddHooks(registry.Hooks{Name: "confirm", Before: m.before})
	}
	return nil
}

// before asks the user about a call its profile wants confirmed.
func (m *Module) before(ctx context.Context, call *registry.ToolCall) registry.Decision {
	tc := call.Context
	if tc == nil || tc.Conn == nil {
		return registry.Proceed()
	}
	p := m.profiles[tc.Conn.Profile]
	if p == nil || !matches(p.Confirm, call.Tool.Name) {
		return registry.Proceed()
	}
	key := "profiles." + p.Name + ".confirm"
	if !tc.CanElicit(ctx) {
		return registry.Deny(fmt.Sprintf("Tool '%s' needs the user's confirmation (%s), but this client cannot be asked: it did not declare the elicitation capability. Use a client that supports elicitation, or remove the tool from %s.", call.Name, key, key))
	}
	timeout := p.ConfirmTimeout.Duration
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	askCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := tc.Elicit(askCtx, registry.ElicitRequest{
		Message: question(call, tc.CodeMode),
		Schema:  json.RawMessage(`{"type":"object","properties":{}}`),
		Key:     answerKey(call),
	})
	var capErr *registry.CapabilityError
	switch {
	case errors.As(err, &capErr):
		return registry.Deny(fmt.Sprintf("Tool '%s' needs the user's confirmation (%s), but this client cannot be asked: it did not declare the elicitation capability. Use a client that supports elicitation, or remove the tool from %s.", call.Name, key, key))
	case err != nil && askCtx.Err() != nil && ctx.Err() == nil:
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: the user did not answer the confirmation within %v (profiles.%s.confirm_timeout).", call.Name, timeout, p.Name))
	case err != nil && errors.Is(err, registry.ErrNoPeer):
		return registry.Deny(fmt.Sprintf("Tool '%s' needs the user's confirmation (%s), but this call has no client to ask.", call.Name, key))
	case err != nil:
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: asking the user for confirmation (%s) failed: %v", call.Name, key, err))
	case res.Action == "accept":
		return registry.Proceed()
	case res.Action == "decline":
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: the user declined it.", call.Name))
	default:
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: the user cancelled the confirmation.", call.Name))
	}
}

// answerKey names the question across the rounds of a 2026-07-28
// multi-round-trip call, in which the call (and the hook) runs again with
// the answers so far: the same tool with the same arguments is the same
// question, whatever else the call asks and in whatever order.
func answerKey(call *registry.ToolCall) string {
	sum := sha256.Sum256(call.Args)
	return "confirm-" + call.Tool.Name + "-" + hex.EncodeToString(sum[:8])
}

func matches(globs []string, name string) bool {
	for _, g := range globs {
		if providers.MatchGlob(g, name) {
			return true
		}
	}
	return false
}

// question is what the user reads: the tool, where the call comes from,
// and its arguments (bounded).
func question(call *registry.ToolCall, nested bool) string {
	args := string(call.Args)
	if len(args) > maxArgsShown {
		cut := maxArgsShown
		for cut > 0 && !utf8.RuneStart(args[cut]) {
			cut--
		}
		args = args[:cut] + fmt.Sprintf("… (%d more bytes)", len(args)-cut)
	}
	from := ""
	if nested {
		from = " from code in run_code"
	}
	return fmt.Sprintf("Allow the model to run %s%s?\narguments: %s", call.Tool.Name, from, args)
}

var (
	_ app.Module      = (*Module)(nil)
	_ app.Provisioner = (*Module)(nil)
)
