package builtin

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/bubbuild/bub-mcp/registry"
)

// Bash timing, as in Bub.
const (
	// KillGrace is how long bash.kill waits after SIGTERM before SIGKILL.
	KillGrace = 3 * time.Second
	// progressInterval rate-limits the output bash streams as progress.
	progressInterval = 100 * time.Millisecond
	// progressChunk is the most output one progress message carries.
	progressChunk = 2048
	// reapTimeout bounds the wait for a killed shell's output to end.
	reapTimeout = 10 * time.Second
)

type bashArgs struct {
	Command        string  `json:"command" jsonschema_description:"The shell command to run (bash -c, or sh -c without bash)."`
	Cwd            *string `json:"cwd,omitempty" jsonschema:"nullable" jsonschema_description:"Working directory; relative paths resolve against the workspace. Default: the workspace."`
	TimeoutSeconds int     `json:"timeout_seconds,omitempty" jsonschema:"default=30" jsonschema_description:"Seconds to wait before the command continues in the background and its shell id is returned; 0 returns the shell id at once."`
	Background     bool    `json:"background,omitempty" jsonschema:"default=false" jsonschema_description:"Start the command in the background and return its shell id at once."`
}

// BashResult is bash's structured result. A command that finished has
// Status "exited" and no ShellID; one that keeps running (background start
// or timeout) has Status "running" and the ShellID to poll with bash.output.
type BashResult struct {
	ShellID string `json:"shell_id,omitempty"`
	Status  string `json:"status"`
	// ExitCode is null while the command runs; a death by signal N is -N.
	ExitCode *int `json:"exit_code" jsonschema:"nullable"`
	// Output is stdout and stderr merged, as text (invalid UTF-8 replaced);
	// empty while the command runs (read it with bash.output).
	Output         string `json:"output"`
	TimedOut       bool   `json:"timed_out,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

func renderBash(r BashResult) string {
	switch {
	case r.TimedOut:
		return fmt.Sprintf("command timed out after %d seconds; continuing in background\nshell_id: %s", r.TimeoutSeconds, r.ShellID)
	case r.ShellID != "":
		return "Shell started, shell_id: " + r.ShellID + "\nRetrieve the output with bash_output or terminate it with bash_kill."
	}
	return orNoOutput(strings.TrimSpace(r.Output))
}

func orNoOutput(s string) string {
	if s == "" {
		return "(no output)"
	}
	return s
}

func (m *Module) bashTool() *registry.Tool {
	return registry.MustNewTool("bash",
		"Run a shell command. Use background=true to keep it running and fetch output later via bash_output.\n\n"+
			"Foreground commands that exceed timeout_seconds continue in the background and return a shell ID. "+
			"Use bash.output to read output or bash.kill to stop them. Background commands do not use timeout_seconds; "+
			"their stdin stays open for bash.input (foreground commands read end-of-file).",
		m.runBash,
		registry.WithPreserve(),
		registry.WithRenderer(renderBash),
		registry.WithAnnotations(registry.Annotations{Title: "Run a shell command", Destructive: true, OpenWorld: true}))
}

func (m *Module) runBash(ctx context.Context, tc *registry.ToolContext, in bashArgs) (BashResult, error) {
	if strings.TrimSpace(in.Command) == "" {
		return BashResult{}, fail(registry.KindInvalidInput, "`command` must not be empty.")
	}
	// When absent, the schema's default (30) applies. Zero or less is a
	// timeout that has already passed, as asyncio.timeout(0) is in Bub: the
	// command starts and goes on in the background at once, and the call
	// returns its shell id (below).
	env, err := envOf(tc, "bash")
	if err != nil {
		return BashResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return BashResult{}, &registry.Error{Kind: registry.KindTool, Message: "command cancelled", Cause: err}
	}
	cwd := ""
	if in.Cwd != nil {
		cwd = *in.Cwd
	}
	// A background shell keeps its stdin open for bash.input; a
	// foreground one reads end-of-file, so a command that reads stdin
	// ends instead of hanging the call.
	sh, err := m.shells.start(ctx, env, in.Command, cwd, in.Background)
	if err != nil {
		return BashResult{}, err
	}
	if in.Background {
		sh.detached.Store(true)
		return BashResult{ShellID: sh.id, Status: "running"}, nil
	}

	if in.TimeoutSeconds <= 0 {
		// The message names the timeout as given, as Bub's does.
		sh.detached.Store(true)
		return BashResult{ShellID: sh.id, Status: "running", TimedOut: true, TimeoutSeconds: in.TimeoutSeconds}, nil
	}
	timeout := time.NewTimer(seconds(in.TimeoutSeconds))
	defer timeout.Stop()
	var tick <-chan time.Time
	if tc.Peer != nil {
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		tick = t.C
	}
	var reported int64
	for {
		select {
		case <-sh.done:
			// The call is over, and so is whatever the command left
			// running (background jobs, setsid daemons): use a
			// background shell for what must outlive the call.
			_ = sh.proc.Signal(true)
			m.shells.remove(env, sh.id)
			out := sh.out.all()
			if sh.code != 0 {
				return BashResult{}, exitError(sh.code, out)
			}
			code := 0
			return BashResult{Status: "exited", ExitCode: &code, Output: out}, nil
		case <-ctx.Done():
			// A cancelled call takes its command down with it: the whole
			// process group, so nothing it started is left behind.
			_ = sh.proc.Signal(true)
			m.shells.remove(env, sh.id)
			return BashResult{}, &registry.Error{Kind: registry.KindTool, Message: "command cancelled", Cause: ctx.Err()}
		case <-timeout.C:
			sh.detached.Store(true)
			return BashResult{ShellID: sh.id, Status: "running", TimedOut: true, TimeoutSeconds: in.TimeoutSeconds}, nil
		case <-tick:
			if sh.out.size() != reported {
				var chunk string
				chunk, reported = sh.out.tail(reported, progressChunk)
				tc.Progress(ctx, float64(reported), 0, chunk)
			}
		}
	}
}

// exitError is Bub's failure for a non-zero exit; the details carry the
// code and the whole output for clients that parse them.
func exitError(code int, out string) *registry.Error {
	details := map[string]any{"exit_code": code, "output": out}
	if code == 127 {
		details["hint"] = "exit code 127: the command was not found"
	}
	return &registry.Error{Kind: registry.KindTool,
		Message: "command exited with code " + strconv.Itoa(code) + "\noutput:\n" + orNoOutput(strings.TrimSpace(out)),
		Details: details}
}

type bashOutputArgs struct {
	ShellID string `json:"shell_id" jsonschema_description:"The id bash returned (like bash-1a2b3c4d)."`
	Offset  int    `json:"offset,omitempty" jsonschema:"default=0" jsonschema_description:"Character offset to read from; pass the previous next_offset to poll for new output."`
	Limit   *int   `json:"limit,omitempty" jsonschema:"nullable" jsonschema_description:"Most characters to return. Default: everything from offset."`
}

// BashOutputResult is bash.output's structured result.
type BashOutputResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// ExitCode is null while the shell runs.
	ExitCode *int `json:"exit_code" jsonschema:"nullable"`
	// NextOffset is the offset to pass next time to get only new output.
	NextOffset int64  `json:"next_offset"`
	Output     string `json:"output"`
}

func renderBashOutput(r BashOutputResult) string {
	code := "null"
	if r.ExitCode != nil {
		code = strconv.Itoa(*r.ExitCode)
	}
	return fmt.Sprintf("id: %s\nstatus: %s\nexit_code: %s\nnext_offset: %d\noutput:\n%s",
		r.ID, r.Status, code, r.NextOffset, orNoOutput(strings.TrimRightFunc(r.Output, unicode.IsSpace)))
}

func (m *Module) bashOutputTool() *registry.Tool {
	return registry.MustNewTool("bash.output",
		"Read buffered output from a background shell, with optional offset/limit for incremental polling.",
		m.runBashOutput,
		registry.WithPreserve(),
		registry.WithRenderer(renderBashOutput),
		registry.WithAnnotations(registry.Annotations{Title: "Read a background shell's output", ReadOnly: true}))
}

func (m *Module) runBashOutput(ctx context.Context, tc *registry.ToolContext, in bashOutputArgs) (BashOutputResult, error) {
	// As lax as Bub's output[max(0, offset):][:max(0, limit)].
	in.Offset = max(in.Offset, 0)
	limit := int64(-1)
	if in.Limit != nil {
		limit = int64(max(*in.Limit, 0))
	}
	env, err := envOf(tc, "bash.output")
	if err != nil {
		return BashOutputResult{}, err
	}
	sh, err := m.shells.get(env, in.ShellID)
	if err != nil {
		return BashOutputResult{}, err
	}
	if !sh.proc.Running() {
		// The process exited: wait (briefly) for the rest of its output,
		// so the final read is complete.
		waitDone(ctx, sh, reapTimeout)
	}
	finished := sh.finished()
	text, next, total := sh.out.read(int64(in.Offset), limit)
	r := BashOutputResult{ID: sh.id, Status: "running", NextOffset: next, Output: text}
	if finished {
		code := sh.code
		r.Status, r.ExitCode = "exited", &code
		if next >= total {
			// The first read that reaches the end of an exited shell's
			// output reaps it, as Bub's does.
			m.shells.remove(env, sh.id)
		}
	}
	return r, nil
}

type bashKillArgs struct {
	ShellID string `json:"shell_id" jsonschema_description:"The id of the shell to stop."`
}

// BashKillResult is bash.kill's structured result.
type BashKillResult struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
}

func renderBashKill(r BashKillResult) string {
	return fmt.Sprintf("id: %s\nstatus: %s\nexit_code: %d", r.ID, r.Status, r.ExitCode)
}

func (m *Module) bashKillTool() *registry.Tool {
	return registry.MustNewTool("bash.kill",
		"Terminate a background shell process.",
		m.runBashKill,
		registry.WithPreserve(),
		registry.WithRenderer(renderBashKill),
		registry.WithAnnotations(registry.Annotations{Title: "Stop a background shell", Destructive: true, Idempotent: true}))
}

func (m *Module) runBashKill(ctx context.Context, tc *registry.ToolContext, in bashKillArgs) (BashKillResult, error) {
	env, err := envOf(tc, "bash.kill")
	if err != nil {
		return BashKillResult{}, err
	}
	sh, err := m.shells.get(env, in.ShellID)
	if err != nil {
		return BashKillResult{}, err
	}
	if sh.proc.Running() {
		_ = sh.proc.Signal(false)
		waitDone(ctx, sh, KillGrace)
	}
	// SIGKILL the group even when the shell obeyed SIGTERM or had exited:
	// children that ignore SIGTERM, or outlived the shell, must not
	// survive it.
	_ = sh.proc.Signal(true)
	if !waitDone(ctx, sh, reapTimeout) {
		if ctx.Err() != nil {
			return BashKillResult{}, &registry.Error{Kind: registry.KindTool, Message: "bash.kill cancelled", Cause: ctx.Err()}
		}
		return BashKillResult{}, fail(registry.KindTool, "shell %s did not end %v after SIGKILL", sh.id, reapTimeout)
	}
	return BashKillResult{ID: sh.id, Status: "exited", ExitCode: sh.code}, nil
}
