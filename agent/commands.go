package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bubbuild/bub-mcp/agent/command"
	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// ErrQuit is returned by Command for ,quit and ,exit.
var ErrQuit = errors.New("quit")

// HelpText is the answer to ,help.
const HelpText = `Commands start with ',' at the beginning of a line:
  ,help                               this help
  ,tools                              list the tools; ,TOOL key=value ... runs one
  ,model [provider:model]             show or set the session's model
  ,code_mode enable=true|false        turn code mode on or off for this session
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
	start := time.Now()
	line = strings.TrimSpace(line)
	name := ""
	out, err := a.command(ctx, conn, line, &name)
	status := "ok"
	text := out
	if err != nil && !errors.Is(err, ErrQuit) {
		status = "error"
		text = err.Error()
	}
	if sess, serr := a.app.Session(conn); serr == nil {
		a.event(sess.Tape(), "command", map[string]any{
			"raw": line, "name": name, "status": status,
			"elapsed_ms": time.Since(start).Milliseconds(), "output": text, "date": now(),
		})
	}
	return out, err
}

func (a *Agent) command(ctx context.Context, conn *providers.Connection, line string, name *string) (string, error) {
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
		return HelpText, nil
	case "quit", "exit":
		return "", ErrQuit
	case "tools":
		return a.listTools(ctx, conn), nil
	case "model":
		c, err := command.FromWords(words[0], words[1:])
		if err != nil {
			return "", err
		}
		return a.setModel(conn, c)
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
		// Not a tool's runtime name: the whole line is a shell command.
		bash, err := reg.Lookup("bash")
		if err != nil {
			return "", fmt.Errorf("unknown command %q (and no bash tool to run it)", words[0])
		}
		return result(a.app.Call(ctx, conn, app.Request{Tool: bash.Name, Args: mustJSON(map[string]any{"command": line}), Mode: app.Command}))
	}
	c, err := command.FromWords(words[0], words[1:])
	if err != nil {
		return "", err
	}
	args, err := c.Arguments(tool.InputSchema)
	if err != nil {
		return "", err
	}
	return result(a.app.Call(ctx, conn, app.Request{Tool: tool.Name, Args: args, Mode: app.Command}))
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

func (a *Agent) setModel(conn *providers.Connection, c *command.Command) (string, error) {
	spec := ""
	switch {
	case len(c.Positional) > 0:
		spec = c.Positional[0]
	case len(c.Keywords) > 0:
		spec = c.Keywords[0].Value
	}
	if spec == "" {
		m := a.ModelFor(conn)
		if m == "" {
			return "", ErrNoModel
		}
		return "Session model: " + m, nil
	}
	if _, _, err := model.Split(spec); err != nil {
		return "", err
	}
	if _, err := a.Client(spec); err != nil {
		return "", err
	}
	sess, err := a.app.Session(conn)
	if err != nil {
		return "", err
	}
	if err := sess.SetModel(spec); err != nil {
		return "", err
	}
	return "Session model set to " + spec + " (applies from the next turn).", nil
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
