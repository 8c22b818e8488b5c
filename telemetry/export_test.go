package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/telemetry"
)

// TestOTLPExport runs the real exporter against a loopback OTLP/HTTP
// receiver: tracing turns on from the environment alone, and Shutdown
// flushes the batch.
func TestOTLPExport(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies [][]byte
		paths  []string
		ctypes []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, paths, ctypes = append(bodies, b), append(paths, r.URL.Path), append(ctypes, r.Header.Get("Content-Type"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL + "/otlp"}
	tel, err := telemetry.New(&telemetry.Options{
		Getenv:         func(k string) string { return env[k] },
		ServiceName:    "bub-mcp-test",
		ServiceVersion: "v0.0.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tel.StartRequest(context.Background(), telemetry.Request{Method: "tools/call", Tool: "run_code"})
	if span == nil {
		t.Fatal("StartRequest returned a nil span with an OTLP endpoint set")
	}
	_, nested := tel.StartNested(ctx, "fs.read")
	nested.End(telemetry.Outcome{})
	span.End(telemetry.Outcome{})

	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tel.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := tel.Shutdown(sctx); err != nil {
		t.Errorf("second Shutdown = %v; want nil", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(bodies) == 0 {
		t.Fatal("receiver got no export")
	}
	if paths[0] != "/otlp/v1/traces" || ctypes[0] != "application/x-protobuf" {
		t.Errorf("export went to %s as %q; want /otlp/v1/traces as application/x-protobuf", paths[0], ctypes[0])
	}
	all := bytes.Join(bodies, nil)
	// Protobuf strings are stored as is, so the names are findable in the bytes.
	for _, s := range []string{"tools/call run_code", "execute_tool fs.read", "bub-mcp-test", "v0.0.1", "gen_ai.tool.name"} {
		if !bytes.Contains(all, []byte(s)) {
			t.Errorf("export lacks %q", s)
		}
	}
}
