package app_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/google/go-cmp/cmp"
)

// auditLines reads $home/audit/audit.jsonl.
func auditLines(t *testing.T, home string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(home, "audit", audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line is not JSON: %v: %s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func TestCallsAreAudited(t *testing.T) {
	t.Parallel()
	a, home := newApp(t, "[probe]\ngreeting = \"audit\"\n[profiles.default]\ndeny = [\"big\"]\n[audit]\nmax_arg_bytes = 16\n")
	ctx := t.Context()
	conn := &providers.Connection{Transport: "cli", Principal: "alice", ClientName: "test", ClientVersion: "1"}
	if err := a.Resolve(ctx, conn); err != nil {
		t.Fatal(err)
	}
	a.Call(ctx, conn, app.Request{Tool: "probe_whoami"})
	a.Call(ctx, conn, app.Request{Tool: "big", Args: json.RawMessage(`{"n":3}`)})                                      // refused: not in the View
	a.Call(ctx, conn, app.Request{Tool: "big", Args: json.RawMessage(`{"n":"00000000000000003"}`), Mode: app.Command}) // cut
	a.Call(ctx, conn, app.Request{Tool: "probe_whoami", NoAudit: true})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	type rec struct{ Tool, Mode, Outcome, ErrorKind, Args string }
	var got []rec
	for _, m := range auditLines(t, home) {
		if m["principal"] != "alice" || m["client"] != "test/1" || m["transport"] != "cli" || m["profile"] != "default" || m["session"] != "mcp:default" {
			t.Errorf("who = %v", m)
		}
		if _, ok := m["time"].(string); !ok {
			t.Errorf("no time: %v", m)
		}
		if _, ok := m["duration_ms"].(float64); !ok {
			t.Errorf("no duration: %v", m)
		}
		args, _ := json.Marshal(m["args"])
		ek, _ := m["error_kind"].(string)
		got = append(got, rec{m["tool"].(string), m["mode"].(string), m["outcome"].(string), ek, string(args)})
	}
	want := []rec{
		{"probe_whoami", "direct", "ok", "", `{}`},
		{"big", "direct", "error", "not_found", `{"n":3}`},
		{"big", "command", "ok", "", `"{\"n\":\"0000000000…[cut: 16 of 25 bytes]"`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
}

func TestAuditConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, wantErr string
		wantDir            bool
	}{
		{"default on", "", "", true},
		{"off", "[audit]\nenabled = false\n", "", false},
		{"negative arg bytes", "[audit]\nmax_arg_bytes = -1\n", "max_arg_bytes", false},
		{"negative file bytes", "[audit]\nmax_file_bytes = -5\n", "max_file_bytes", false},
		{"keep files", "[audit]\nkeep_files = -2\n", "keep_files", false},
		{"keep days", "[audit]\nkeep_days = -3\n", "keep_days", false},
		{"unknown key", "[audit]\npath = \"x\"\n", "audit.path", false},
		{"unknown store", "[audit]\nstore = \"s3\"\n", `audit.store: unknown audit store "s3"`, false},
		{"postgres without [store]", "[audit]\nstore = \"postgres\"\n", `audit.store: store = "postgres" needs [store] kind = "postgres"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.toml", tt.src, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			home := t.TempDir()
			a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: testRegistry(), Modules: []string{"test_probe"}, Home: home, Workspace: t.TempDir()})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New = %v; want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			conn := &providers.Connection{Transport: "cli"}
			a.Resolve(t.Context(), conn)
			a.Call(t.Context(), conn, app.Request{Tool: "probe_whoami"})
			a.Close()
			_, serr := os.Stat(filepath.Join(home, "audit", audit.FileName))
			if got := serr == nil; got != tt.wantDir {
				t.Errorf("audit log exists = %v; want %v (%v)", got, tt.wantDir, serr)
			}
			if (a.AuditDir() != "") != tt.wantDir {
				t.Errorf("AuditDir = %q", a.AuditDir())
			}
		})
	}
}
