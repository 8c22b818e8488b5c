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
// An entry may name an annotation hint instead of a glob (config.Hints):
// "hint:destructive" confirms every tool whose annotations, an upstream's
// as overridden in [upstreams.<name>.overrides.<tool>] or a builtin's,
// say it may destroy data; "hint:not_read_only" every tool that writes.
//
// confirm_via lists the ways of asking, in order; the first that can
// reach someone is used: "elicitation" (the client asks its user; only
// clients declaring the capability) and "console" (the call waits in the
// approvals queue, Queue, for a person in bub-mcp console):
//
//	confirm_via = ["elicitation", "console"]
//
// A call the user declines, cancels or leaves unanswered for
// confirm_timeout fails with a tool error saying so, which the model can
// read. A client that cannot be asked (no elicitation capability, and no
// "console" in confirm_via) gets the call refused with a message naming
// the profile key. Calls a human makes
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
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/config"
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
	// queue is where calls wait for the console; set in Provision when a
	// profile lists "console" in confirm_via.
	queue Queue
	host  string
	log   *slog.Logger
}

// BubModule registers the module as "confirm".
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "confirm", New: func() app.Module { return new(Module) }}
}

// Provision adds the hook when some profile asks for confirmations.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	m.profiles = map[string]*config.Profile{}
	m.log = a.Logger()
	m.host, _ = os.Hostname()
	for name, p := range a.Config().Profiles {
		if len(p.Confirm) > 0 {
			m.profiles[name] = p
			if slices.Contains(p.ConfirmVia, ViaConsole) && m.queue == nil {
				q, err := QueueFor(a)
				if err != nil {
					return err
				}
				m.queue = q
			}
		}
	}
	if len(m.profiles) > 0 {
		a.AddHooks(registry.Hooks{Name: "confirm", Before: m.before})
	}
	return nil
}

// before asks about a call its profile wants confirmed, in the ways
// confirm_via lists, using the first one that can reach someone.
func (m *Module) before(ctx context.Context, call *registry.ToolCall) registry.Decision {
	tc := call.Context
	if tc == nil || tc.Conn == nil {
		return registry.Proceed()
	}
	p := m.profiles[tc.Conn.Profile]
	if p == nil || !config.MatchToolRules(p.Confirm, call.Tool) {
		return registry.Proceed()
	}
	timeout := p.ConfirmTimeout.Duration
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	via := p.ConfirmVia
	if len(via) == 0 {
		via = []string{ViaElicitation}
	}
	for _, w := range via {
		switch w {
		case ViaElicitation:
			if !tc.CanElicit(ctx) {
				continue
			}
			if d, asked := m.elicit(ctx, call, p, timeout); asked {
				return d
			}
		case ViaConsole:
			if m.queue != nil {
				return m.console(ctx, call, p, timeout)
			}
		}
	}
	key := "profiles." + p.Name + ".confirm"
	if !slices.Contains(via, ViaConsole) {
		return registry.Deny(fmt.Sprintf("Tool '%s' needs the user's confirmation (%s), but this client cannot be asked: it did not declare the elicitation capability. Use a client that supports elicitation, add \"console\" to profiles.%s.confirm_via (and approve it in bub-mcp console), or remove the tool from %s.", call.Name, key, p.Name, key))
	}
	return registry.Deny(fmt.Sprintf("Tool '%s' needs the user's confirmation (%s), but no way in profiles.%s.confirm_via can reach anyone.", call.Name, key, p.Name))
}

// Ways of asking, as profiles' confirm_via lists them.
const (
	ViaElicitation = "elicitation"
	ViaConsole     = "console"
)

// elicit asks the client's user. asked is false when the client turned
// out unable to be asked, so the next way may be tried.
func (m *Module) elicit(ctx context.Context, call *registry.ToolCall, p *config.Profile, timeout time.Duration) (d registry.Decision, asked bool) {
	tc := call.Context
	key := "profiles." + p.Name + ".confirm"
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
		return registry.Decision{}, false
	case err != nil && askCtx.Err() != nil && ctx.Err() == nil:
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: the user did not answer the confirmation within %v (profiles.%s.confirm_timeout).", call.Name, timeout, p.Name)), true
	case err != nil && errors.Is(err, registry.ErrNoPeer):
		return registry.Deny(fmt.Sprintf("Tool '%s' needs the user's confirmation (%s), but this call has no client to ask.", call.Name, key)), true
	case err != nil:
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: asking the user for confirmation (%s) failed: %v", call.Name, key, err)), true
	case res.Action == "accept":
		return registry.Proceed(), true
	case res.Action == "decline":
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: the user declined it.", call.Name)), true
	default:
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: the user cancelled the confirmation.", call.Name)), true
	}
}

