package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/testbin"

	"github.com/bubbuild/bub-mcp/internal/proctest"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// binary is the built cmd/bub-mcp: these tests drive the real process
// over stdio, as Claude Desktop and IDEs do.
func binary(t testing.TB) string {
	return testbin.Build(t, "github.com/bubbuild/bub-mcp/cmd/bub-mcp")
}

// freeAddr reserves a loopback address for a server started later: one
// whose public_url must name the port before it binds it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// writeConfig writes src as a bub.toml in a new temporary directory and
// returns its path, for BUB_CONFIG.
func writeConfig(t *testing.T, src string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "bub.toml")
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// noteWorkspace is a new workspace holding note.txt with text.
func noteWorkspace(t *testing.T, text string) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "note.txt"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return ws
}

type stdioServer struct {
	c        *client.Client
	home, ws string
}

func startStdio(t *testing.T, profile string) *stdioServer {
	t.Helper()
	s := &stdioServer{home: t.TempDir(), ws: t.TempDir()}
	src := fmt.Sprintf("[profiles.default]\nworkspace = %q\n[profiles.ro]\nworkspace = %q\ntools = [\"fs.read\", \"tape.*\"]\n", s.ws, s.ws)
	cfg := writeConfig(t, src)
	env := append(os.Environ(), "BUB_HOME="+s.home, "BUB_CONFIG="+cfg)
	_, s.c = stdioClient(t, env, mcp.LATEST_PROTOCOL_VERSION, "stdio-test", "serve", "--profile", profile)
	return s
}

// stdioClient runs the built binary with env and args, and returns its
// process and an mcp-go client on its pipes, initialized with the protocol
// version and client name given; both end with the test.
func stdioClient(t *testing.T, env []string, version, name string, args ...string) (*exec.Cmd, *client.Client) {
	t.Helper()
	var cmd *exec.Cmd
	tr := transport.NewStdioWithOptions(binary(t), env, args,
		transport.WithCommandFunc(func(_ context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd = exec.Command(command, args...)
			cmd.Env = env
			return cmd, nil
		}))
	c := client.NewClient(tr)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "0.1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return cmd, c
}

func callTool(ctx context.Context, c *client.Client, name string, args map[string]any, token any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if token != nil {
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
	}
	return c.CallTool(ctx, req)
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestStdioProfileByFlag(t *testing.T) {
	s := startStdio(t, "ro")
	res, err := s.c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"fs_read", "tape_anchors", "tape_handoff", "tape_info", "tape_reset", "tape_search"}, names); diff != "" {
		t.Errorf("ro tools (-want +got):\n%s", diff)
	}
	if _, err := callTool(t.Context(), s.c, "bash", map[string]any{"command": "touch pwned"}, nil); err == nil {
		t.Error("bash callable under the ro profile")
	}
	if _, err := os.Stat(filepath.Join(s.ws, "pwned")); err == nil {
		t.Error("hidden bash ran")
	}
}

func TestStdioBashStreamsProgress(t *testing.T) {
	s := startStdio(t, "default")
	var mu sync.Mutex
	var messages []string
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" && fmt.Sprint(n.Params.AdditionalFields["progressToken"]) == "bash-1" {
			mu.Lock()
			messages = append(messages, fmt.Sprint(n.Params.AdditionalFields["message"]))
			mu.Unlock()
		}
	})
	res, err := callTool(t.Context(), s.c, "bash", map[string]any{"command": "for i in 1 2 3; do echo line$i; sleep 0.3; done"}, "bash-1")
	if err != nil || res.IsError {
		t.Fatalf("bash: %+v %v", res, err)
	}
	if got := resultText(res); got != "line1\nline2\nline3" {
		t.Errorf("result = %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(messages) == 0 || !strings.Contains(strings.Join(messages, ""), "line1") {
		t.Errorf("progress messages = %q; want streamed output", messages)
	}
}

// TestStdioCancelKillsProcessTree cancels a bash call whose shell started a
// background child; both must die (checked in the process table).
func TestStdioCancelKillsProcessTree(t *testing.T) {
	s := startStdio(t, "default")
	pidFile := filepath.Join(s.ws, "pids")
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := callTool(ctx, s.c, "bash", map[string]any{
			"command":         fmt.Sprintf("sleep 300 & echo $! > %s.tmp; echo $$ >> %s.tmp; mv %s.tmp %s; wait", pidFile, pidFile, pidFile, pidFile),
			"timeout_seconds": 600,
		}, nil)
		errc <- err
	}()
	var pids []int
	deadline := time.Now().Add(15 * time.Second)
	for len(pids) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("bash never wrote its pids")
		}
		time.Sleep(20 * time.Millisecond)
		b, err := os.ReadFile(pidFile)
		if err != nil {
			continue
		}
		pids = nil
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
	}
	cancel()
	<-errc
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

// waitGone polls the process table until pid has exited.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	proctest.WaitGone(t, 10*time.Second, pid)
}

func TestStdioAuditNotOnTape(t *testing.T) {
	s := startStdio(t, "default")
	if _, err := callTool(t.Context(), s.c, "fs_write", map[string]any{"path": "a.txt", "content": "x"}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := callTool(t.Context(), s.c, "tape_info", nil, nil)
	if err != nil || res.IsError {
		t.Fatalf("tape_info: %+v %v", res, err)
	}
	// Calls go to the audit log, never to the session's tape.
	if got := resultText(res); !strings.Contains(got, "entries: 0") {
		t.Errorf("tape_info = %q; want 0 entries (audit is not on the tape)", got)
	}
}

// TestStdioPipedLines pipes a whole session into the binary at once and
// closes its input, as `printf '…' | bub-mcp serve` does: every request
// after initialize is answered (none refused as "not initialized"), the
// initialize answer comes first, and input's end still lets the answers
// out.
func TestStdioPipedLines(t *testing.T) {
	ws := noteWorkspace(t, "piped note")
	cmd := exec.Command(binary(t), "serve")
	cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+writeConfig(t, fmt.Sprintf("[profiles.default]\nworkspace = %q\n", ws)))
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"printf","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs_read","arguments":{"path":"note.txt"}}}`,
	}, "\n") + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bub-mcp serve: %v\nstderr: %s", err, stderr.String())
	}
	type answer struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	var ids []int
	got := map[int]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var a answer
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		ids = append(ids, a.ID)
		switch {
		case a.Error != nil:
			got[a.ID] = "error: " + a.Error.Message
		case a.ID == 2:
			got[2] = fmt.Sprint(strings.Contains(string(a.Result), `"name":"fs_read"`))
		case a.ID == 3:
			got[3] = fmt.Sprint(strings.Contains(string(a.Result), "piped note"))
		default:
			got[a.ID] = fmt.Sprint(strings.Contains(string(a.Result), `"protocolVersion":"2025-11-25"`))
		}
	}
	if diff := cmp.Diff(map[int]string{1: "true", 2: "true", 3: "true"}, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s\nstdout: %s", diff, out)
	}
	if len(ids) == 0 || ids[0] != 1 {
		t.Errorf("answer order = %v; want initialize's (1) first", ids)
	}
}
