package cli_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/fakemodel"
)

// TestAgentRefusedKeyNotEchoed: some providers quote the key they refuse
// ("Incorrect API key provided: sk-..."). That message reaches the
// terminal, the --json events and the session's tape (which tape.search
// hands to MCP clients), so the key must be cut out of it everywhere.
func TestAgentRefusedKeyNotEchoed(t *testing.T) {
	const key = "sk-proj-outside-test-key-0123456789"
	body := `{"error":{"message":"Incorrect API key provided: ` + key + `. You can find your API key at https://example.invalid.","type":"invalid_request_error"}}`
	for _, tt := range []struct {
		name string
		srv  func(testing.TB, fakemodel.Script) *fakemodel.Server
		env  func(url string) []string
	}{
		{"openai", fakemodel.NewOpenAI, func(url string) []string {
			return []string{"BUB_MODEL=openai:fake-model", "BUB_API_BASE=" + url + "/v1", "BUB_API_KEY=" + key}
		}},
		{"anthropic", fakemodel.NewAnthropic, func(url string) []string {
			return []string{"BUB_MODEL=anthropic:fake-model", "BUB_API_BASE=" + url, "BUB_API_KEY=" + key}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.srv(t, func(int, map[string]any) fakemodel.Reply { return fakemodel.Reply{Status: 401, Body: body} })
			home, ws := t.TempDir(), t.TempDir()
			env := agentEnv(home, "", tt.env(srv.URL)...)
			for _, args := range [][]string{{"-p", "hi"}, {"--json", "-p", "hi"}} {
				code, stdout, stderr := runAgentBinary(t, env, "", append([]string{"--workspace", ws}, args...)...)
				if code != 1 || !strings.Contains(stdout+stderr, "HTTP 401: Incorrect API key provided") {
					t.Errorf("%v: exit %d; want 1 naming the 401\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
				}
				if strings.Contains(stdout+stderr, key) {
					t.Errorf("%v: the key is in the output\nstdout: %s\nstderr: %s", args, stdout, stderr)
				}
			}
			err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if strings.Contains(string(b), key) {
					t.Errorf("the key is written to %s", path)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAgentAnswerThatIsNoStream: a base URL naming the wrong server (a web
// page, a captive portal, another API) answers 200 with no model stream in
// it. The turn used to end with an empty answer and exit 0; it must fail,
// saying where to look.
func TestAgentAnswerThatIsNoStream(t *testing.T) {
	for _, tt := range []struct {
		name  string
		srv   func(testing.TB, fakemodel.Script) *fakemodel.Server
		model string
		base  string
	}{
		{"openai", fakemodel.NewOpenAI, "openai:fake-model", "/v1"},
		{"anthropic", fakemodel.NewAnthropic, "anthropic:fake-model", ""},
	} {
		for _, body := range []string{"<html><body>Sign in to the network</body></html>", `{"status":"ok"}`, ""} {
			t.Run(tt.name, func(t *testing.T) {
				srv := tt.srv(t, func(int, map[string]any) fakemodel.Reply { return fakemodel.Reply{Status: 200, Body: body} })
				env := agentEnv(t.TempDir(), "", "BUB_MODEL="+tt.model, "BUB_API_BASE="+srv.URL+tt.base, "BUB_API_KEY=test-key")
				code, stdout, stderr := runAgentBinary(t, env, "", "--workspace", t.TempDir(), "-p", "hi")
				if code != 1 || !strings.Contains(stderr, "answered without a") || !strings.Contains(stderr, "BUB_API_BASE") {
					t.Errorf("body %q: exit %d; want 1 saying the answer was no stream and naming BUB_API_BASE\nstdout: %s\nstderr: %s", body, code, stdout, stderr)
				}
			})
		}
	}
}

// TestAgentRefusedKeySaysWhereKeysComeFrom: a 401 showed only the server's
// words ("Unauthorized"), not which variables the key is read from.
func TestAgentRefusedKeySaysWhereKeysComeFrom(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(int, map[string]any) fakemodel.Reply {
		return fakemodel.Reply{Status: 401, Body: `{"error":{"message":"Unauthorized"}}`}
	})
	env := agentEnv(t.TempDir(), "", "BUB_MODEL=openrouter:some/model", "BUB_API_BASE="+srv.URL+"/v1", "BUB_API_KEY=expired-key-0123456789")
	code, stdout, stderr := runAgentBinary(t, env, "", "--workspace", t.TempDir(), "-p", "hi")
	if code != 1 || !strings.Contains(stderr, "HTTP 401: Unauthorized") || !strings.Contains(stderr, "BUB_OPENROUTER_API_KEY (or BUB_API_KEY, or OPENROUTER_API_KEY)") {
		t.Errorf("exit %d; want 1 naming the key's variables\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