// console puts the call in the approvals queue and waits, up to timeout,
// for the operator console's decision.
func (m *Module) console(ctx context.Context, call *registry.ToolCall, p *config.Profile, timeout time.Duration) registry.Decision {
	tc := call.Context
	now := time.Now().UTC()
	pend := Pending{
		ID: NewID(), Created: now, Deadline: now.Add(timeout),
		Tool: call.Tool.Name, Nested: tc.CodeMode,
		Principal: tc.Conn.Principal, Profile: tc.Conn.Profile, Transport: tc.Conn.Transport, Session: tc.Conn.SessionKey,
		Host: m.host, PID: os.Getpid(),
	}
	// Cut as the audit log cuts them, so the console shows a waiting
	// call's arguments as it shows the calls made.
	pend.Args, pend.ArgsBytes = audit.CutArgs(call.Args, MaxQueuedArgs)
	if tc.Conn.ClientName != "" {
		pend.Client = tc.Conn.ClientName + "/" + tc.Conn.ClientVersion
	}
	if err := m.queue.Add(ctx, pend); err != nil {
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: it could not be queued for approval in the console: %v", call.Name, err))
	}
	// Withdrawn whatever happens: a console must not approve a call no
	// one waits for.
	defer func() {
		if err := m.queue.Remove(context.WithoutCancel(ctx), pend.ID); err != nil {
			m.log.Warn("confirm: withdraw a queued call", "id", pend.ID, "error", err)
		}
	}()
	m.log.Info("confirm.queued", "id", pend.ID, "tool", call.Tool.Name, "profile", p.Name, "principal", pend.Principal, "timeout", timeout)
	if tc.Peer != nil {
		tc.Peer.Log(ctx, slog.LevelInfo, "confirm", fmt.Sprintf("Tool '%s' waits for approval in the operator console (bub-mcp console), up to %v.", call.Name, timeout))
	}
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d, err := m.queue.Wait(waitCtx, pend.ID)
	switch {
	case err != nil && waitCtx.Err() != nil && ctx.Err() == nil:
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: no one approved it in the console within %v (profiles.%s.confirm_timeout).", call.Name, timeout, p.Name))
	case err != nil && ctx.Err() != nil:
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: the call was cancelled while it waited for approval.", call.Name))
	case err != nil:
		return registry.Deny(fmt.Sprintf("Tool '%s' was not run: waiting for approval in the console failed: %v", call.Name, err))
	case d.Approved:
		return registry.Proceed()
	}
	msg := fmt.Sprintf("Tool '%s' was not run: %s denied it in the console.", call.Name, orDefault(d.By, "the operator"))
	if d.Reason != "" {
		msg += " Reason: " + d.Reason
	}
	return registry.Deny(msg)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// answerKey names the question across the rounds of a 2026-07-28
// multi-round-trip call, in which the call (and the hook) runs again with
// the answers so far: the same tool with the same arguments is the same
// question, whatever else the call asks and in whatever order.
func answerKey(call *registry.ToolCall) string {
	sum := sha256.Sum256(call.Args)
	return "confirm-" + call.Tool.Name + "-" + hex.EncodeToString(sum[:8])
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

// QueueFor is the approvals queue every server and console of the App's
// configuration shares: the [store] database's when [store] kind =
// "postgres" (replicas on other machines), else $BUB_HOME/approvals. The
// caller closes a queue that is an io.Closer.
func QueueFor(a *app.App) (Queue, error) {
	if dsn := PostgresDSN(a); dsn != "" {
		return NewPGQueue(dsn)
	}
	return NewFileQueue(filepath.Join(a.Home(), "approvals")), nil
}

// Cleanup closes the queue's database connections, if it has any.
func (m *Module) Cleanup() error {
	if c, ok := m.queue.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

var (
	_ app.Module       = (*Module)(nil)
	_ app.Provisioner  = (*Module)(nil)
	_ app.CleanerUpper = (*Module)(nil)
)
