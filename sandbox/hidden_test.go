package sandbox_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	_ "github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// TestHomeOutOfToolsReach: with $BUB_HOME inside the workspace (the
// default ~/.bub under a workspace of ~), no tool of a sandbox profile or
// of a confined local one reaches bub.toml or the audit log: bash cannot
// read the one or remove or truncate the other, fs.read and fs.write
// refuse them, also through a symlink planted in the workspace; code
// mode's stub directory inside the home stays readable, and read-only.
func TestHomeOutOfToolsReach(t *testing.T) {
	testenv.MustHaveBwrap(t)
	ws := t.TempDir()
	home := filepath.Join(ws, ".bub")
	const secret = "s3cret-state-key"
	src := "[server]\nstate_key = \"" + secret + "\"\n[profiles.sb]\nenvironment = \"sandbox\"\n[profiles.conf]\nconfine = true\n"
	stub := filepath.Join(home, "codemode", "probe.pyi")
	for name, content := range map[string]string{"bub.toml": src, "codemode/probe.pyi": "stub"} {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse(filepath.Join(home, "bub.toml"), src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	newApp := func() *app.App {
		a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: registry.New(), Modules: []string{"builtin", "codemode"},
			Home: home, Workspace: ws, Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	var a *app.App
	call := func(profile, tool string, args map[string]any) registry.Result {
		t.Helper()
		conn := &providers.Connection{Transport: "test", Profile: profile}
		if err := a.Resolve(t.Context(), conn); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(args)
		return a.Call(t.Context(), conn, app.Request{Tool: tool, Args: b, Mode: app.Direct})
	}
	auditPath := filepath.Join(home, "audit", "audit.jsonl")
	// A first App leaves records in the audit log (Close writes them).
	a = newApp()
	call("sb", "bash", map[string]any{"command": "true"})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = newApp()
	logged, err := os.ReadFile(auditPath)
	if err != nil || len(logged) == 0 {
		t.Fatalf("audit log before the attempts: %q, %v", logged, err)
	}
	// text is what a tool gave back: its output and its error (not the
	// arguments, which name the secret in one command below).
	text := func(r registry.Result) string {
		b, _ := json.Marshal([]any{r.Value, r.Text, r.Err})
		return string(b)
	}

	for _, cmd := range []string{
		`cat "$H/bub.toml"`,
		`grep -r ` + secret + ` "$W"`,
		`rm "$H/audit/audit.jsonl"`,
		`: > "$H/audit/audit.jsonl"`,
		`rm -rf "$H"`,
		`echo x > "$H/codemode/planted.py"`,
	} {
		cmd = strings.NewReplacer("$H", home, "$W", ws).Replace(cmd)
		r := call("sb", "bash", map[string]any{"command": cmd})
		if r.Err == nil {
			t.Errorf("sandboxed bash %s succeeded: %s", cmd, text(r))
		}
		if strings.Contains(text(r), secret) {
			t.Errorf("sandboxed bash %s: the secret came out: %s", cmd, text(r))
		}
	}
	if r := call("sb", "bash", map[string]any{"command": "cat " + stub}); r.Err != nil || r.Text != "stub" {
		t.Errorf("sandboxed bash reads the stub directory: %s", text(r))
	}
	if r := call("sb", "bash", map[string]any{"command": "ln -s .bub/bub.toml " + filepath.Join(ws, "planted")}); r.Err != nil {
		t.Fatalf("plant a symlink: %s", text(r))
	}

	for _, profile := range []string{"sb", "conf"} {
		for _, p := range []string{filepath.Join(home, "bub.toml"), ".bub/bub.toml", "planted", auditPath} {
			if r := call(profile, "fs.read", map[string]any{"path": p}); r.Err == nil || strings.Contains(text(r), secret) {
				t.Errorf("%s: fs.read %s = %s; want a refusal without the secret", profile, p, text(r))
			}
			if r := call(profile, "fs.write", map[string]any{"path": p, "content": ""}); r.Err == nil {
				t.Errorf("%s: fs.write %s succeeded", profile, p)
			}
		}
		if r := call(profile, "fs.read", map[string]any{"path": stub}); r.Err != nil || !strings.Contains(r.Text, "stub") {
			t.Errorf("%s: fs.read of the stub directory = %s", profile, text(r))
		}
		if r := call(profile, "fs.write", map[string]any{"path": filepath.Join(home, "codemode", "planted.py"), "content": "x"}); r.Err == nil {
			t.Errorf("%s: fs.write in the stub directory succeeded", profile)
		}
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "bub.toml")); err != nil || string(b) != src {
		t.Errorf("bub.toml after the attempts = %q, %v", b, err)
	}
	if now, err := os.ReadFile(auditPath); err != nil || !bytes.HasPrefix(now, logged) {
		t.Errorf("the audit log lost records: before %q, after %q (%v)", logged, now, err)
	}
	if _, err := os.Lstat(filepath.Join(home, "codemode", "planted.py")); err == nil {
		t.Error("planted.py was created in the stub directory")
	}
}
