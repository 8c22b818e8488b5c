package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/spf13/cobra"
)

// callCommand is `bub-mcp call`.
func callCommand(env *Env) *cobra.Command {
	var (
		c      common
		asJSON bool
		state  stateFlag
	)
	cmd := &cobra.Command{
		Use:   "call [flags] TOOL [key=value ...]",
		Short: "run one tool by its runtime name, as the comma command ,TOOL key=value ... would",
		Long: "Run one tool by its runtime name, as the comma command ,TOOL key=value ... would.\n\n" +
			"Flags may come before or after the tool and its arguments; a tool argument that\n" +
			"starts with - goes after --. With --profile, only the tools of that profile's view\n" +
			"can be called. On a terminal, the tool's progress and bash's output stream to stderr.",
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCall(cmd.Context(), env, &c, asJSON, state.Map(), args)
		},
	}
	c.flags(cmd.Flags())
	cmd.Flags().StringVar(&c.session, "session", "", "session whose tape, settings and shells the call uses (default: the profile's)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the structured result as JSON instead of the rendered text")
	cmd.Flags().Var(&state, "state", "request-scoped state key=value the tool sees as ToolContext.State, never stored (repeatable); code_mode=true|false switches code mode for this call only (run_code)")
	return cmd
}

func runCall(ctx context.Context, env *Env, c *common, asJSON bool, state map[string]any, args []string) error {
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

	env = quieted(env, slog.LevelWarn) // the outcome is printed below
	c.onDemand = true
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
		if e := upstreamNotReady(a, args[0]); e != nil {
			return printToolError(env, e)
		}
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
	if c.chosen {
		// A named profile's view binds the operator too: call runs only
		// what that profile's clients could.
		v, err := a.View(ctx, &conn)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(profileReach(v), func(t *registry.Tool) bool { return t.Name == tool.Name }) {
			return printToolError(env, &registry.Error{Kind: registry.KindNotFound,
				Message: fmt.Sprintf("tool %s is not in profile %s's view (its tools and deny globs); see bub-mcp tools --profile %s", tool.Name, c.profile, c.profile)})
		}
	}
	req := app.Request{Tool: tool.Name, Args: callArgs, Mode: app.Command, State: state}
	if env.terminal(env.Stderr) {
		// Someone watches: show the tool's progress (bash's output as it
		// comes) on stderr; stdout still gets the result alone.
		req.Peer = &stderrPeer{w: env.Stderr}
	}
	res := a.Call(ctx, &conn, req)
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
// upstreamNotReady explains a tool name that is not registered but names
// an upstream server that is not ready: after waiting for the server,
// "unknown tool" would send the user looking for a typo when the server
// did not start. It returns nil when no such server is at fault.
func upstreamNotReady(a *app.App, name string) *registry.Error {
	um, ok := upstream.FromApp(a)
	if !ok {
		return nil
	}
	for _, s := range um.Status() {
		if !strings.HasPrefix(name, s.Name+".") && !strings.HasPrefix(name, s.Name+"_") || s.State == upstream.StateReady {
			continue
		}
		state := string(s.State)
		if s.LastError != "" {
			state += ": " + s.LastError
		}
		return &registry.Error{Kind: registry.KindNotFound,
			Message: fmt.Sprintf("tool %s is unknown because upstream %s is not ready (%s); see bub-mcp upstreams", name, s.Name, state)}
	}
	return nil
}

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
