package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bubbuild/bub-mcp/agent/command"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// REPLOptions configure a REPL.
type REPLOptions struct {
	// In is read line by line when there is no Editor (a pipe, a file):
	// the terminal's own cooked-mode editing applies.
	In io.Reader
	// Editor, when set, reads the lines instead of In: a line editor with
	// history on the arrow keys and Ctrl-R, kept across runs in
	// $BUB_HOME/agent_history (HistoryFile), Tab completing the comma
	// commands and tool names, Ctrl-C discarding the line (on an empty
	// one it says how to leave) and Ctrl-D on an empty line leaving.
	Editor *LineEditor
	// Interrupt delivers Ctrl-C (SIGINT) while a turn or command runs: it
	// cancels that turn, and the REPL goes on. Nil means none.
	Interrupt <-chan struct{}
	// Out receives prompts and command output; the Sink renders turns.
	Out  io.Writer
	Sink Sink
	// Interactive prints the greeting and a prompt before each line.
	Interactive bool
	// Prompt is printed before each line; default "bub> ".
	Prompt string
	// State is the caller's request-scoped state, given to every turn and
	// command (Turn.State).
	State map[string]any
}

// Activity is implemented by sinks that show, on a terminal, that a turn
// or command is running (the TerminalRenderer with Live set): Begin when
// it starts, Progress for each chunk a tool streams (bash's output), End
// when it is over.
type Activity interface {
	Begin(label string)
	Progress(message string)
	End()
}

// REPL reads prompts and comma commands until EOF, ,quit or ctx ends.
// Lines starting with the command prefix ("," unless [agent]
// command_prefix or BUB_COMMAND_PREFIX says otherwise) are commands;
// other non-empty lines run a turn.
// Without a model it still runs commands and says once how to configure
// one.
func (a *Agent) REPL(ctx context.Context, conn *providers.Connection, opts REPLOptions) error {
	sink := opts.Sink
	if sink == nil {
		sink = discard{}
	}
	prompt := opts.Prompt
	if prompt == "" {
		prompt = "bub> "
	}
	if opts.Interactive {
		if m := a.ModelFor(conn); m != "" {
			fmt.Fprintf(opts.Out, "bub-mcp agent · session %s · model %s · %shelp for commands\n", conn.SessionKey, m, a.CommandPrefix())
		} else {
			fmt.Fprintf(opts.Out, "bub-mcp agent · session %s · %v\n", conn.SessionKey, ErrNoModel)
		}
	}
	if ed := opts.Editor; ed != nil {
		ed.SetCompleter(a.completions)
		warn := func(err error) { fmt.Fprintf(opts.Out, "%v (the history of this run is not kept)\n", err) }
		if err := ed.SetHistoryFile(filepath.Join(a.app.Home(), HistoryFile)); err != nil {
			warn(err)
		}
		ed.onSaveError(warn)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the reader when the REPL ends first
	read := a.lineReader(ctx, opts, prompt)
	var typed []string // for ,history without an editor
	for {
		line, err := read()
		if errors.Is(err, ErrLineDiscarded) {
			fmt.Fprintf(opts.Out, "(Ctrl-D or %squit leaves)\n", a.CommandPrefix())
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
				if opts.Interactive {
					fmt.Fprintln(opts.Out)
				}
				return nil
			}
			return err
		}
		text := strings.TrimSpace(line)
		if text == "" {
			continue
		}
		typed = append(typed, text)
		if body, ok := command.Strip(text, a.opts.Settings.CommandPrefix); ok {
			if body == "history" {
				past := typed[:len(typed)-1]
				if opts.Editor != nil {
					past = opts.Editor.History()
					if n := len(past); n > 0 && past[n-1] == line {
						past = past[:n-1] // this ,history itself
					}
				}
				emitOutput(sink, "history", historyText(past), nil)
				continue
			}
			quit := false
			a.running(ctx, opts, sink, firstWord(body), func(ctx context.Context, peer registry.Peer) {
				quit = errors.Is(a.emitCommandPeer(ctx, conn, body, opts.State, peer, sink), ErrQuit)
			})
			if quit {
				return nil
			}
			continue
		}
		if a.ModelFor(conn) == "" {
			sink.Emit(Event{Kind: EventError, Error: ErrNoModel.Error()})
			continue
		}
		// A failed turn is reported by the sink and the REPL goes on.
		a.running(ctx, opts, sink, "turn", func(ctx context.Context, peer registry.Peer) {
			_, _ = a.Run(ctx, &Turn{Conn: conn, Prompt: text, Sink: sink, State: opts.State, Peer: peer})
		})
	}
}

