package upstream_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/internal/proctest"
	"github.com/bubbuild/bub-mcp/registry"
)

// In code mode the upstream tools are typed Python functions in the stub
// (named as Bub names them: get-sum → get_sum) and run_code gathers calls
// to two upstreams at once.
func TestCodeModeOverUpstreams(t *testing.T) {
	needCmd(t, "python3")
	memCmd, memArgs := npmServer(t, "server-memory")
	home := t.TempDir()
	src := everything(t, "") + stdioTable("memory", memCmd, memArgs, `env = { MEMORY_FILE_PATH = "`+filepath.Join(home, "memory.jsonl")+`" }`) +
		"[profiles.default]\ncode_mode = true\n"
	h := newHost(t, src, home, "codemode")
	v, err := h.View(t.Context(), h.conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.CodeTools) == 0 {
		t.Fatal("code mode is not active: no code tools in the View")
	}
	stub, _, ok, err := codemode.ViewStub(h.home, h.conn, v)
	if err != nil || !ok {
		t.Fatalf("stub: %v %v", ok, err)
	}
	for _, want := range []string{
		"async def everything_get_sum(*, a: float, b: float)",
		"async def everything_get_structured_content(*, location: Literal['New York', 'Chicago', 'Los Angeles'])",
		"async def memory_read_graph()",
	} {
		if !strings.Contains(stub, want) {
			t.Errorf("stub lacks %q", want)
		}
	}
	code := `import asyncio
total, graph, weather = await asyncio.gather(
    tools.everything_get_sum(a=40, b=2),
    tools.memory_read_graph(),
    tools.everything_get_structured_content(location="Chicago"),
)
print(total)
print(sorted(graph))
print(type(weather["temperature"]).__name__)`
	res := h.call(t.Context(), "run_code", map[string]any{"code": code})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := "The sum of 40 and 2 is 42.\n['entities', 'relations']\n"
	if !strings.HasPrefix(res.Text, want) || !strings.Contains(res.Text, "int") && !strings.Contains(res.Text, "float") {
		t.Errorf("run_code printed %q; want %q then the temperature's type", res.Text, want)
	}
	// A failing upstream tool raises inside the code.
	res = h.call(t.Context(), "run_code", map[string]any{"code": `
try:
    await tools.everything_get_sum(a="x", b=1)
except Exception as e:
    print("raised:", e)`})
	if res.Err != nil || !strings.Contains(res.Text, "raised:") {
		t.Errorf("bad call from code: %q, %v", res.Text, res.Err)
	}
}

// bub-mcp behind bub-mcp, over stdio and over streamable HTTP:
// cancelling our caller's call cancels the call upstream, whose process
// sees it (its bash command is killed).
func TestCancellationReachesUpstream(t *testing.T) {
	needCmd(t, "env")
	bin := bubBinary(t)
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			ws := t.TempDir()
			var src string
			if tr == "stdio" {
				src = stdioTable("bub", "env", []string{"BUB_HOME=" + t.TempDir(), bin, "serve", "--workspace", ws}, "")
			} else {
				port := itoa(freePort(t))
				execServer(t, bin, []string{"serve", "--http", "127.0.0.1:" + port, "--workspace", ws}, "BUB_HOME="+t.TempDir())
				waitHTTP(t, "http://127.0.0.1:"+port+"/healthz")
				src = "[upstreams.bub]\nurl = \"http://127.0.0.1:" + port + "/mcp\"\n"
			}
			h := newHost(t, src, "")
			pidFile := filepath.Join(ws, "pid")
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan registry.Result, 1)
			go func() {
				done <- h.call(ctx, "bub.bash", map[string]any{"command": "echo $$ > " + pidFile + "; exec sleep 300", "timeout_seconds": 250})
			}()
			var pid int
			deadline := time.Now().Add(30 * time.Second)
			for pid == 0 {
				if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
					if _, err := fmtSscan(string(b), &pid); err != nil {
						t.Fatal(err)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the upstream's command never started")
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			res := <-done
			if res.Err == nil || !strings.Contains(res.Err.Message, "cancelled") {
				t.Fatalf("cancelled call: %+v", res.Err)
			}
			proctest.WaitGone(t, 20*time.Second, pid)
			// The upstream is still there for the next call.
			if res := h.call(t.Context(), "bub.bash", map[string]any{"command": "echo still here"}); res.Err != nil || !strings.Contains(res.Text, "still here") {
				t.Fatalf("next call: %q, %v", res.Text, res.Err)
			}
		})
	}
}
