package limits_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"

	_ "github.com/bubbuild/bub-mcp/builtin"
	_ "github.com/bubbuild/bub-mcp/limits"
)

const rules = `
[audit]
enabled = false

[[limits]]
name = "reads"
tool = "fs.read"
per_minute = 60
burst = 2

[[limits]]
name = "alice-writes"
principal = "alice"
tool = "fs.write"
per_minute = 1
`

// A burst over a rule's limit is a tool error naming the rule and the
// wait (retryAfterSeconds in its details), other tools and principals are
// not limited, and once the window has passed the call runs again. Time
// is synctest's, so the test waits for nothing.
func TestToolCallLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		home, ws := t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(filepath.Join(home, "bub.toml"), rules, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(context.Background(), &app.Options{Config: cfg, Home: home, Workspace: ws, Modules: []string{"builtin", "limits"}})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		call := func(principal, tool string, args any) (string, map[string]any) {
			t.Helper()
			conn := &providers.Connection{Transport: "test", Profile: config.DefaultProfile, Principal: principal}
			if err := a.Resolve(context.Background(), conn); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(args)
			res := a.Call(context.Background(), conn, app.Request{Tool: tool, Args: b})
			if res.Err == nil {
				return "ok", nil
			}
			return res.Err.Message, res.Err.Details
		}
		read := map[string]any{"path": "a.txt"}
		var got []string
		for range 3 {
			msg, _ := call("bob", "fs.read", read)
			got = append(got, msg)
		}
		if diff := cmp.Diff([]string{"ok", "ok", "limit reads: retry in 1 s"}, got); diff != "" {
			t.Errorf("a burst of 3 over burst 2 (-want +got):\n%s", diff)
		}
		if _, details := call("bob", "fs.read", read); details["retryAfterSeconds"] != 1 || details["rule"] != "reads" {
			t.Errorf("details = %v; want retryAfterSeconds 1 and the rule", details)
		}
		if msg, _ := call("carol", "fs.read", read); msg != "ok" {
			t.Errorf("another principal's first read: %q; buckets are per principal", msg)
		}
		if msg, _ := call("alice", "fs.write", map[string]any{"path": "b.txt", "content": "b"}); msg != "ok" {
			t.Errorf("alice's first write: %q", msg)
		}
		msg, _ := call("alice", "fs.write", map[string]any{"path": "b.txt", "content": "b"})
		if !strings.HasPrefix(msg, "limit alice-writes: retry in ") {
			t.Errorf("alice's second write: %q; want the alice-writes limit", msg)
		}
		if msg, _ := call("bob", "fs.write", map[string]any{"path": "c.txt", "content": "c"}); msg != "ok" {
			t.Errorf("bob's write: %q; the rule names alice only", msg)
		}
		time.Sleep(61 * time.Second) // the next window
		if msg, _ := call("alice", "fs.write", map[string]any{"path": "b.txt", "content": "b"}); msg != "ok" {
			t.Errorf("alice's write a minute later: %q", msg)
		}
		if msg, _ := call("bob", "fs.read", read); msg != "ok" {
			t.Errorf("bob's read a minute later: %q", msg)
		}
	})
}

func TestRuleErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"no rate", "[[limits]]\ntool = \"bash\"\n", "per_minute must be > 0"},
		{"negative burst", "[[limits]]\ntool = \"bash\"\nper_minute = 5\nburst = -1\n", "burst must be >= 0"},
		{"misspelt key", "[[limits]]\ntool = \"bash\"\nper_minut = 5\n", "per_minut"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			cfg, err := config.Parse(filepath.Join(home, "bub.toml"), tc.src, func(string) string { return "" })
			if err == nil {
				var a *app.App
				a, err = app.New(context.Background(), &app.Options{Config: cfg, Home: home, Workspace: home, Modules: []string{"builtin", "limits"}})
				if err == nil {
					a.Close()
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}
