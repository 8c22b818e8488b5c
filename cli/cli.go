// Package cli is the bub-mcp command line: serve, call, tools and agent,
// over an app.App with every registered module. cmd/bub-mcp is Main, a
// blank import of the standard modules (modules/standard), one of the
// builtin tools' schemas (internal/schemaseed) and nothing else. A binary with extra plugins (the conformance fixtures, a
// company's own tools, Environments or providers) is the same few lines
// with one more blank import, so the wiring is shared, never copied.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bubbuild/bub-mcp/internal/textmatch"
	"github.com/bubbuild/bub-mcp/telemetry"
)

// Env is what a command may touch: its streams and environment variables.
// Tests fill it in; Main uses the process's.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	Logger *slog.Logger
	// IsTerminal reports whether a stream is a terminal (a human reads
	// it): call streams a tool's progress to a terminal stderr. Nil means
	// the check on the *os.File itself; tests set it to try both answers.
	IsTerminal func(stream any) bool
}

// terminal reports whether stream is a terminal, through IsTerminal.
func (e *Env) terminal(stream any) bool {
	if e.IsTerminal != nil {
		return e.IsTerminal(stream)
	}
	return isTerminal(stream)
}

// ExitError carries an exit status without printing anything more.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// usageError marks a bad invocation: exit status 2, as flag and cmd/go use.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// commands returns the subcommands, built afresh for each Run: their flags
// bind to variables of that Run, so two Runs in one process (tests, a
// program embedding the CLI) share nothing. A new command is one function
// returning a *cobra.Command whose RunE closes over env, listed here.
func commands(env *Env) []*cobra.Command {
	return []*cobra.Command{
		agentCommand(env),
		auditCommand(env),
		callCommand(env),
		configCommand(env),
		consoleCommand(env),
		installCommand(env),
		loginCommand(env),
		serveCommand(env),
		toolsCommand(env),
		upstreamsCommand(env),
		versionCommand(env),
	}
}

// Main runs the command line and returns the process exit status.
func Main(ctx context.Context, args []string) int {
	env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	return Run(ctx, env, args)
}

// Run is Main with explicit streams, for tests. Usage errors (an unknown
// command or flag, bad arguments) exit 2, other failures 1, an ExitError
// its own status.
func Run(ctx context.Context, env *Env, args []string) int {
	if env.Logger == nil {
		env.Logger = newLogger(env)
	}
	if path := env.Getenv("BUB_CPUPROFILE"); path != "" {
		// For profiling a real server under a real client: the profile is
		// written when the command returns (SIGINT/SIGTERM included).
		if f, err := os.Create(path); err != nil {
			env.Logger.Warn("cpuprofile", "error", err)
		} else if err := pprof.StartCPUProfile(f); err != nil {
			env.Logger.Warn("cpuprofile", "error", err)
			f.Close()
		} else {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	if path := env.Getenv("BUB_MEMPROFILE"); path != "" {
		// The allocations profile (every 4 KiB allocated is sampled),
		// written when the command returns, as BUB_CPUPROFILE's.
		runtime.MemProfileRate = 4 << 10
		defer writeAllocs(env.Logger, path)
	}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-V") {
		args = append([]string{"version"}, args[1:]...)
	}
	root := newRoot(env)
	args = goStyleFlags(root, args)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return exitStatus(env, cmd, err)
}

// newRoot builds the command tree: the subcommands, help, and cobra's
// completion command (bash, zsh, fish, powershell).
func newRoot(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "bub-mcp",
		Short: "bub-mcp serves Bub's tools to MCP clients and runs an agent against them.",
		Long: "bub-mcp serves Bub's tools to MCP clients and runs an agent against them.\n\n" +
			"Flags and arguments may come in any order; -- ends the flags.",
		Args: unknownCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(env.Stderr)
			_ = cmd.Usage()
			return &ExitError{Code: 2}
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(commands(env)...)
	root.SetHelpCommand(helpCommand(root))
	// cobra adds its completion command only when it runs; added now,
	// it gets the treatment of the other commands with subcommands
	// (cobra's own answers an unknown shell with its help, status 0).
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		comp.Args = unknownCommand
		comp.RunE = func(cmd *cobra.Command, args []string) error {
			return &usageError{"name a shell: bash, fish, powershell or zsh"}
		}
	}
	usageArgs(root)
	return root
}

// flagError makes a flag error a usage error, suggesting the command's
// flags closest to an unknown one (serve --htp: did you mean --http?), as
// an unknown command gets suggestions.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var names []string
		if !cmd.HasParent() {
			names = append(names, "version") // Run's --version
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if m := textmatch.CloseMatches(name, names, 2, 0.6); len(m) > 0 {
			msg += "; did you mean --" + strings.Join(m, " or --") + "?"
		}
	}
	return &usageError{msg}
}

