// Package cli is the bub-mcp command line: serve, call, tools and agent,
// over an app.App with every registered module. cmd/bub-mcp is Main and
// nothing else. A binary with extra plugins (the conformance fixtures, a
// company's own tools, Environments or providers) is the same few lines
// with one more blank import, so the wiring is shared, never copied.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"

	"github.com/bubbuild/bub-mcp/telemetry"

	// The standard modules are part of every binary built on this
	// package, as Caddy's modules/standard is: the builtin tools (bash,
	// fs.*, tape.*, web.fetch), spill, skills and code mode. The agent
	// module comes with the agent command (agent.go).
	_ "github.com/bubbuild/bub-mcp/builtin"
	_ "github.com/bubbuild/bub-mcp/codemode"
	_ "github.com/bubbuild/bub-mcp/confirm"
	_ "github.com/bubbuild/bub-mcp/sandbox"
	_ "github.com/bubbuild/bub-mcp/sessions/pgstore"
	_ "github.com/bubbuild/bub-mcp/skills"
	_ "github.com/bubbuild/bub-mcp/spill"
	_ "github.com/bubbuild/bub-mcp/upstream"
)

// Command is one subcommand: data, as in cmd/go.
type Command struct {
	Name  string
	Usage string // after "bub-mcp NAME"
	Short string
	// Run executes the command with its own flag set already parsed.
	Run func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error
	// Flags declares the command's flags on fs before parsing.
	Flags func(fs *flag.FlagSet)
}

// Env is what a command may touch: its streams and environment variables.
// Tests fill it in; Main uses the process's.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	Logger *slog.Logger
}

// ExitError carries an exit status without printing anything more.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// usageError marks a bad invocation: exit status 2, as flag and cmd/go use.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

var commands = map[string]*Command{}

// register adds a command; called from init() in this package's files.
func register(c *Command) {
	if _, dup := commands[c.Name]; dup {
		panic("cli: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// Main runs the command line and returns the process exit status.
func Main(ctx context.Context, args []string) int {
	env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	return Run(ctx, env, args)
}

// Run is Main with explicit streams, for tests.
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
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(env.Stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "-V" {
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "bub-mcp: unknown command %q\nRun 'bub-mcp help' for usage.\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet("bub-mcp "+cmd.Name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: bub-mcp %s %s\n\n%s\n", cmd.Name, cmd.Usage, cmd.Short)
		fs.PrintDefaults()
	}
	if cmd.Flags != nil {
		cmd.Flags(fs)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	err := cmd.Run(ctx, env, fs, fs.Args())
	var exit *ExitError
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	case errors.As(err, &usage):
		fmt.Fprintf(env.Stderr, "bub-mcp %s: %s\n", cmd.Name, usage.msg)
		fs.Usage()
		return 2
	default:
		fmt.Fprintf(env.Stderr, "bub-mcp %s: %v\n", cmd.Name, err)
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "bub-mcp serves Bub's tools to MCP clients and runs an agent against them.\n\nUsage:\n\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  bub-mcp %-8s %s\n", n, commands[n].Short)
	}
	fmt.Fprintf(w, "\nRun 'bub-mcp COMMAND -h' for a command's flags.\n")
}

// newLogger writes logs to stderr: in stdio mode stdout carries the
// protocol only. BUB_VERBOSE=1 (or BUB_LOG_LEVEL=debug) shows per-call
// logs; BUB_LOG_FORMAT=json writes JSON lines, with the trace and span ids
// of the request a record belongs to when tracing is on.
func newLogger(env *Env) *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToLower(env.Getenv("BUB_LOG_LEVEL")) {
	case "debug":
		level = slog.LevelDebug
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
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
