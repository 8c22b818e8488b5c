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
}

// REPL reads prompts and comma commands until EOF, ,quit or ctx ends.
// Lines starting with "," are commands; other non-empty lines run a turn.
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
		if body, ok := command.Strip(text, ""); ok {
			if body == "history" {
				sink.Emit(Event{Kind: EventCommand, Name: "history", Text: strings.Join(history[:len(history)-1], "\n")})
				continue
			}
			if errors.Is(a.emitCommand(ctx, conn, body, sink), ErrQuit) {
				return nil
			}
			continue
		}
		if a.ModelFor(conn) == "" {
			sink.Emit(Event{Kind: EventError, Error: ErrNoModel.Error()})
			continue
		}
		// A failed turn is reported by the sink and the REPL goes on.
		_, _ = a.Run(ctx, &Turn{Conn: conn, Prompt: text, Sink: sink})
	}
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	return w
}

// Once runs a single prompt or comma command, as `bub-mcp agent -p` does,
// and reports whether it succeeded. A command's output is emitted as a
// command event.
func (a *Agent) Once(ctx context.Context, conn *providers.Connection, prompt string, sink Sink) error {
	if sink == nil {
		sink = discard{}
	}
	if body, ok := command.Strip(prompt, ""); ok {
		err := a.emitCommand(ctx, conn, body, sink)
		if errors.Is(err, ErrQuit) {
			return nil
		}
		return err
	}
	_, err := a.Run(ctx, &Turn{Conn: conn, Prompt: prompt, Sink: sink})
	return err
}

// emitCommand runs a comma command and emits its output as a command
// event, except for ,quit, whose ErrQuit it only returns.
func (a *Agent) emitCommand(ctx context.Context, conn *providers.Connection, body string, sink Sink) error {
	out, err := a.Command(ctx, conn, body)
	if errors.Is(err, ErrQuit) {
		return err
	}
	ev := Event{Kind: EventCommand, Name: firstWord(body), Text: out}
	if err != nil {
		ev.Error = err.Error()
	}
	sink.Emit(ev)
	return err
}