// usageArgs makes every argument-count error of cmd and its subcommands
// a usage error (status 2, with the usage line), as the commands' own
// are: cobra's validators (ExactArgs, MinimumNArgs) return plain errors.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			if _, ok := errors.AsType[*usageError](err); err != nil && !ok {
				return &usageError{err.Error()}
			}
			return err
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// helpCommand is `bub-mcp help [COMMAND...]`: a command's help on stdout,
// an unknown one a usage error with suggestions (cobra's own prints the
// root's usage and exits 0).
func helpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "show a command's help",
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			if len(args) == 0 {
				for _, c := range root.Commands() {
					if c.IsAvailableCommand() && strings.HasPrefix(c.Name(), toComplete) {
						names = append(names, cobra.CompletionWithDesc(c.Name(), c.Short))
					}
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return unknownCommand(root, args)
			}
			target.InitDefaultHelpFlag()
			return target.Help()
		},
	}
}

// exitStatus prints err as "bub-mcp CMD: message" and maps it to the exit
// status: 2 for usage errors, ExitError's own code, 1 for the rest.
func exitStatus(env *Env, cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	prefix := "bub-mcp"
	if cmd != nil {
		prefix = cmd.CommandPath()
	}
	var usage *usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(env.Stderr, "%s: %s\n", prefix, usage.msg)
		if cmd == nil || !cmd.HasParent() || cmd.Name() == "help" {
			fmt.Fprintln(env.Stderr, "Run 'bub-mcp help' for usage.")
		} else {
			fmt.Fprintf(env.Stderr, "usage: %s\nRun 'bub-mcp help %s' for details.\n", cmd.UseLine(), strings.TrimPrefix(cmd.CommandPath(), "bub-mcp "))
		}
		return 2
	}
	fmt.Fprintf(env.Stderr, "%s: %v\n", prefix, err)
	return 1
}

// goStyleFlags rewrites the single-dash long flags Go's flag package took
// (-json, -http ADDR, -config=FILE) to cobra's --json, for the command
// named first; shorthands (-p, -h) and words after -- stay as they are.
func goStyleFlags(root *cobra.Command, args []string) []string {
	if len(args) == 0 {
		return args
	}
	var cmd *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == args[0] || c.HasAlias(args[0]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args
	}
	out := slices.Clone(args)
	for i, a := range out[1:] {
		if a == "--" {
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if cmd.Flags().Lookup(name) != nil {
			out[i+1] = "-" + a
		}
	}
	return out
}

// unknownCommand is the Args of a command with subcommands: any word that
// is not one of them is an unknown command, a usage error with cobra's
// did-you-mean suggestions.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if cmd.HasParent() {
		msg += " for " + cmd.CommandPath()
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set where it suggests
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return &usageError{msg}
}

// noArgs refuses positional arguments, as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &usageError{fmt.Sprintf("unexpected arguments %q", args)}
	}
	return nil
}

// newLogger writes logs to stderr: in stdio mode stdout carries the
// protocol only. BUB_VERBOSE=1 (or BUB_LOG_LEVEL=debug) shows per-call
// logs; BUB_LOG_FORMAT=json writes JSON lines, with the trace and span ids
// of the request a record belongs to when tracing is on.
func newLogger(env *Env) *slog.Logger {
	level := slog.LevelInfo
	levelName := env.Getenv("BUB_LOG_LEVEL")
	known := true
	switch strings.ToLower(strings.TrimSpace(levelName)) {
	case "debug":
		level = slog.LevelDebug
	case "", "info":
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		known = false
	}
	if v := env.Getenv("BUB_VERBOSE"); v != "" && v != "0" && v != "false" {
		level = slog.LevelDebug
	}
	format := env.Getenv("BUB_LOG_FORMAT")
	log := slog.New(telemetry.NewLogHandler(env.Stderr, format, level))
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "", "text", "json":
	default:
		log.Warn("BUB_LOG_FORMAT is neither text nor json; writing text", "value", format)
	}
	if !known {
		// Said, not ignored: BUB_LOG_LEVEL=verbose would otherwise give
		// the user fewer logs than asked for, silently.
		log.Warn("BUB_LOG_LEVEL is none of debug, info, warn, error; logging at "+strings.ToLower(level.String()), "value", levelName)
	}
	return log
}

// writeAllocs writes the allocations profile to path (BUB_MEMPROFILE).
func writeAllocs(log *slog.Logger, path string) {
	f, err := os.Create(path)
	if err != nil {
		log.Warn("memprofile", "error", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		log.Warn("memprofile", "error", err)
	}
}
