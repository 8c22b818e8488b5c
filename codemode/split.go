package codemode

import (
	"context"
	"fmt"

	"github.com/bubbuild/bub-mcp/codemode/pystub"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// RunCodeName is the runtime (and model) name of the run_code tool.
const RunCodeName = "run_code"

// StubURI is the MCP resource under which the caller's stub is offered,
// for clients that cannot read files.
const StubURI = "bub://codemode/stub"

// Split is the module's code-mode split (Bub's CodeModeCatalog), which
// Provision installs with app.App.SetCodeMode. Code mode is active for a
// connection when its CodeMode switch is on, run_code is in its scope,
// Python was found and at least one tool in scope can be used from code
// (Tool.CodeUse) and is admitted by the profile's code_mode_tools (globs
// and annotation hints such as "hint:read_only"; unset admits all). Then
// the View lists the preserved tools plus run_code,
// and every other tool moves to View.CodeTools, reachable only as
// `await tools.<model_name>(...)` inside run_code. The prompt naming the
// stub goes both into the View's instructions and into the listed
// run_code's description, since many clients ignore instructions.
// Otherwise the tools stay direct and run_code is not listed.
//
// Split writes nothing: the stub is in Split.Files, under StubPath, for
// the App to write when it hands the View out. It needs a provisioned
// Module.
func (m *Module) Split(ctx context.Context, conn *providers.Connection, tools []*registry.Tool) (providers.Split, error) {
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
	if !m.available || runCode == nil || !conn.CodeMode {
		return providers.Split{Direct: rest}, nil
	}
	var direct, code []*registry.Tool
	rules := m.admit[conn.Profile]
	for _, t := range rest {
		if t.CodeUse() && (len(rules) == 0 || config.MatchToolRules(rules, t)) {
			code = append(code, t)
		} else {
			direct = append(direct, t)
		}
	}
	if len(code) == 0 {
		return providers.Split{Direct: rest}, nil
	}
	content, err := Stub(code)
	if err != nil {
		// Without a stub the model cannot know the tools' signatures:
		// fall back to direct tools rather than fail the whole View.
		m.log.WarnContext(ctx, "codemode.stub.failed", "session", conn.SessionKey, "error", err)
		return providers.Split{Direct: rest}, nil
	}
	path := StubPath(m.home, conn.Workspace, conn.SessionKey, content)
	prompt := Prompt(path)
	rc := *runCode
	rc.Description = runCode.Description + "\n\n" + prompt
	return providers.Split{Direct: append(direct, &rc), Code: code, Prompt: prompt, Files: map[string]string{path: content}}, nil
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

// ViewStub returns the stub of a View's code tools and where Split placed
// it under home; ok is false when code mode is not active in the View.
func ViewStub(home string, conn *providers.Connection, v *providers.View) (content, path string, ok bool, err error) {
	if len(v.CodeTools) == 0 {
		return "", "", false, nil
	}
	if content, err = Stub(v.CodeTools); err != nil {
		return "", "", false, err
	}
	return content, StubPath(home, conn.Workspace, conn.SessionKey, content), true, nil
}
