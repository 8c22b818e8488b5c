package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/bubbuild/bub-mcp/builtin"
	"github.com/bubbuild/bub-mcp/host"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

func init() {
	var (
		c      common
		asJSON bool
	)
	register(&Command{
		Name:  "call",
		Usage: "[--session S] [--profile P] [--workspace DIR] [--json] TOOL [key=value ...]",
		Short: "run one tool by its runtime name, as the comma command ,TOOL key=value ... would",
		Flags: func(fs *flag.FlagSet) {
			c.flags(fs)
			fs.StringVar(&c.session, "session", "", "session whose tape, settings and shells the call uses (default: the profile's)")
			fs.BoolVar(&asJSON, "json", false, "print the structured result as JSON instead of the rendered text")
		},
		Run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			return runCall(ctx, env, fs, &c, asJSON, args)
		},
	})
	hostSetups = append(hostSetups, configureBuiltin)
}

// configureBuiltin hands the [web] settings to the builtin tools;
// BUB_WEB_ALLOW_LOOPBACK overrides allow_loopback.
func configureBuiltin(ctx context.Context, env *Env, o *host.Options) error {
	allow := o.Config.Web.AllowLoopback
	if v := env.Getenv("BUB_WEB_ALLOW_LOOPBACK"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("BUB_WEB_ALLOW_LOOPBACK=%q: want true or false", v)
		}
		allow = b
	}
	builtin.Configure(builtin.Options{AllowLoopback: allow, MaxBytes: o.Config.Web.MaxBytes})
	return nil
}

func runCall(ctx context.Context, env *Env, fs *flag.FlagSet, c *common, asJSON bool, args []string) error {
	if len(args) == 1 && strings.ContainsAny(args[0], " \t\n") {
		// The whole command in one argument: split it as a shell would.
		words, err := splitWords(args[0])
		if err != nil {
			return &usageError{err.Error()}
		}
		args = words
	}
	if len(args) > 0 {
		args[0] = strings.TrimPrefix(args[0], ",")
	}
	if len(args) == 0 || args[0] == "" {
		return &usageError{"empty command: name a tool (see bub-mcp tools)"}
	}
	for _, a := range args[1:] {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && fs.Lookup(name) != nil {
			return &usageError{fmt.Sprintf("flag %s must come before the tool name", a)}
		}
	}

	if env.Getenv("BUB_LOG_LEVEL") == "" && env.Getenv("BUB_VERBOSE") == "" {
		// The call's outcome is printed below; the executor's info record
		// of a failed call would only say it twice.
		quiet := *env
		quiet.Logger = slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		env = &quiet
	}
	h, err := newHost(ctx, env, c)
	if err != nil {
		return err
	}
	defer func() {
		if err := h.Close(); err != nil {
			env.Logger.Warn("host.close", "error", err)
		}
	}()
	tool, lerr := h.Registry().Lookup(args[0])
	if lerr != nil {
		return printToolError(env, registry.AsError(lerr, registry.KindNotFound))
	}
	callArgs, err := commandArgs(tool, args[1:])
	if err != nil {
		return &usageError{err.Error()}
	}
	conn := providers.Connection{Transport: "cli", Profile: c.profile, SessionKey: c.session}
	if err := h.Resolve(ctx, &conn); err != nil {
		return err
	}
	res := h.CallCommand(ctx, &conn, tool.Name, callArgs, nil)
	if res.Err != nil {
		return printToolError(env, res.Err)
	}
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(res.Value)
	}
	text := res.Text
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, err = fmt.Fprint(env.Stdout, text)
	return err
}

// printToolError writes "[kind] message" and the details to stderr and
// makes the command exit with status 1.
func printToolError(env *Env, e *registry.Error) error {
	fmt.Fprintln(env.Stderr, e.Error())
	if len(e.Details) > 0 {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e.Details); err == nil {
			fmt.Fprint(env.Stderr, b.String())
		}
	}
	return &ExitError{Code: 1}
}

// commandArgs turns comma-command words into the call's JSON arguments:
// key=value words are keyword arguments (split at the first "="), other
// words fill the tool's parameters in schema order, and must come first.
// Every value is a string; the executor's lax coercion makes "5" an
// integer where the schema wants one, as Bub's pydantic does.
func commandArgs(t *registry.Tool, words []string) (json.RawMessage, error) {
	kw := map[string]any{}
	var pos []string
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok && k != "" {
			kw[k] = v
			continue
		}
		if len(kw) > 0 {
			return nil, fmt.Errorf("positional argument '%s' cannot appear after keyword arguments", w)
		}
		pos = append(pos, w)
	}
	if len(pos) > 0 {
		params := propertyNames(t.InputSchema)
		if len(pos) > len(params) {
			return nil, fmt.Errorf("%s takes at most %d positional arguments (%s), got %d", t.Name, len(params), strings.Join(params, ", "), len(pos))
		}
		for i, v := range pos {
			if _, dup := kw[params[i]]; dup {
				return nil, fmt.Errorf("%s got multiple values for argument '%s'", t.Name, params[i])
			}
			kw[params[i]] = v
		}
	}
	return json.Marshal(kw)
}

// propertyNames lists a schema's top-level properties in the order they
// are written, which is the order of the tool's parameters.
func propertyNames(schema json.RawMessage) []string {
	var root struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &root) != nil || len(root.Properties) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(root.Properties))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return names
		}
		name, _ := tok.(string)
		names = append(names, name)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return names
		}
	}
	return names
}

// splitWords splits a command line the way POSIX shells (and Python's
// shlex.split) do: whitespace separates words, single quotes keep
// everything, double quotes keep everything but backslash escapes of
// \ " $ ` and newline, and a backslash outside quotes escapes the next
// character.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			inWord = true
			if i+1 >= len(s) {
				return nil, errors.New("no escaped character after the final backslash")
			}
			i++
			cur.WriteByte(s[i])
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("no closing quotation")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if !closed {
				return nil, errors.New("no closing quotation")
			}
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
