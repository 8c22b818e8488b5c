package upstream_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	_ "github.com/bubbuild/bub-mcp/confirm" // confirm by hint
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// overridden is fakeupstream's echo renamed, retitled, described, hinted
// read-only and with its mode argument fixed; big keeps the upstream's
// (absent, so destructive) hints, and an override names a tool the
// server does not list (a warning, not an error).
const overridden = `
[upstreams.fake.overrides.echo]
name = "say"
title = "Say it"
description = "Say something."
read_only = true
destructive = false
idempotent = true
open_world = false
[upstreams.fake.overrides.echo.fixed]
mode = "loud"
[upstreams.fake.overrides.later]
title = "Not there yet"
`

// An override renames, retitles, describes and hints a tool, hides a
// fixed argument from its schema and sends it on every call; a client
// sees only the overridden definition and calls it by its new name.
func TestOverridesRenameHintAndFixArguments(t *testing.T) {
	h := newHost(t, fakeTable(t, "fake", overridden, "-echo"), "")
	if names := h.registered(); !slices.Contains(names, "fake.say") || slices.Contains(names, "fake.echo") {
		t.Fatalf("registered %v: want fake.say instead of fake.echo", names)
	}
	c, _ := h.serve(t)
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var say *mcp.Tool
	for i := range res.Tools {
		if res.Tools[i].Name == "fake_say" {
			say = &res.Tools[i]
		}
		if res.Tools[i].Name == "fake_echo" {
			t.Error("fake_echo is listed under its upstream name")
		}
	}
	if say == nil {
		t.Fatal("fake_say is not listed")
	}
	type shown struct {
		Description, Title                           string
		ReadOnly, Destructive, Idempotent, OpenWorld *bool
		Schema                                       map[string]any
	}
	var schema map[string]any
	raw, _ := json.Marshal(say.InputSchema)
	if len(say.RawInputSchema) > 0 {
		raw = say.RawInputSchema
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	got := shown{say.Description, say.Annotations.Title, say.Annotations.ReadOnlyHint, say.Annotations.DestructiveHint,
		say.Annotations.IdempotentHint, say.Annotations.OpenWorldHint, schema}
	want := shown{"Say something.", "Say it", &yes, &no, &yes, &no, map[string]any{
		"type": "object", "properties": map[string]any{"msg": map[string]any{"type": "string"}}, "required": []any{"msg"}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("fake_say as listed (-want +got):\n%s", d)
	}

	call := func(args map[string]any) (string, bool) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "fake_say", args
		r, err := c.CallTool(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return r.Content[0].(mcp.TextContent).Text, r.IsError
	}
	if text, isErr := call(map[string]any{"msg": "hi"}); isErr || text != `{"mode":"loud","msg":"hi"}` {
		t.Errorf("fake_say {msg: hi} = %q (error %v); want the fixed mode sent", text, isErr)
	}
	if text, isErr := call(map[string]any{"msg": "hi", "mode": "quiet"}); !isErr || !strings.Contains(text, "'mode' are fixed") {
		t.Errorf("fake_say with mode = %q (error %v); want a refusal naming the fixed argument", text, isErr)
	}
}

// Pins hash the upstream's definition, not the overridden one: changing
// an override (here the new name) quarantines nothing.
func TestOverrideChangeIsNotAPinChange(t *testing.T) {
	home := t.TempDir()
	newHost(t, fakeTable(t, "fake", overridden, "-echo"), home).Close()
	h := newHost(t, fakeTable(t, "fake", strings.Replace(overridden, `name = "say"`, `name = "speak"`, 1), "-echo"), home)
	if names := h.registered(); !slices.Contains(names, "fake.speak") {
		t.Fatalf("registered %v: the renamed fake.speak is missing (quarantined?)", names)
	}
	if s := h.status(t, "fake"); s.Quarantined > 0 {
		t.Errorf("%d quarantined after an override change", s.Quarantined)
	}
}

// confirm = ["hint:destructive"] confirms the tools whose (overridden)
// hints say destructive: a client without elicitation is refused those,
// and not the tool an override made read-only.
func TestConfirmByHint(t *testing.T) {
	src := fakeTable(t, "fake", overridden, "-echo") + "[profiles.default]\nconfirm = [\"hint:destructive\"]\n"
	h := newHost(t, src, "", "confirm")
	c, _ := h.serve(t)
	for _, tc := range []struct {
		tool    string
		args    map[string]any
		refused bool
	}{
		{"fake_big", map[string]any{"bytes": 3}, true},  // no hints: destructive by MCP's default
		{"fake_say", map[string]any{"msg": "x"}, false}, // read-only by override
	} {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tc.tool, tc.args
		r, err := c.CallTool(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Content[0].(mcp.TextContent).Text
		refused := r.IsError && strings.Contains(text, "needs the user's confirmation")
		if refused != tc.refused {
			t.Errorf("%s: %q (error %v); want refused %v", tc.tool, text, r.IsError, tc.refused)
		}
	}
}

// code_mode_tools = ["hint:read_only"] admits into code mode only the
// tools whose hints say read-only, the upstream's (as overridden) and the
// builtins' alike; the others stay direct tools.
func TestCodeModeAdmissionByHint(t *testing.T) {
	needCmd(t, "python3")
	src := fakeTable(t, "fake", overridden, "-echo") + "[profiles.default]\ncode_mode = true\ncode_mode_tools = [\"hint:read_only\"]\n"
	h := newHost(t, src, "", "codemode", "builtin")
	v, err := h.View(t.Context(), h.conn)
	if err != nil {
		t.Fatal(err)
	}
	names := func(ts []*registry.Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	code, direct := names(v.CodeTools), names(v.Tools)
	for _, tc := range []struct {
		tool   string
		inCode bool
	}{
		{"fake.say", true},    // read-only by override
		{"fake.big", false},   // no hints: not read-only
		{"tape.info", true},   // a builtin hinted read-only
		{"tape.reset", false}, // a builtin that writes (not preserved, so code-capable)
		{"run_code", false},   // listed
	} {
		if slices.Contains(code, tc.tool) != tc.inCode || slices.Contains(direct, tc.tool) == tc.inCode {
			t.Errorf("%s: code tools %v, direct %v; want in code %v", tc.tool, code, direct, tc.inCode)
		}
	}
	res := h.call(t.Context(), "run_code", map[string]any{"code": `print(await tools.fake_say(msg="from code"))`})
	if res.Err != nil || !strings.Contains(res.Text, `"mode":"loud"`) {
		t.Errorf("run_code calling fake_say: %q %v", res.Text, res.Err)
	}
}

// A bad override or hint is an error naming its key.
func TestBadOverridesAndHints(t *testing.T) {
	fake := fakeBinary(t)
	for _, tc := range []struct{ src, want string }{
		{"[upstreams.fake.overrides.echo]\nreadonly = true\n", "upstreams.fake.overrides.echo.readonly: unknown key"},
		{"[upstreams.fake.overrides.echo]\nread_only = \"yes\"\n", "read_only"},
		{"[upstreams.fake.overrides.echo]\nname = \"a.b\"\n", "upstreams.fake.overrides.echo.name"},
		{"[upstreams.fake.overrides.echo]\nname = \"x\"\n[upstreams.fake.overrides.big]\nname = \"x\"\n", "upstreams.fake.overrides.echo.name"},
		{"[profiles.default]\nconfirm = [\"hint:dangerous\"]\n", `profiles.default.confirm: unknown hint "hint:dangerous"`},
		{"[profiles.default]\ncode_mode_tools = [\"hint:readonly\"]\n", `profiles.default.code_mode_tools: unknown hint "hint:readonly"`},
	} {
		_, err := tryHost(t, stdioTable("fake", fake, nil, "")+tc.src, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v; want one naming %q", tc.src, err, tc.want)
		}
	}
}
