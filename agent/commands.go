package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/bubbuild/bub-mcp/agent/command"
	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/internal/textmatch"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// ErrQuit is returned by Command for ,quit and ,exit.
var ErrQuit = errors.New("quit")

// Help is the answer to ,help, for commands starting with prefix.
func Help(prefix string) string {
	if prefix == "" {
		prefix = command.DefaultPrefix
	}
	return helpPrefix().ReplaceAllString(helpText, "${1}"+strings.ReplaceAll(prefix, "$", "$$"))
}

// helpPrefix finds the prefixes in helpText: commas that start a word.
var helpPrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[\s'])(,)`) })

const helpText = `Commands start with ',' at the beginning of a line:
  ,help                               this help
  ,tools                              list the tools; ,TOOL key=value ... runs one
  ,model [provider:model]             show or set the session's model; ,model '' clears it
  ,reasoning_effort [LEVEL]           show or set how hard the model thinks: none,
                                      minimal, low, medium, high, xhigh or max;
                                      '' clears it
  ,code_mode enable=true|false        turn code mode on or off for this session
  ,history                            what was typed (kept across runs; a line
                                      typed with a leading space is not kept)
  ,fs.read path=README.md             run a tool directly, without the model
  ,tape.info  ,tape.anchors  ,tape.handoff name=phase-1 summary='done'
  ,bash command='sleep 5' background=true
  ,bash.output shell_id=bash-12345678
  ,quit                               leave
Any other ',TEXT' runs TEXT with bash.`

// Command runs a comma command (line without its prefix) for a resolved
// connection, as Bub's _run_command does: a builtin (help, tools, model,
// quit), a registered tool named by its exact runtime name (arguments
// coerced laxly, no model involved, and neither hooks nor spill: the
// operator sees the whole output and is not bound by policies meant for
// the model),
// or else the whole line as a bash command. Every command is recorded on
// the session's tape as a "command" event {raw, name, status, elapsed_ms,
// output, date}. It returns the output, or an error whose text is the
// output.
func (a *Agent) Command(ctx context.Context, conn *providers.Connection, line string) (string, error) {
	return a.CommandState(ctx, conn, line, nil)
}

// CommandState is Command with the caller's request-scoped state, which
// the command's tool sees as ToolContext.State (never persisted).
func (a *Agent) CommandState(ctx context.Context, conn *providers.Connection, line string, state map[string]any) (string, error) {
	return a.runCommand(ctx, conn, line, state, nil)
}

// runCommand is CommandState whose tool reports progress to peer.
func (a *Agent) runCommand(ctx context.Context, conn *providers.Connection, line string, state map[string]any, peer registry.Peer) (string, error) {
	start := time.Now()
	line = strings.TrimSpace(line)
	name := ""
	out, err := a.command(ctx, conn, line, state, peer, &name)
	status := "ok"
	text := out
	if err != nil && !errors.Is(err, ErrQuit) {
		status = "error"
		text = err.Error()
	}
	if name == "history" && err == nil {
		// The private history file (a line typed there may hold a secret)
		// must not reach the tape, which tape.search serves to clients.
		text = "(not recorded)"
	}
	if sess, serr := a.app.Session(conn); serr == nil {
		a.event(sess.Tape(), "command", map[string]any{
			"raw": line, "name": name, "status": status,
			"elapsed_ms": time.Since(start).Milliseconds(), "output": text, "date": now(),
		})
	}
	return out, err
}

func (a *Agent) command(ctx context.Context, conn *providers.Connection, line string, state map[string]any, peer registry.Peer, name *string) (string, error) {
	words, err := command.Split(line)
	if err != nil {
		return "", err
	}
	if len(words) == 0 {
		return "", command.ErrEmpty
	}
	*name = words[0]
	reg := a.app.Registry()
	switch words[0] {
	case "help":
		return Help(a.opts.Settings.CommandPrefix), nil
	case "quit", "exit":
		return "", ErrQuit
	case "tools":
		return a.listTools(ctx, conn), nil
	case "history":
		// The REPL answers a bare ,history from what it holds; here it is
		// `agent -p ,history` (or the REPL's ,history with arguments),
		// which bash's own history builtin would answer with nothing.
		if len(words) > 1 {
			return "", fmt.Errorf("history takes no arguments (it lists the lines typed in the REPL)")
		}
		lines, err := readHistory(filepath.Join(a.app.Home(), HistoryFile))
		if err != nil {
			return "", fmt.Errorf("history: reading %s: %w", HistoryFile, err)
		}
		return historyText(lines), nil
	case "model":
		c, err := command.FromWords(words[0], words[1:])
		if err != nil {
			return "", err
		}
		return a.setModel(conn, c)
	case "reasoning_effort":
		c, err := command.FromWords(words[0], words[1:])
		if err != nil {
			return "", err
		}
		return a.setReasoningEffort(conn, c)
	case "code_mode":
		if _, err := reg.Lookup("code_mode"); err != nil {
			c, err := command.FromWords(words[0], words[1:])
			if err != nil {
				return "", err
			}
			return a.codeMode(conn, c)
		}
	}
	tool, lerr := reg.Lookup(words[0])
	if lerr != nil || tool.Name != words[0] {
		// Not a tool's runtime name: the whole line is a shell command,
		// unless it looks like a misspelt tool rather than a program.
		if near := a.nearTools(words[0]); len(near) > 0 {
			return "", fmt.Errorf("unknown command %q: did you mean %s? (to run it with bash: %sbash command=%s)", words[0], quoteNames(near), a.opts.Settings.CommandPrefix, shellQuote(line))
		}
		bash, err := reg.Lookup("bash")
		if err != nil {
			return "", fmt.Errorf("unknown command %q (and no bash tool to run it)", words[0])
		}
		return result(a.app.Call(ctx, conn, app.Request{Tool: bash.Name, Args: mustJSON(map[string]any{"command": line}), Mode: app.Command, State: state, Peer: peer}))
	}
	if cmd, ok := shellLine(tool, line, words); ok {
		return result(a.app.Call(ctx, conn, app.Request{Tool: tool.Name, Args: mustJSON(map[string]any{"command": cmd}), Mode: app.Command, State: state, Peer: peer}))
	}
	c, err := command.FromWords(words[0], words[1:])
	if err != nil {
		return "", err
	}
	args, err := c.Arguments(tool.InputSchema)
	if err != nil {
		return "", err
	}
	return result(a.app.Call(ctx, conn, app.Request{Tool: tool.Name, Args: args, Mode: app.Command, State: state, Peer: peer}))
}

// shellLine returns the shell command a ",bash ..." line means when its
// words are not bash's own arguments: ",bash echo hi" runs "echo hi"
// rather than reading "hi" as the second positional argument (cwd). The
// words are bash's arguments only when there is at most one positional
// word (",bash 'echo hi'") and every key=value names a parameter
// (",bash command='sleep 5' background=true"); otherwise the rest of the
// line, as typed, is the command.
func shellLine(tool *registry.Tool, line string, words []string) (string, bool) {
	if tool.Name != "bash" || len(words) < 2 || !strings.HasPrefix(line, words[0]) {
		return "", false
	}
	if c, err := command.FromWords(words[0], words[1:]); err == nil && len(c.Positional) <= 1 {
		params := command.PropertyNames(tool.InputSchema)
		known := true
		for _, k := range c.Keywords {
			known = known && slices.Contains(params, k.Key)
		}
		if known {
			return "", false
		}
	}
	return strings.TrimSpace(line[len(words[0]):]), true
}

// historyText is the answer to ,history: the lines, oldest first, or a
// sentence saying there are none yet.
func historyText(lines []string) string {
	if len(lines) == 0 {
		return "No history yet: the lines typed in the REPL are kept in $BUB_HOME/" + HistoryFile + "."
	}
	return strings.Join(lines, "\n")
}

// SessionCommands are the builtin commands that are no tool: they act on
// the session or the REPL. `bub-mcp call` runs them as the REPL does.
var SessionCommands = []string{"help", "model", "reasoning_effort", "quit", "exit", "tools"}

// CommandWords runs a command already split into words (by a shell, as
// `bub-mcp call` receives them), as CommandState runs its line.
func (a *Agent) CommandWords(ctx context.Context, conn *providers.Connection, words []string, state map[string]any) (string, error) {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = w
		if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`;&|<>()*?[]#~") {
			q[i] = shellQuote(w)
		}
	}
	return a.CommandState(ctx, conn, strings.Join(q, " "), state)
}

// result turns a call's outcome into command output: the text, or an error
// reading "[kind] message" with the details on the next line.
func result(r registry.Result) (string, error) {
	if r.Err == nil {
		return r.Text, nil
	}
	msg := r.Err.Error()
	if len(r.Err.Details) > 0 {
		msg += "\n" + pyJSON(anyMap(r.Err.Details))
	}
	return "", errors.New(msg)
}

func anyMap(m map[string]any) any {
	var v any
	if err := json.Unmarshal(mustJSON(m), &v); err != nil {
		return m
	}
	return v
}

func (a *Agent) listTools(ctx context.Context, conn *providers.Connection) string {
	visible := map[string]bool{}
	c := *conn
	if err := a.app.Resolve(ctx, &c); err == nil {
		if v, err := a.app.View(ctx, &c); err == nil {
			for _, t := range v.Tools {
				visible[t.Name] = true
			}
			for _, t := range v.CodeTools {
				visible[t.Name] = true
			}
		}
	}
	tools := a.app.Registry().Tools()
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, t := range tools {
		mark := ""
		switch {
		case t.CommandOnly:
			mark = "(command)"
		case !visible[t.Name]:
			mark = "(not for the model)"
		}
		desc, _, _ := strings.Cut(t.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, mark, desc)
	}
	tw.Flush()
	return strings.TrimRight(b.String(), "\n")
}

// argument is a session command's one value, positional or keyword;
// given is false when there is none (",model" shows the model, while
// ",model ”" clears it).
func argument(c *command.Command) (v string, given bool) {
	switch {
	case len(c.Positional) > 0:
		return c.Positional[0], true
	case len(c.Keywords) > 0:
		return c.Keywords[0].Value, true
	}
	return "", false
}

func (a *Agent) setModel(conn *providers.Connection, c *command.Command) (string, error) {
	spec, given := argument(c)
	sess, err := a.app.Session(conn)
	if err != nil {
		return "", err
	}
	spec = strings.TrimSpace(spec)
	switch {
	case !given:
		m := a.ModelFor(conn)
		if m == "" {
			return "", ErrNoModel
		}
		return "Session model: " + m, nil
	case spec == "":
		if err := sess.SetModel(""); err != nil {
			return "", err
		}
		if m := a.opts.Settings.Model; m != "" {
			return "Session model cleared: turns use " + m + " (applies from the next turn).", nil
		}
		return "Session model cleared (applies from the next turn); no default model is configured.", nil
	}
	if _, _, err := model.Split(spec); err != nil {
		return "", err
	}
	if err := a.checkModel(spec); err != nil {
		return "", err
	}
	if err := sess.SetModel(spec); err != nil {
		return "", err
	}
	return "Session model set to " + spec + " (applies from the next turn).", nil
}

// setReasoningEffort is ,reasoning_effort: it shows, sets (recorded as a
// reasoning_effort_switch event, replayed each turn) or, with ”, clears
// how hard the session's model reasons.
func (a *Agent) setReasoningEffort(conn *providers.Connection, c *command.Command) (string, error) {
	v, given := argument(c)
	sess, err := a.app.Session(conn)
	if err != nil {
		return "", err
	}
	v = strings.ToLower(strings.TrimSpace(v))
	switch {
	case !given:
		if e := sess.Settings().ReasoningEffort; e != "" {
			return "Session reasoning effort: " + e, nil
		}
		return "Session reasoning effort: the model's default", nil
	case v == "":
		if err := sess.SetReasoningEffort(""); err != nil {
			return "", err
		}
		return "Session reasoning effort cleared (applies from the next turn).", nil
	case !slices.Contains(model.ReasoningEfforts, v):
		return "", fmt.Errorf("reasoning_effort: %q is not one of %s", v, strings.Join(model.ReasoningEfforts, ", "))
	}
	if err := sess.SetReasoningEffort(v); err != nil {
		return "", err
	}
	return "Session reasoning effort set to " + v + " (applies from the next turn).", nil
}

// nearTools returns the registered tools a command word is probably a
// misspelling of: close runtime names (Bub's difflib cutoff), when the
// word is no program on PATH, so ",ls" still runs ls.
func (a *Agent) nearTools(word string) []string {
	if _, err := exec.LookPath(word); err == nil {
		return nil
	}
	return textmatch.CloseMatches(word, a.app.Registry().Names(), 3, 0.75)
}

func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// shellQuote quotes s for a command line, as Python's shlex.quote does.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// codeMode is ,code_mode for binaries without the code_mode command tool.
func (a *Agent) codeMode(conn *providers.Connection, c *command.Command) (string, error) {
	v := ""
	if len(c.Positional) > 0 {
		v = c.Positional[0]
	}
	for _, k := range c.Keywords {
		if k.Key == "enable" {
			v = k.Value
		}
	}
	var enable bool
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on":
		enable = true
	case "false", "0", "no", "off":
	default:
		return "", fmt.Errorf("code_mode: enable must be true or false, got %q", v)
	}
	sess, err := a.app.Session(conn)
	if err != nil {
		return "", err
	}
	if err := sess.SetCodeMode(enable); err != nil {
		return "", err
	}
	state := "disabled"
	if enable {
		state = "enabled"
	}
	return "Session code mode " + state + " (applies from the next turn).", nil
}
