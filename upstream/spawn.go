package upstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/upstream/internal/stdioclient"
	"github.com/mark3labs/mcp-go/client/transport"
)

// This file runs a stdio server: spawned through the upstream's
// Environment, whose supervisor owns its process group, its cgroup and
// its end, as it does for bash and run_code; mcp-go's client speaks over
// the process's pipes through our own stdio transport (stdioclient, which
// reads a message once where mcp-go's copies it five times), so it never
// starts a process of its own.

// environment returns the upstream's Environment, made on first use and
// kept across restarts until Cleanup closes it (which ends whatever the
// server left behind). A sandboxed server without a cwd works in an empty
// directory of its own, so that neither bub-mcp's working directory nor
// $HOME is mounted into it.
func (u *upstream) environment(ctx context.Context) (environment.Environment, error) {
	u.envMu.Lock()
	defer u.envMu.Unlock()
	if u.env != nil {
		return u.env, nil
	}
	name := u.cfg.envName()
	factory := environment.Factory(nil)
	if m := u.cfg.envModule; m != nil {
		factory = m.NewEnvironment
	} else {
		var err error
		if factory, err = environment.Lookup(name); err != nil {
			return nil, err
		}
	}
	ws := u.cfg.Cwd
	if ws == "" && name != environment.DefaultName {
		if u.envDir == "" {
			d, err := os.MkdirTemp("", "bub-upstream-"+u.cfg.name+"-")
			if err != nil {
				return nil, fmt.Errorf("environment %q: workspace: %w", name, err)
			}
			u.envDir = d
		}
		ws = u.envDir
	}
	// As for a profile's tools (app): $BUB_HOME holds bub.toml's secrets
	// and the audit log, and a server's cwd may hold it.
	env, err := factory(ctx, environment.Options{Session: "upstream:" + u.cfg.name, Workspace: ws,
		Hidden: []string{u.m.app.Home()}, Logger: u.m.log.With("upstream", u.cfg.name)})
	if err != nil {
		return nil, fmt.Errorf("environment %q: %w", name, err)
	}
	u.env = env
	return env, nil
}

// closeEnvironment closes the upstream's Environment, killing every
// process of its servers still there (a daemon that left the process
// group included, where the environment tracks trees), and removes a
// workspace made for it.
func (u *upstream) closeEnvironment() error {
	u.envMu.Lock()
	env, dir := u.env, u.envDir
	u.env, u.envDir = nil, ""
	u.envMu.Unlock()
	var err error
	if env != nil {
		if cerr := env.Close(); cerr != nil {
			err = fmt.Errorf("upstream %s: %w", u.cfg.name, cerr)
		}
	}
	if dir != "" {
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("upstream %s: %w", u.cfg.name, rerr))
		}
	}
	return err
}

// spawn starts a stdio server through the upstream's Environment and
// returns the transport over its pipes. The session ends (s.dead) when
// the process has exited and its stderr is drained, with the exit status
// and the last stderr as the reason.
func (u *upstream) spawn(ctx context.Context, s *session) (transport.Interface, error) {
	env, err := u.environment(ctx)
	if err != nil {
		return nil, err
	}
	vars := make([]string, 0, len(u.cfg.Env))
	for k, v := range u.cfg.Env {
		vars = append(vars, k+"="+v)
	}
	sort.Strings(vars)
	// Not bound to ctx: stop ends the process, gracefully, and the
	// environment's Close ends whatever is left.
	p, err := env.Spawn(context.WithoutCancel(ctx), environment.Spec{Argv: append([]string{u.cfg.Command}, u.cfg.Args...), Env: vars, KeepStdin: true})
	if err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	s.proc = p
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.stderr = &tailBuffer{max: stderrTail}
	log := u.m.log.With("upstream", u.cfg.name)
	go func() {
		// The exit message quotes all the stderr there was. The stream
		// ends when the process and its children close it, or shortly
		// after the process exits (a daemon holding it cannot stall
		// this).
		s.stderr.drain(p.Stderr(), log)
		msg := "exited"
		if code, err := p.Wait(); err != nil || code != 0 {
			msg = "exited: " + exitReason(code, err)
		}
		if tail := strings.TrimSpace(s.stderr.String()); tail != "" {
			msg += "; stderr: " + tail
		}
		s.end(errors.New(msg))
	}()
	return stdioclient.New(p.Stdout(), &stdinPipe{p: p, ctx: s.ctx}, stdioclient.Options{
		MaxMessageBytes: u.cfg.MaxMessageBytes,
		OnTooLong: func(n int64) {
			s.end(fmt.Errorf("sent a message over upstreams.%s.max_message_bytes (%d bytes)", u.cfg.name, n))
		},
		Logger: log,
	}), nil
}

// exitReason says how a process ended, in os/exec's words ("exit status
// 1", "signal: killed"), which messages have always used.
func exitReason(code int, err error) string {
	var se *environment.SignalError
	switch {
	case errors.As(err, &se):
		return "signal: " + se.Signal.String()
	case err != nil:
		return err.Error()
	}
	return fmt.Sprintf("exit status %d", code)
}

// stopProcess ends a stdio server's whole tree: SIGTERM, then SIGKILL
// (which the environment also delivers to the tree's cgroup) after
// stopGrace.
func (u *upstream) stopProcess(s *session) {
	if s.alive() {
		if err := s.proc.Signal(false); err != nil {
			u.m.log.Debug("upstream.stop", "upstream", u.cfg.name, "error", err)
		}
		t := time.NewTimer(stopGrace)
		select {
		case <-s.dead:
		case <-t.C:
		}
		t.Stop()
	}
	// The leader may be gone while its children live on: end the tree.
	if err := s.proc.Signal(true); err != nil {
		u.m.log.Debug("upstream.stop", "upstream", u.cfg.name, "error", err)
	}
	<-s.dead
}

// stdinPipe is a process's stdin as the io.WriteCloser the stdio
// transport writes to. A write to a server that stops reading is given
// up once the session has ended (ctx), instead of blocking its caller.
type stdinPipe struct {
	p   environment.Process
	ctx context.Context
}

func (w *stdinPipe) Write(b []byte) (int, error) {
	if cw, ok := w.p.(environment.StdinContextWriter); ok {
		return cw.WriteStdinContext(w.ctx, b)
	}
	if err := w.p.WriteStdin(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *stdinPipe) Close() error { return w.p.CloseStdin() }
