package host_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/host"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/google/go-cmp/cmp"
)

func newHost(t *testing.T, src string, spill int) (*host.Host, string) {
	t.Helper()
	cfg, err := config.Parse("test.toml", src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	reg.MustRegister(registry.MustNewTool("big", "Return n characters.", func(ctx context.Context, tc *registry.ToolContext, in struct {
		N int `json:"n"`
	}) (string, error) {
		return strings.Repeat("x", in.N), nil
	}))
	reg.MustRegister(registry.MustNewTool("whoami", "Report the call's session and workspace.", func(ctx context.Context, tc *registry.ToolContext, in struct{}) (string, error) {
		sess, ok := sessions.FromContext(ctx)
		if !ok {
			return "", registry.NewError(registry.KindConfig, "no session", nil)
		}
		return tc.SessionID + " " + sess.ID() + " " + tc.Env.Workspace(), nil
	}))
	home := t.TempDir()
	h, err := host.New(&host.Options{Config: cfg, Registry: reg, Home: home, Workspace: t.TempDir(), SpillThreshold: &spill,
		Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, home
}

func TestResolve(t *testing.T) {
	ws := t.TempDir()
	h, _ := newHost(t, "[profiles.p]\nworkspace = \""+ws+"\"\nsession = \"team\"\ncode_mode = true\n[profiles.q]\n", 0)
	tests := []struct {
		profile string
		want    providers.Connection
		wantErr bool
	}{
		{"p", providers.Connection{Profile: "p", SessionKey: "team", Workspace: ws, CodeMode: true}, false},
		{"", providers.Connection{Profile: "default", SessionKey: "mcp:default"}, false},
		{"nope", providers.Connection{}, true},
	}
	for _, tt := range tests {
		conn := &providers.Connection{Profile: tt.profile}
		err := h.Resolve(context.Background(), conn)
		if (err != nil) != tt.wantErr {
			t.Fatalf("Resolve(%q) err = %v", tt.profile, err)
		}
		if err != nil {
			continue
		}
		if tt.want.Workspace == "" {
			tt.want.Workspace = conn.Workspace // the host's default workspace
		}
		if diff := cmp.Diff(tt.want, *conn); diff != "" {
			t.Errorf("Resolve(%q) (-want +got):\n%s", tt.profile, diff)
		}
	}
	// The session's own switch wins over the profile default, and survives.
	conn := &providers.Connection{Profile: "p"}
	h.Resolve(context.Background(), conn)
	sess, _ := h.Session(conn)
	if err := sess.SetCodeMode(false); err != nil {
		t.Fatal(err)
	}
	conn = &providers.Connection{Profile: "p"}
	h.Resolve(context.Background(), conn)
	if conn.CodeMode {
		t.Error("session setting did not override the profile's code_mode")
	}
}

func TestCallAttachesSessionEnvironmentAndAudit(t *testing.T) {
	h, _ := newHost(t, "", 0)
	conn := &providers.Connection{Transport: "cli", Principal: "alice", ClientName: "test", ClientVersion: "1"}
	if err := h.Resolve(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	view, err := h.View(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := view.Lookup("whoami")
	if !ok {
		t.Fatal("whoami not in view")
	}
	res := h.Call(context.Background(), conn, tool, registry.Call{}, nil)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if want := "mcp:default mcp:default " + conn.Workspace; res.Text != want {
		t.Errorf("whoami = %q; want %q", res.Text, want)
	}
	sess, _ := h.Session(conn)
	entries := sess.Tape().Entries()
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
		if e.Meta["principal"] != "alice" || e.Meta["client"] != "test/1" || e.Meta["transport"] != "cli" {
			t.Errorf("audit meta = %v", e.Meta)
		}
	}
	if diff := cmp.Diff([]string{"tool_call", "tool_result"}, kinds); diff != "" {
		t.Errorf("tape (-want +got):\n%s", diff)
	}
	// The environment is per session and reused.
	e1, _ := h.Environment(context.Background(), conn)
	e2, _ := h.Environment(context.Background(), conn)
	if e1 != e2 {
		t.Error("environment not reused within a session")
	}
}

func TestSpillThroughTheHost(t *testing.T) {
	h, _ := newHost(t, "", 100) // spill at 400 characters
	conn := &providers.Connection{Transport: "cli"}
	h.Resolve(context.Background(), conn)
	res := h.CallCommand(context.Background(), conn, "big", json.RawMessage(`{"n":"5000"}`), nil) // lax: "5000" → 5000
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if !strings.HasPrefix(res.Text, "[tool output spilled: 5,000 bytes in 1 chunks; handle: ") {
		t.Fatalf("text = %.120q; want a spill reference", res.Text)
	}
	handle := strings.SplitN(strings.SplitN(res.Text, "handle: ", 2)[1], "]", 2)[0]
	sess, _ := h.Session(conn)
	page, err := sess.ReadSpill(handle, 0, 4, false)
	if err != nil || page.Content != strings.Repeat("x", 5000) {
		t.Fatalf("ReadSpill = %d chars, %v", len(page.Content), err)
	}
	small := h.CallCommand(context.Background(), conn, "big", json.RawMessage(`{"n":10}`), nil)
	if small.Text != strings.Repeat("x", 10) {
		t.Errorf("small result = %q", small.Text)
	}
	if unknown := h.CallCommand(context.Background(), conn, "bgi", nil, nil); unknown.Err == nil || !strings.Contains(unknown.Err.Message, "did you mean 'big'") {
		t.Errorf("unknown command = %v", unknown.Err)
	}
}
