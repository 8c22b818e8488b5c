package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/bubbuild/bub-mcp/telemetry"
	"github.com/spf13/pflag"
)

// common are the flags every command that runs tools shares.
type common struct {
	config    string
	profile   string
	workspace string
	session   string
	// chosen is set by newApp when the profile was named (--profile or
	// BUB_PROFILE), not defaulted: tools and call then apply its view.
	chosen bool
	// onDemand makes the App start upstream servers only when one of
	// their tools is called (app.Options.OnDemand): set by call and
	// config check, which must not wait for, or spawn, servers they do
	// not use.
	onDemand bool
}

func (c *common) flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "bub.toml to load (default $BUB_CONFIG, else $BUB_HOME/bub.toml if present)")
	fs.StringVar(&c.profile, "profile", "", "profile to use (default $BUB_PROFILE, else \"default\")")
	fs.StringVar(&c.workspace, "workspace", "", "workspace directory for profiles without one (default: current directory)")
}

// bubHome is $BUB_HOME, its leading ~ expanded (a client's "env" map
// reaches us without a shell, and BUB_HOME=~/.bub would otherwise make a
// directory named "~" in the current one), else the default home.
func bubHome(env *Env) (string, error) {
	if h := config.ExpandHome(env.Getenv("BUB_HOME")); h != "" {
		return h, nil
	}
	return sessions.DefaultHome()
}

// loadConfig finds and loads the configuration; no file means the zero
// configuration.
func loadConfig(env *Env, path string) (*config.Config, string, error) {
	home, err := bubHome(env)
	if err != nil {
		return nil, "", err
	}
	path = config.ExpandHome(path) // --config=~/x: bash leaves that ~ alone
	fromEnv := false
	if path == "" {
		path = config.ExpandHome(env.Getenv("BUB_CONFIG"))
		fromEnv = path != ""
	}
	if path == "" {
		if p := filepath.Join(home, "bub.toml"); fileExists(p) {
			path = p
		}
	}
	if path == "" {
		return config.Default(), home, nil
	}
	cfg, err := config.Load(path, env.Getenv)
	if _, unread := errors.AsType[*fs.PathError](err); unread && fromEnv {
		// A BUB_CONFIG set long ago (a shell profile) is not in sight:
		// say where the path came from.
		err = fmt.Errorf("%w (the file $BUB_CONFIG names; unset it for $BUB_HOME/bub.toml)", err)
	}
	return cfg, home, err
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// newApp builds the application from flags and environment, with every
// registered module.
func newApp(ctx context.Context, env *Env, c *common) (*app.App, error) {
	cfg, home, err := loadConfig(env, c.config)
	if err != nil {
		return nil, err
	}
	if c.profile == "" {
		c.profile = env.Getenv("BUB_PROFILE")
	}
	c.chosen = c.profile != ""
	if c.profile == "" {
		c.profile = config.DefaultProfile
	}
	if _, ok := cfg.Profiles[c.profile]; !ok {
		return nil, &usageError{fmt.Sprintf("unknown profile %q (defined: %v)", c.profile, cfg.ProfileNames())}
	}
	ws := config.ExpandHome(c.workspace)
	if ws != "" {
		if ws, err = filepath.Abs(ws); err != nil {
			return nil, err
		}
		if err := checkWorkspace(ws, "--workspace"); err != nil {
			return nil, err
		}
	}
	if err := checkProfileWorkspaces(cfg, []string{c.profile}); err != nil {
		return nil, err
	}
	// One Telemetry for the process's App and MCP server: traces go out
	// over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT says so.
	tel, err := telemetry.New(&telemetry.Options{Getenv: env.Getenv, ServiceVersion: VersionString(), Metrics: cfg.Server.Metrics})
	if err != nil {
		return nil, err
	}
	a, err := app.New(ctx, &app.Options{Config: cfg, Home: home, Workspace: ws, Getenv: env.Getenv, Logger: env.Logger, Telemetry: tel, OnDemand: c.onDemand})
	if err != nil {
		_ = tel.Shutdown(ctx)
		return nil, err
	}
	if err := checkProfileTools(a); err != nil {
		closeApp(env, a)
		return nil, err
	}
	return a, nil
}

// quieted raises the log level to min unless the user asked for logs
// (BUB_LOG_LEVEL, BUB_VERBOSE): commands that print a call's outcome
// themselves need not see the executor's record of it too.
func quieted(env *Env, min slog.Level) *Env {
	if env.Getenv("BUB_LOG_LEVEL") != "" || env.Getenv("BUB_VERBOSE") != "" {
		return env
	}
	q := *env
	q.Logger = slog.New(telemetry.NewLogHandler(env.Stderr, env.Getenv("BUB_LOG_FORMAT"), min))
	return &q
}

// closeApp ends a command's App, logging (not returning) a failure: by
// then the command's own result is what matters.
func closeApp(env *Env, a *app.App) {
	if err := a.Close(); err != nil {
		env.Logger.Warn("app.close", "error", err)
	}
	// Last, so the spans of the shutdown itself go out too.
	ctx, cancel := context.WithTimeout(context.Background(), telemetryFlushTimeout)
	defer cancel()
	if err := a.Telemetry().Shutdown(ctx); err != nil {
		env.Logger.Warn("telemetry.shutdown", "error", err)
	}
}

// telemetryFlushTimeout bounds how long exiting waits for the last spans
// to reach an OTLP collector that is slow or gone.
const telemetryFlushTimeout = 5 * time.Second

// serverExtensions are what the App's modules add to the MCP server: their
// resources, and the protocol features of modules that implement
// mcpserver.Extender (the conformance fixtures' prompts and completions).
func serverExtensions(a *app.App) []mcpserver.Extension {
	var exts []mcpserver.Extension
	for _, m := range a.Modules() {
		if e, ok := m.(mcpserver.Extender); ok {
			exts = append(exts, e.MCPExtensions()...)
		}
	}
	for _, r := range a.Resources() {
		exts = append(exts, mcpserver.TextResource(r.URI, r.Name, r.Description, r.MIMEType, func(ctx context.Context, conn *providers.Connection) (string, error) {
			if err := a.Resolve(ctx, conn); err != nil {
				return "", err
			}
			return r.Read(ctx, conn)
		}))
	}
	return exts
}
