package builtin

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

func TestTools(t *testing.T) {
	var names []string
	for _, tl := range (&Module{}).Tools() {
		names = append(names, tl.Name)
		if tl.Preserve && tl.OutputSchema != nil {
			t.Errorf("%s is preserved but has an output schema", tl.Name)
		}
	}
	want := []string{"bash", "bash.output", "bash.kill", "bash.input", "fs.read", "fs.write", "fs.edit", "fs.grep", "fs.glob",
		"tape.info", "tape.search", "tape.anchors", "tape.handoff", "tape.reset", "web.fetch"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("Tools() (-want +got):\n%s", diff)
	}
}

func TestApplyEnv(t *testing.T) {
	tests := []struct {
		name    string
		config  bool
		env     string
		want    bool
		wantErr string
	}{
		{"unset keeps config off", false, "", false, ""},
		{"unset keeps config on", true, "", true, ""},
		{"env turns it on", false, "true", true, ""},
		{"env wins over config", true, "0", false, ""},
		{"env 1", false, "1", true, ""},
		{"bad env", false, "yes", false, `BUB_WEB_ALLOW_LOOPBACK="yes": want true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Module{AllowLoopback: tt.config}
			err := m.applyEnv(func(k string) string {
				if k == "BUB_WEB_ALLOW_LOOPBACK" {
					return tt.env
				}
				return ""
			})
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if m.AllowLoopback != tt.want || gotErr != tt.wantErr {
				t.Errorf("applyEnv(%q) with allow_loopback=%v: AllowLoopback = %v, err %q; want %v, %q",
					tt.env, tt.config, m.AllowLoopback, gotErr, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMaxBytesDefault(t *testing.T) {
	for _, tt := range []struct{ set, want int64 }{{0, DefaultWebMaxBytes}, {10, 10}} {
		if got := (&Module{MaxBytes: tt.set}).maxBytes(); got != tt.want {
			t.Errorf("maxBytes() with MaxBytes=%d = %d; want %d", tt.set, got, tt.want)
		}
	}
}

// Two modules (two Apps) keep their own shells, even on one environment.
func TestModulesKeepTheirOwnShells(t *testing.T) {
	f := newFixture(t, nil)
	id := shellID(t, f.ok("bash", map[string]any{"command": "sleep 300", "background": true}))
	other := newExec(t, &Module{})
	res := other.Call(t.Context(), registry.Call{Tool: "bash.output", Args: []byte(`{"shell_id":"` + id + `"}`),
		Context: &registry.ToolContext{Env: f.env}})
	if res.Err == nil || res.Err.Kind != registry.KindNotFound {
		t.Errorf("another module's bash.output(%s) = %v; want not_found", id, res.Err)
	}
	f.ok("bash.kill", map[string]any{"shell_id": id})
}

// Cleanup kills the module's shells, forgets them and refuses new ones.
func TestCleanupEndsShells(t *testing.T) {
	f := newFixture(t, nil)
	id := shellID(t, f.ok("bash", map[string]any{"command": "echo $$; sleep 300 & echo $!; wait", "background": true}))
	pids := f.pollOutput(id, 2)
	if err := f.mod.Cleanup(); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	waitGone(t, atoi(t, pids[0]), atoi(t, pids[1]))
	if n := f.mod.shells.count(f.env); n != 0 {
		t.Errorf("cleaned-up module still holds %d shells", n)
	}
	if e := f.fails("bash", map[string]any{"command": "true"}); e.Kind != registry.KindConfig || !strings.Contains(e.Message, "shut down") {
		t.Errorf("bash after Cleanup = %v; want [config] ... shut down", e)
	}
	if err := f.mod.Cleanup(); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
}

// Provision refuses negative [web] limits, naming the key.
func TestProvisionRefusesNegativeWebLimits(t *testing.T) {
	for _, key := range []string{"max_bytes", "max_html_bytes"} {
		cfg, err := config.Parse("t.toml", "[web]\n"+key+" = -1\n", func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{"builtin"},
			Home: t.TempDir(), Workspace: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
		if err == nil {
			a.Close()
			t.Errorf("[web] %s = -1 accepted; want an error", key)
			continue
		}
		if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "must be >= 0") {
			t.Errorf("[web] %s = -1: %v; want it to name the key", key, err)
		}
	}
}

// TestAnnotations pins every builtin tool's MCP behaviour hints, which
// clients use to decide what needs the user's approval.
func TestAnnotations(t *testing.T) {
	type hints struct{ ReadOnly, Destructive, Idempotent, OpenWorld, Preserve bool }
	want := map[string]hints{
		"bash":         {Destructive: true, OpenWorld: true, Preserve: true},
		"bash.output":  {ReadOnly: true, Preserve: true},
		"bash.kill":    {Destructive: true, Idempotent: true, Preserve: true},
		"bash.input":   {Destructive: true, OpenWorld: true, Preserve: true},
		"fs.read":      {ReadOnly: true, Idempotent: true, Preserve: true},
		"fs.write":     {Destructive: true, Idempotent: true, Preserve: true},
		"fs.edit":      {Destructive: true, Preserve: true},
		"tape.info":    {ReadOnly: true, Idempotent: true},
		"tape.search":  {ReadOnly: true, Idempotent: true},
		"tape.anchors": {ReadOnly: true, Idempotent: true},
		"tape.handoff": {},
		"tape.reset":   {Destructive: true},
		"web.fetch":    {ReadOnly: true, Idempotent: true, OpenWorld: true},
	}
	got := map[string]hints{}
	for _, tl := range (&Module{}).Tools() {
		a := tl.Annotations
		if a.Title == "" {
			t.Errorf("%s has no title", tl.Name)
		}
		if _, pinned := want[tl.Name]; pinned { // TestTools lists them all
			got[tl.Name] = hints{a.ReadOnly, a.Destructive, a.Idempotent, a.OpenWorld, tl.Preserve}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}
