package codemode

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"

	"github.com/bubbuild/bub-mcp/codemode/pystub"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// RunCodeName is the runtime (and model) name of the run_code tool.
const RunCodeName = "run_code"

// StubURI is the MCP resource under which a server may offer the caller's
// stub, for clients that cannot read files.
const StubURI = "bub://codemode/stub"

// Options configure Provider. The zero value writes stubs under the
// default $BUB_HOME and checks for "python3".
type Options struct {
	// Home is $BUB_HOME, under whose codemode/ directory stubs are
	// written; "" means sessions.DefaultHome(). A relative path is made
	// absolute, as the stub's path goes into prompts.
	Home string
	// Python is the interpreter run_code needs; "" means "python3". When
	// it cannot be found in PATH (exec.LookPath), Provider logs one
	// warning and never offers run_code: every View falls back to direct
	// tools.
	Python string
	// LookPath finds Python; nil means exec.LookPath.
	LookPath func(file string) (string, error)
	// Logger receives the warning about a missing Python and stub write
	// failures; nil means slog.Default().
	Logger *slog.Logger
}

// Provider returns the code-mode split for a host's view chain (Bub's
// CodeModeCatalog). Code mode is active for a connection when its
// CodeMode switch is on, run_code is in its scope and at least one tool in
// scope can be used from code (Tool.CodeUse). Then the View lists the
// preserved tools plus run_code, and every other tool moves to
// View.CodeTools, reachable only as `await tools.<model_name>(...)` inside
// run_code. The stub declaring them is written under Home, and the prompt
// pointing to it goes both into the View's instructions and into the
// listed run_code's description, since many clients ignore instructions.
//
// Otherwise the tools stay direct and run_code is not listed. It is never
// listed when Python is missing; Provider checks that once, now.
func Provider(opts *Options) providers.CodeModeFunc {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	available := true
	if _, err := o.LookPath(o.Python); err != nil {
		available = false
		o.Logger.Warn("codemode.python.missing", "python", o.Python, "error", err,
			"effect", "run_code is not offered; code mode falls back to direct tools",
			"fix", "install Python or set [codemode] python in bub.toml")
	}
	return func(ctx context.Context, conn *providers.Connection, tools []*registry.Tool) (direct, code []*registry.Tool, prompt string, err error) {
		var runCode *registry.Tool
		rest := make([]*registry.Tool, 0, len(tools))
		for _, t := range tools {
			switch {
			case t.CommandOnly:
			case t.Name == RunCodeName:
				runCode = t
			default:
				rest = append(rest, t)
			}
		}
		if !available || runCode == nil || !conn.CodeMode {
			return rest, nil, "", nil
		}
		for _, t := range rest {
			if t.CodeUse() {
				code = append(code, t)
			} else {
				direct = append(direct, t)
			}
		}
		if len(code) == 0 {
			return rest, nil, "", nil
		}
		home := o.Home
		if home == "" {
			if home, err = sessions.DefaultHome(); err != nil {
				return nil, nil, "", fmt.Errorf("codemode: %w", err)
			}
		}
		if home, err = filepath.Abs(home); err != nil {
			return nil, nil, "", fmt.Errorf("codemode: %w", err)
		}
		path, err := writeStub(home, conn, code)
		if err != nil {
			// Without a stub the model cannot know the tools' signatures:
			// fall back to direct tools rather than fail the whole View.
			o.Logger.WarnContext(ctx, "codemode.stub.failed", "session", conn.SessionKey, "error", err)
			return rest, nil, "", nil
		}
		prompt = Prompt(path)
		rc := *runCode
		rc.Description = runCode.Description + "\n\n" + prompt
		return append(direct, &rc), code, prompt, nil
	}
}

// Stub renders the stub that declares tools (a View's CodeTools) under
// their model names.
func Stub(tools []*registry.Tool) (string, error) {
	st := make([]pystub.Tool, len(tools))
	for i, t := range tools {
		st[i] = pystub.Tool{Name: t.ModelName(), Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema}
	}
	content, err := pystub.Generate(st)
	if err != nil {
		return "", fmt.Errorf("codemode: %w", err)
	}
	return content, nil
}

// writeStub renders and stores the stub for a connection's code tools.
func writeStub(home string, conn *providers.Connection, code []*registry.Tool) (string, error) {
	content, err := Stub(code)
	if err != nil {
		return "", err
	}
	return WriteStub(home, conn.Workspace, conn.SessionKey, content)
}

// ViewStub returns the stub of a View's code tools and where Provider
// stored it; ok is false when code mode is not active in the View.
func ViewStub(home string, conn *providers.Connection, v *providers.View) (content, path string, ok bool, err error) {
	if len(v.CodeTools) == 0 {
		return "", "", false, nil
	}
	if content, err = Stub(v.CodeTools); err != nil {
		return "", "", false, err
	}
	return content, StubPath(home, conn.Workspace, conn.SessionKey, content), true, nil
}