// lineReader returns the REPL's source of lines: the editor, or In read
// by a goroutine so that ctx can end the wait.
func (a *Agent) lineReader(ctx context.Context, opts REPLOptions, prompt string) func() (string, error) {
	if ed := opts.Editor; ed != nil {
		return func() (string, error) {
			type result struct {
				line string
				err  error
			}
			done := make(chan result, 1)
			go func() {
				line, err := ed.ReadLine(prompt)
				done <- result{line, err}
			}()
			select {
			case r := <-done:
				return r.line, r.err
			case <-ctx.Done():
				ed.Close() // give the terminal back; the read ends with the process
				return "", ctx.Err()
			}
		}
	}
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		r := bufio.NewReader(opts.In)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				select {
				case lines <- strings.TrimRight(line, "\r\n"):
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	return func() (string, error) {
		if opts.Interactive {
			fmt.Fprint(opts.Out, prompt)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case err := <-readErr:
			return "", err
		case line := <-lines:
			return line, nil
		}
	}
}

// running runs one turn or command: Ctrl-C (opts.Interrupt) cancels it,
// not the REPL, and an Activity sink shows it running, with what its
// tools stream.
func (a *Agent) running(ctx context.Context, opts REPLOptions, sink Sink, label string, run func(ctx context.Context, peer registry.Peer)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for drained := false; !drained; { // a Ctrl-C typed before the turn began is not for it
		select {
		case <-opts.Interrupt:
		default:
			drained = true
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-opts.Interrupt:
			cancel()
		case <-stop:
		}
	}()
	var peer registry.Peer
	if act, ok := sink.(Activity); ok {
		act.Begin(label)
		defer act.End()
		peer = progressPeer{act}
	}
	run(ctx, peer)
}

// progressPeer shows a tool's progress messages (bash's streamed output)
// through an Activity; it has no model or human to ask.
type progressPeer struct{ act Activity }

func (p progressPeer) Progress(ctx context.Context, progress, total float64, message string) {
	if message != "" {
		p.act.Progress(message)
	}
}

// Log shows a tool's notices of level info and above on the status line:
// the approval hook says there that a call waits in the operator console,
// which would otherwise look like a hang.
func (p progressPeer) Log(_ context.Context, level slog.Level, _ string, data any) {
	if msg, ok := data.(string); ok && level >= slog.LevelInfo && msg != "" {
		p.act.Progress(msg)
	}
}

func (progressPeer) Sample(context.Context, registry.SampleRequest) (*registry.SampleResult, error) {
	return nil, registry.ErrNoPeer
}

func (progressPeer) Elicit(context.Context, registry.ElicitRequest) (*registry.ElicitResult, error) {
	return nil, registry.ErrNoPeer
}

// completions are what Tab completes a line's start to: the comma
// commands, builtin and tools (by runtime name).
func (a *Agent) completions() []string {
	prefix := a.CommandPrefix()
	names := append(slices.Clone(SessionCommands), "code_mode", "history")
	names = append(names, a.app.Registry().Names()...)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	return w
}

// Once runs a single prompt or comma command (t.Prompt), as `bub-mcp
// agent -p` does, and reports whether it succeeded. A command's output is
// emitted as text and final events; a command uses t's Conn, State and
// Sink only.
func (a *Agent) Once(ctx context.Context, t *Turn) error {
	sink := t.Sink
	if sink == nil {
		sink = discard{}
	}
	if body, ok := command.Strip(t.Prompt, a.opts.Settings.CommandPrefix); ok {
		err := a.emitCommand(ctx, t.Conn, body, t.State, sink)
		if errors.Is(err, ErrQuit) {
			return nil
		}
		return err
	}
	_, err := a.Run(ctx, t)
	return err
}

// emitCommand runs a comma command and emits its output as a model turn
// would, so one consumer handles both (Bub's commands emit text and
// final): a text event with the output and a final event naming the
// command, or an error event for a failed one. The failure is the
// operator's to read; unlike a model's failed tool call it never goes to
// the model. ,quit emits nothing and only returns ErrQuit.
func (a *Agent) emitCommand(ctx context.Context, conn *providers.Connection, body string, state map[string]any, sink Sink) error {
	return a.emitCommandPeer(ctx, conn, body, state, nil, sink)
}

// emitCommandPeer is emitCommand whose tool reports progress to peer.
func (a *Agent) emitCommandPeer(ctx context.Context, conn *providers.Connection, body string, state map[string]any, peer registry.Peer, sink Sink) error {
	out, err := a.runCommand(ctx, conn, body, state, peer)
	if errors.Is(err, ErrQuit) {
		return err
	}
	emitOutput(sink, firstWord(body), out, err)
	return err
}

// emitOutput emits a command's outcome: text and final, or error.
func emitOutput(sink Sink, name, out string, err error) {
	if err != nil {
		sink.Emit(Event{Kind: EventError, Name: name, Error: err.Error()})
		return
	}
	if out != "" {
		sink.Emit(Event{Kind: EventText, Delta: out})
	}
	sink.Emit(Event{Kind: EventFinal, Name: name, Text: out})
}
