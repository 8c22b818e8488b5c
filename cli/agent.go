package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// agentCommand is the built-in agent: `bub-mcp agent`. Its tools
// (agent_run over MCP for profiles with agent = true, subagent) come with
// the agent module, which this file's import of package agent compiles in.
func agentCommand(env *Env) *cobra.Command {
	var (
		c      common
		prompt string
		model  string
		asJSON bool
		state  stateFlag
	)
	cmd := &cobra.Command{
		Use:   "agent [flags] [PROMPT]",
		Short: "chat with the built-in agent (REPL), or run one prompt (-p, an argument or stdin) and exit",
		RunE: func(cmd *cobra.Command, args []string) error {
			if prompt == "" && len(args) > 0 {
				prompt = strings.Join(args, " ")
			}
			return runAgent(cmd.Context(), env, &c, prompt, model, asJSON, state.Map())
		},
	}
	fs := cmd.Flags()
	c.flags(fs)
	fs.StringVar(&c.session, "session", "", "session whose tape and settings the agent uses (default: the profile's)")
	fs.StringVarP(&prompt, "prompt", "p", "", "run this prompt (or ,command) once and exit; status 1 if it fails")
	fs.StringVar(&model, "model", "", "model as provider:model (default: the session's ,model, else $BUB_MODEL, else [agent] model)")
	fs.BoolVar(&asJSON, "json", false, "print events as JSON lines instead of text")
	fs.Var(&state, "state", "request-scoped state key=value the turn's tools see as ToolContext.State, never stored (repeatable); code_mode=true|false switches code mode for this turn only")
	return cmd
}

func runAgent(ctx context.Context, env *Env, c *common, prompt, modelFlag string, asJSON bool, state map[string]any) error {
	interactive := isTerminal(env.Stdin)
	if prompt == "" && !interactive {
		b, err := io.ReadAll(env.Stdin)
		if err != nil {
			return err
		}
		if prompt = strings.TrimSpace(string(b)); prompt == "" {
			return &usageError{"no prompt: pass -p PROMPT, a prompt argument or text on stdin, or run in a terminal for the REPL"}
		}
	}
	env = quieted(env, slog.LevelError) // the renderer shows failed calls
	ap, err := newApp(ctx, env, c)
	if err != nil {
		return err
	}
	defer closeApp(env, ap)
	m, err := agent.FromApp(ap)
	if err != nil {
		return err
	}
	a := m.Agent()
	if modelFlag != "" {
		if _, _, err := model.Split(modelFlag); err != nil {
			return &usageError{err.Error()}
		}
		settings := a.Settings()
		settings.Model = modelFlag
		a = m.Configure(&agent.Options{Settings: settings})
	}
	conn := providers.Connection{Transport: "agent", Profile: c.profile, SessionKey: c.session}
	if err := ap.Resolve(ctx, &conn); err != nil {
		return err
	}
	var sink agent.Sink = &agent.TerminalRenderer{Out: env.Stdout, Err: env.Stderr, Verbose: env.Getenv("BUB_VERBOSE") != ""}
	if asJSON {
		sink = agent.NewJSONRenderer(env.Stdout)
	}
	if prompt != "" {
		if err := a.Once(ctx, &agent.Turn{Conn: &conn, Prompt: prompt, Sink: sink, State: state}); err != nil {
			if errors.Is(err, context.Canceled) {
				return &ExitError{Code: 130}
			}
			return &ExitError{Code: 1} // the renderer has shown the error
		}
		return nil
	}
	opts := agent.REPLOptions{In: env.Stdin, Out: env.Stdout, Sink: sink, Interactive: interactive, State: state}
	if interactive {
		in, inOK := env.Stdin.(*os.File)
		out, outOK := env.Stdout.(*os.File)
		if inOK && outOK {
			if ed, ok := agent.NewLineEditor(in, out); ok {
				opts.Editor = ed
				defer ed.Close()
			}
		}
		if tr, ok := sink.(*agent.TerminalRenderer); ok && isTerminal(env.Stderr) {
			tr.Live = true
		}
		// Ctrl-C cancels the running turn, not the REPL: the REPL takes
		// SIGINT itself and ends only on SIGTERM or SIGHUP (or Ctrl-D).
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(context.WithoutCancel(ctx), syscall.SIGTERM, syscall.SIGHUP)
		defer stop()
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt)
		defer signal.Stop(sigs)
		intr := make(chan struct{}, 1)
		go func() {
			for {
				select {
				case <-sigs:
					select {
					case intr <- struct{}{}:
					default:
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		opts.Interrupt = intr
	}
	return a.REPL(ctx, &conn, opts)
}

// isTerminal reports whether r is a terminal, so stdin holds a human
// rather than a prompt. A character device is not enough: /dev/null is
// one, and `agent </dev/null` (cron, CI, nohup) must not open the REPL.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
