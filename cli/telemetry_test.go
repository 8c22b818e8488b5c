package cli_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestObservabilityBinary runs the built binary as an operator would:
// `serve --http` with [server] metrics = true, BUB_LOG_FORMAT=json and an
// OTLP endpoint. A traced call's log lines carry its trace id, /metrics
// counts it, and on shutdown its span reaches the OTLP receiver.
func TestObservabilityBinary(t *testing.T) {
	var (
		mu      sync.Mutex
		exports [][]byte
	)
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		if r.URL.Path == "/v1/traces" {
			exports = append(exports, b)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer otlp.Close()

	ws := noteWorkspace(t, "hello\n")
	cfg := filepath.Join(t.TempDir(), "bub.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "[server]\nmetrics = true\n[profiles.default]\nworkspace = %q\n", ws), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "serve", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+cfg,
		"BUB_LOG_FORMAT=json", "BUB_LOG_LEVEL=debug", "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	var lines []string
	urlc, logDone := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			var rec struct{ Msg, URL string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "mcp.http.start" {
				urlc <- rec.URL
			}
		}
	}()
	var url string
	select {
	case url = <-urlc:
	case <-time.After(15 * time.Second):
		t.Fatal("server did not start (or did not log mcp.http.start as JSON)")
	}

	const traceID, parentID = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
	c := httpClient(t, url)
	req := mcp.CallToolRequest{}
	req.Params.Name = "fs_read"
	req.Params.Arguments = map[string]any{"path": "note.txt"}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-" + traceID + "-" + parentID + "-01"}}
	res, err := c.CallTool(t.Context(), req)
	if err != nil || res.IsError || !strings.Contains(resultText(res), "hello") {
		t.Fatalf("fs_read = %+v, %v", res, err)
	}

	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `bub_mcp_tool_calls_total{gen_ai_tool_name="fs_read",mode="direct",outcome="ok"} 1`; resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(want+"\n")) {
		t.Errorf("GET /metrics: %s; want a line %q:\n%s", resp.Status, want, body)
	}

	c.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Read stderr to its end (the process exiting closes it) before Wait,
	// which closes the pipe.
	select {
	case <-logDone:
	case <-time.After(20 * time.Second):
		t.Fatal("server still running 20s after SIGTERM")
	}
	if err := waitExit(cmd, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	traced := 0
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		if rec["trace_id"] == traceID {
			traced++
			if id, _ := rec["span_id"].(string); len(id) != 16 || id == parentID {
				t.Errorf("span_id %v in %q; want the server span's own id", rec["span_id"], line)
			}
		}
	}
	if traced == 0 {
		t.Errorf("no log line carries trace_id %s:\n%s", traceID, strings.Join(lines, "\n"))
	}

	mu.Lock()
	all := bytes.Join(exports, nil)
	mu.Unlock()
	rawID, _ := hex.DecodeString(traceID)
	// Protobuf keeps strings and ids as raw bytes, so they are findable.
	for _, want := range [][]byte{[]byte("tools/call fs_read"), []byte("bub-mcp"), rawID} {
		if !bytes.Contains(all, want) {
			t.Errorf("OTLP export (%d requests) lacks %q", len(exports), want)
		}
	}
}

// TestLogFormatChecked checks that a BUB_LOG_FORMAT the server does not
// know is reported instead of ignored, and text logs are written.
func TestLogFormatChecked(t *testing.T) {
	for _, tt := range []struct {
		format string
		warned bool
	}{{"", false}, {"text", false}, {"JSON", false}, {"xml", true}} {
		cmd := exec.Command(binary(t), "help")
		cmd.Env = append(os.Environ(), "BUB_LOG_FORMAT="+tt.format)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("bub-mcp help: %v\n%s", err, stderr.String())
		}
		want := `level=WARN msg="BUB_LOG_FORMAT is neither text nor json; writing text" value=xml`
		if got := strings.Contains(stderr.String(), want); got != tt.warned {
			t.Errorf("BUB_LOG_FORMAT=%q: warned %v; want %v:\n%s", tt.format, got, tt.warned, stderr.String())
		}
	}
}
