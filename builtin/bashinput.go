package builtin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// StdinWriteTimeout bounds one bash.input write: a shell that does not
// read its stdin fills the pipe, and the call must not wait for it
// forever.
const StdinWriteTimeout = 10 * time.Second

type bashInputArgs struct {
	ShellID    string `json:"shell_id" jsonschema_description:"The id bash returned for a background shell (like bash-1a2b3c4d)."`
	Input      string `json:"input,omitempty" jsonschema_description:"Text written to the shell's stdin exactly as given: end a line with \\n, as pressing Enter would."`
	CloseStdin bool   `json:"close_stdin,omitempty" jsonschema:"default=false" jsonschema_description:"After writing, close stdin, so the command reads end-of-file (as Ctrl-D at a terminal)."`
}

// BashInputResult is bash.input's structured result.
type BashInputResult struct {
	ID string `json:"id"`
	// Bytes is how many bytes of input were written.
	Bytes int `json:"bytes"`
	// Stdin is "open", or "closed" once close_stdin closed it.
	Stdin string `json:"stdin"`
}

func renderBashInput(r BashInputResult) string {
	return fmt.Sprintf("id: %s\nwrote: %d bytes\nstdin: %s\nRead the output with bash_output.", r.ID, r.Bytes, r.Stdin)
}

func (m *Module) bashInputTool() *registry.Tool {
	return registry.MustNewTool("bash.input",
		"Write text to the stdin of a background shell (started by bash with background=true), for commands that "+
			"read input: answer a prompt, feed a REPL. Set close_stdin=true to send end-of-file. "+
			"Read what the command prints with bash.output.",
		m.runBashInput,
		registry.WithPreserve(),
		registry.WithRenderer(renderBashInput),
		registry.WithAnnotations(registry.Annotations{Title: "Write to a background shell's stdin", Destructive: true, OpenWorld: true}))
}

func (m *Module) runBashInput(ctx context.Context, tc *registry.ToolContext, in bashInputArgs) (BashInputResult, error) {
	if in.Input == "" && !in.CloseStdin {
		return BashInputResult{}, fail(registry.KindInvalidInput, "`input` must not be empty unless close_stdin is true.")
	}
	env, err := envOf(tc, "bash.input")
	if err != nil {
		return BashInputResult{}, err
	}
	sh, err := m.shells.get(env, in.ShellID)
	if err != nil {
		return BashInputResult{}, err
	}
	switch {
	case !sh.stdin:
		return BashInputResult{}, fail(registry.KindInvalidInput,
			"shell %s was started in the foreground, and its stdin is at end-of-file; start the command with bash background=true to write to it", sh.id)
	case sh.stdinClosed.Load():
		return BashInputResult{}, fail(registry.KindInvalidInput, "the stdin of shell %s is closed (an earlier bash.input closed it)", sh.id)
	case !sh.proc.Running():
		return BashInputResult{}, exitedError(sh)
	}
	r := BashInputResult{ID: sh.id, Stdin: "open"}
	if in.Input != "" {
		wctx, cancel := context.WithTimeout(ctx, StdinWriteTimeout)
		defer cancel()
		r.Bytes, err = writeStdin(wctx, sh.proc, []byte(in.Input))
		if err != nil {
			return BashInputResult{}, stdinError(ctx, sh, r.Bytes, len(in.Input), err)
		}
	}
	if in.CloseStdin {
		sh.stdinClosed.Store(true)
		if err := sh.proc.CloseStdin(); err != nil {
			return BashInputResult{}, envError(err)
		}
		r.Stdin = "closed"
	}
	return r, nil
}

// writeStdin writes b, giving up with ctx where the process allows it.
func writeStdin(ctx context.Context, p environment.Process, b []byte) (int, error) {
	if w, ok := p.(environment.StdinContextWriter); ok {
		return w.WriteStdinContext(ctx, b)
	}
	if err := p.WriteStdin(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// exitedError refuses input for a shell whose command has ended.
func exitedError(sh *shell) *registry.Error {
	if sh.finished() {
		return fail(registry.KindInvalidInput, "shell %s has exited (exit code %d); nothing reads its stdin any more", sh.id, sh.code)
	}
	return fail(registry.KindInvalidInput, "shell %s has exited; nothing reads its stdin any more", sh.id)
}

// stdinError explains a failed write of total bytes of which n went in.
func stdinError(ctx context.Context, sh *shell, n, total int, err error) *registry.Error {
	switch {
	case ctx.Err() != nil:
		return &registry.Error{Kind: registry.KindTool, Message: "bash.input cancelled", Cause: ctx.Err()}
	case errors.Is(err, context.DeadlineExceeded):
		return &registry.Error{Kind: registry.KindTemporary, Cause: err, Details: map[string]any{"bytes": n},
			Message: fmt.Sprintf("shell %s is not reading its stdin: %d of %d bytes were written in %v; read its output with bash.output, or stop it with bash.kill", sh.id, n, total, StdinWriteTimeout)}
	case sh.stdinClosed.Load():
		return &registry.Error{Kind: registry.KindInvalidInput, Cause: err, Message: fmt.Sprintf("the stdin of shell %s is closed (another bash.input closed it)", sh.id)}
	case !sh.proc.Running(), errors.Is(err, environment.ErrStdinClosed):
		e := exitedError(sh)
		e.Cause = err
		return e
	}
	return envError(err)
}
