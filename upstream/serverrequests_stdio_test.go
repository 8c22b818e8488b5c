package upstream_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/testbin"
)

// TestServerRequestsNeedTheStdioClientsCapability is
// TestServerRequestsNeedTheClientsCapability through the built `bub-mcp
// serve` over stdio, the transport most clients use: a client that
// declared neither sampling nor elicitation is asked nothing, and the
// upstream's sampling/createMessage and elicitation/create get a JSON-RPC
// error naming the capability (before, the client was asked and its empty
// answer went back as a result). A client that declared both is asked,
// and its answers reach the upstream.
func TestServerRequestsNeedTheStdioClientsCapability(t *testing.T) {
	bin := testbin.Build(t, "github.com/bubbuild/bub-mcp/cmd/bub-mcp")
	fake := fakeBinary(t)
	tests := []struct {
		name string
		caps string
		// want is what the upstream's tool reports per tool; asked, the
		// requests our client gets.
		want  map[string]string
		asked []string
	}{
		{"declared neither", `{}`, map[string]string{
			"fake_sample": "did not declare the sampling capability",
			"fake_elicit": "did not declare the elicitation capability",
		}, nil},
		{"declared both", `{"sampling":{},"elicitation":{}}`, map[string]string{
			"fake_sample": `"text":"from the client"`,
			"fake_elicit": `result {"action":"decline"`,
		}, []string{"sampling/createMessage", "elicitation/create"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := serveStdio(t, bin, stdioTable("fake", fake, nil, ""))
			p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + tt.caps + `,"clientInfo":{"name":"t","version":"1"}}}`)
			p.recv(t, 1)
			p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			p.waitTool(t, "fake_sample")
			for i, tool := range []string{"fake_sample", "fake_elicit"} {
				id := 10 + i
				p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool))
				res := p.recv(t, id)
				got := fmt.Sprint(res["result"])
				if !strings.Contains(got, tt.want[tool]) {
					t.Errorf("%s: the upstream reported %s; want %q in it", tool, got, tt.want[tool])
				}
			}
			if strings.Join(p.asked, ",") != strings.Join(tt.asked, ",") {
				t.Errorf("our client was asked %q; want %q", p.asked, tt.asked)
			}
		})
	}
}

// stdioProc is a `bub-mcp serve` over stdio, spoken to line by line. It
// answers the server's requests as a client would (sampling with a text,
// elicitation with a decline) and records their methods in asked.
type stdioProc struct {
	in     *os.File
	out    *bufio.Reader
	stderr *lockedBuffer
	asked  []string
	t      *testing.T
}

func serveStdio(t *testing.T, bin, table string) *stdioProc {
	t.Helper()
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "bub.toml"), []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--workspace", ws)
	cmd.Env = append(os.Environ(), "BUB_HOME="+home, "BUB_CONFIG="+filepath.Join(home, "bub.toml"))
	p := &stdioProc{stderr: &lockedBuffer{}, t: t}
	cmd.Stderr = p.stderr
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	t.Cleanup(func() { inW.Close(); cmd.Process.Kill(); cmd.Wait(); outR.Close() })
	p.in, p.out = inW, bufio.NewReader(outR)
	return p
}

func (p *stdioProc) send(line string) {
	if _, err := fmt.Fprintln(p.in, line); err != nil {
		p.t.Fatal(err)
	}
}

// recv reads until the answer to id, answering the server's requests on
// the way.
func (p *stdioProc) recv(t *testing.T, id int) map[string]any {
	t.Helper()
	for {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the answer to %d: %v; serve's log:\n%s", id, err, p.stderr.String())
		}
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		method, _ := m["method"].(string)
		switch {
		case method != "" && m["id"] != nil:
			p.asked = append(p.asked, method)
			result := `{"action":"decline"}`
			if method == "sampling/createMessage" {
				result = `{"role":"assistant","content":{"type":"text","text":"from the client"},"model":"m"}`
			}
			rid, _ := json.Marshal(m["id"])
			p.send(`{"jsonrpc":"2.0","id":` + string(rid) + `,"result":` + result + `}`)
		case m["id"] == float64(id):
			return m
		}
	}
}

// waitTool lists tools until tool is there (the upstream starts in the
// background).
func (p *stdioProc) waitTool(t *testing.T, tool string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound for a wedged start
	for i := 0; ; i++ {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, 1000+i))
		if strings.Contains(fmt.Sprint(p.recv(t, 1000+i)), tool) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared; serve's log:\n%s", tool, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
