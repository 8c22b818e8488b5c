package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/agent/command"
	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/upstream"
)

func init() {
	var (
		c      common
		asJSON bool
		state  stateFlag
	)
	register(&Command{
		Name:  "call",
		Usage: "[--session S] [--profile P] [--workspace DIR] [--state k=v] [--json] TOOL [key=value ...]",
		Short: "run one tool by its runtime name, as the comma command ,TOOL key=value ... would",
		Flags: func(fs *flag.FlagSet) {
			c.flags(fs)
			fs.StringVar(&c.session, "session", "", "session whose tape, settings and shells the call uses (default: the profile's)")
			fs.BoolVar(&asJSON, "json", false, "print the structured result as JSON instead of the rendered text")
			state = nil // flag.Var has no default to reset it to
			fs.Var(&state, "state", "request-scoped state key=value the tool sees as ToolContext.State, never stored (repeatable)")
		},
		Run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			return runCall(ctx, env, fs, &c, asJSON, state.Map(), args)
		},
	})
}

func runCall(ctx context.Context, env *Env, fs *flag.FlagSet, c *common, asJSON bool, state map[string]any, args []string) error {
	if len(args) == 1 && strings.ContainsAny(args[0], " \t\n") {
		// The whole command in one argument: split it as a shell would.
		words, err := splitWords(args[0])
		if err != nil {
			return &usageError{err.Error()}
		}
		args = words
	}
	if len(args) == 0 || args[0] == "" {
		return &usageError{"empty command: name a tool (see bub-mcp tools)"}
	}
	for _, a := range args[1:] {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && fs.Lookup(name) != nil {
			return &usageError{fmt.Sprintf("flag %s must come before the tool name", a)}
		}
	}

	env = quieted(env, slog.LevelWarn) // the outcome is printed below
	a, err := newApp(ctx, env, c)
	if err != nil {
		return err
	}
	defer closeApp(env, a)
	m, err := agent.FromApp(a)
	if err != nil {
		return err
	}
	if body, ok := command.Strip(args[0], m.Agent().CommandPrefix()); ok {
		args[0] = body // ",fs.read" as typed in the REPL
	}
	if slices.Contains(agent.SessionCommands, args[0]) {
		return runSessionCommand(ctx, env, a, m.Agent(), c, state, args)
	}
	tool, lerr := a.Registry().Lookup(args[0])
	if um, ok := upstream.FromApp(a); lerr != nil && ok && um.WaitFor(ctx, args[0]) {
		tool, lerr = a.Registry().Lookup(args[0]) // its upstream has listed its tools by now
	}
	if lerr != nil {
		return printToolError(env, registry.AsError(lerr, registry.KindNotFound))
	}
	callArgs, err := commandArgs(tool, args[1:])
	if err != nil {
		return &usageError{err.Error()}
	}
	conn := providers.Connection{Transport: "cli", Profile: c.profile, SessionKey: c.session}
	if err := a.Resolve(ctx, &conn); err != nil {
		return err
	}
	res := a.Call(ctx, &conn, app.Request{Tool: tool.Name, Args: callArgs, Mode: app.Command, State: state})
	if res.Err != nil {
		return printToolError(env, res.Err)
	}
	if asJSON {
		return writeJSON(env.Stdout, res.Value)
	}
	text := res.Text
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, err = fmt.Fprint(env.Stdout, text)
	return err
}

// runSessionCommand runs help, model, reasoning_effort, tools and quit as
// the agent's REPL does, on the --session's settings.
func runSessionCommand(ctx context.Context, env *Env, a *app.App, ag *agent.Agent, c *common, state map[string]any, words []string) error {
	conn := providers.Connection{Transport: "cli", Profile: c.profile, SessionKey: c.session}
	if err := a.Resolve(ctx, &conn); err != nil {
		return err
	}
	out, err := ag.CommandWords(ctx, &conn, words, state)
	if errors.Is(err, agent.ErrQuit) {
		return nil // nothing outlives a call's process: there is nothing to stop
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return &ExitError{Code: 1}
	}
	_, err = fmt.Fprintln(env.Stdout, strings.TrimRight(out, "\n"))
	return err
}

// printToolError writes "[kind] message" and the details to stderr and
// makes the command exit with status 1.
func printToolError(env *Env, e *registry.Error) error {
	fmt.Fprintln(env.Stderr, e.Error())
	if len(e.Details) > 0 {
		var b bytes.Buffer
		if err := writeJSON(&b, e.Details); err == nil {
			env.Stderr.Write(b.Bytes())
		}
	}
	return &ExitError{Code: 1}
}

// writeJSON prints v as indented JSON without HTML escaping, the form of
// every --json output.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// commandArgs turns comma-command words into the call's JSON arguments,
// with the comma-command parser the agent uses (agent/command): key=value
// words are keyword arguments, other words fill the tool's parameters in
// schema order and must come first; values stay strings for the
// executor's lax coercion.
func commandArgs(t *registry.Tool, words []string) (json.RawMessage, error) {
	c, err := command.FromWords(t.Name, words)
	if err != nil {
		return nil, err
	}
	return c.Arguments(t.InputSchema)
}

// splitWords splits a command line as a POSIX shell (and Python's
// shlex.split) would.
func splitWords(s string) ([]string, error) { return command.Split(s) }
