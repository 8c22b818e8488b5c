package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditVerify: records written by real calls verify as intact (exit
// 0); once a line is altered, `audit verify` exits 1 naming its file and
// line, with flags before or after the subcommand, in text or JSON.
func TestAuditVerify(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if code, _, errOut := runCLI(t, home, "call", "--workspace", ws, "fs.read", "path=a.txt"); code != 0 {
			t.Fatalf("call exit %d: %s", code, errOut)
		}
	}
	dir := filepath.Join(home, "audit")
	code, out, errOut := runCLI(t, home, "audit", "verify")
	if code != 0 || !strings.Contains(out, "3 records in 1 file (seq 1 to 3)") || !strings.HasSuffix(out, "intact\n") {
		t.Fatalf("audit verify = %d, %q, %q; want 0 and 3 intact records", code, out, errOut)
	}

	log := filepath.Join(dir, "audit.jsonl")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[1] = bytes.Replace(lines[1], []byte(`a.txt`), []byte(`b.txt`), 1)
	if err := os.WriteFile(log, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
	}{
		{"flag after", []string{"audit", "verify", "--dir", dir}},
		{"flag before", []string{"audit", "--dir", dir, "verify"}},
		{"default dir", []string{"audit", "verify"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, home, tt.args...)
			want := dir + string(filepath.Separator) + "audit.jsonl:2: altered: "
			if code != 1 || !strings.Contains(errOut, want) {
				t.Errorf("%v = %d, %q, %q; want exit 1 and %q", tt.args, code, out, errOut, want)
			}
		})
	}
	code, out, _ = runCLI(t, home, "audit", "verify", "--json")
	var rep struct {
		Records int
		Problem struct {
			File string
			Line int
			Kind string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if code != 1 || rep.Problem.File != "audit.jsonl" || rep.Problem.Line != 2 || rep.Problem.Kind != "altered" {
		t.Errorf("audit verify --json = %d, %+v; want exit 1 and audit.jsonl:2 altered", code, rep)
	}
	if code, _, _ := runCLI(t, home, "audit", "check"); code != 2 {
		t.Errorf("audit check: exit %d; want 2", code)
	}
}

// TestAuditVerifyNoLog: before the first tool call there is no audit
// directory; verify says so in words (not a bare ENOENT) and still exits
// 1, since a removed log looks the same.
func TestAuditVerifyNoLog(t *testing.T) {
	home := t.TempDir()
	code, out, errOut := runCLI(t, home, "audit", "verify")
	want := "no audit log at " + filepath.Join(home, "audit") + ": none written yet"
	if code != 1 || out != "" || !strings.Contains(errOut, want) || strings.Contains(errOut, "no such file") {
		t.Errorf("audit verify = %d, %q, %q; want exit 1 saying %q", code, out, errOut, want)
	}
}
