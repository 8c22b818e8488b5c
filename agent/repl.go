package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/bubbuild/bub-mcp/agent/command"
	"github.com/bubbuild/bub-mcp/providers"
)

// REPLOptions configure a REPL.
type REPLOptions struct {
	// In is read line by line. There is no line editor: the terminal's
	// own (cooked mode) editing applies, and History keeps what was typed
	// for ,history.
	In io.Reader
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
			fmt.Fprintf(opts.Out, "bub-mcp agent · session %s · model %s · ,help for commands\n", conn.SessionKey, m)
		} else {
			fmt.Fprintf(opts.Out, "bub-mcp agent · session %s · %v\n", conn.SessionKey, ErrNoModel)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the reader when the REPL ends first
	var history []string
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
	for {
		if opts.Interactive {
			fmt.Fprint(opts.Out, prompt)
		}
		var line string
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				if opts.Interactive {
					fmt.Fprintln(opts.Out)
				}
				return nil
			}
			return err
		case line = <-lines:
		}
		text := strings.TrimSpace(line)
		if text == "" {
			continue
		}
		history = append(history, text)
		if body, ok := command.Strip(text, a.opts.Settings.CommandPrefix); ok {
			if body == "history" {
				emitOutput(sink, "history", strings.Join(history[:len(history)-1], "\n"), nil)
				continue
			}
			if errors.Is(a.emitCommand(ctx, conn, body, opts.State, sink), ErrQuit) {
				return nil
			}
			continue
		}
		if a.ModelFor(conn) == "" {
			sink.Emit(Event{Kind: EventError, Error: ErrNoModel.Error()})
			continue
		}
		// A failed turn is reported by the sink and the REPL goes on.
		_, _ = a.Run(ctx, &Turn{Conn: conn, Prompt: text, Sink: sink, State: opts.State})
	}
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
	out, err := a.CommandState(ctx, conn, body, state)
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
