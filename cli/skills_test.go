package cli_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestServeSkillsOverStdio: the built binary declares SEP-2640's skills
// extension and answers skills/list, skills/get and resources/read of a
// workspace skill over stdio, as a 2025-11-25 client and a 2026-07-28 one
// would ask.
func TestServeSkillsOverStdio(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	dir := filepath.Join(ws, ".agents", "skills", "greet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	skill := "---\nname: greet\ndescription: Say hello.\n---\nSay hello.\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(skill), 0o644); err != nil {
		t.Fatal(err)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	for _, tc := range []struct {
		name  string
		lines []string
	}{
		{"2025-11-25", []string{
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{}}`,
			`{"jsonrpc":"2.0","id":2,"method":"skills/get","params":{"uri":"skill://greet/SKILL.md"}}`,
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"skill://greet/SKILL.md"}}`,
		}},
		{"2026-07-28", []string{
			`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{` + meta + `}}`,
			`{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta + `}}`,
			`{"jsonrpc":"2.0","id":2,"method":"skills/get","params":{"uri":"skill://greet/SKILL.md",` + meta + `}}`,
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"skill://greet/SKILL.md",` + meta + `}}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), "serve", "--workspace", ws)
			cmd.Env = append(os.Environ(), "BUB_HOME="+home, "HOME="+home)
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			outPipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close(); cmd.Wait() })
			out := bufio.NewScanner(outPipe)
			out.Buffer(nil, 1<<20)
			byID := map[float64]map[string]any{}
			for _, line := range tc.lines {
				if _, err := io.WriteString(in, line+"\n"); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(line, `"id"`) {
					continue
				}
				// Wait for the answer, as a client does, before the next request.
				for out.Scan() {
					var m map[string]any
					if err := json.Unmarshal(out.Bytes(), &m); err != nil {
						t.Fatalf("stdout line %q: %v", out.Text(), err)
					}
					if id, ok := m["id"].(float64); ok {
						byID[id] = m
						break
					}
				}
			}
			res := func(id float64) map[string]any {
				r, _ := byID[id]["result"].(map[string]any)
				if r == nil {
					t.Fatalf("request %v: %v", id, byID[id])
				}
				return r
			}
			caps := res(0)["capabilities"].(map[string]any)
			if diff := cmp.Diff(map[string]any{"io.modelcontextprotocol/skills": map[string]any{}}, caps["extensions"]); diff != "" {
				t.Errorf("capabilities.extensions (-want +got):\n%s", diff)
			}
			entries := res(1)["skills"].([]any)
			if len(entries) != 1 || entries[0].(map[string]any)["uri"] != "skill://greet/SKILL.md" {
				t.Errorf("skills/list: %v", entries)
			}
			if diff := cmp.Diff(entries[0], res(2)["skill"]); diff != "" {
				t.Errorf("skills/get differs from its list entry (-list +get):\n%s", diff)
			}
			contents := res(3)["contents"].([]any)
			if len(contents) != 1 || contents[0].(map[string]any)["text"] != skill {
				t.Errorf("resources/read: %v", contents)
			}
		})
	}
}
