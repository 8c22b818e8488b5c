package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
)

// firstCallEnv makes the test binary, started by
// TestFirstCallDoesNotLoadMetaschemas, run firstCallAllocs in a fresh
// process and exit instead of running tests.
const firstCallEnv = "BUB_APP_TEST_FIRST_CALL"

func TestMain(m *testing.M) {
	if os.Getenv(firstCallEnv) != "" {
		n, err := firstCallAllocs()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(n)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// firstCallAllocs builds an App, idles as a server does between its
// client's first tools/list and first tools/call, then makes the process's
// first tool call and returns the bytes it allocated.
func firstCallAllocs() (uint64, error) {
	cfg, err := config.Parse("test.toml", "", func(string) string { return "" })
	if err != nil {
		return 0, err
	}
	home, err := os.MkdirTemp("", "bub-app-warm-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(home)
	a, err := app.New(context.Background(), &app.Options{Config: cfg, Registry: testRegistry(), Modules: []string{}, Home: home, Workspace: home,
		Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	if err != nil {
		return 0, err
	}
	defer a.Close()
	conn := &providers.Connection{Transport: "test"}
	if err := a.Resolve(context.Background(), conn); err != nil {
		return 0, err
	}
	time.Sleep(time.Second)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := a.Call(context.Background(), conn, app.Request{Tool: "big", Args: json.RawMessage(`{"n":2}`), Mode: app.Direct})
	runtime.ReadMemStats(&after)
	if res.Err != nil {
		return 0, res.Err
	}
	return after.TotalAlloc - before.TotalAlloc, nil
}

// TestFirstCallDoesNotLoadMetaschemas checks that an App loads what
// argument validation needs (registry.WarmValidation: the JSON Schema
// metaschemas, 1.7 MB) shortly after New, off both the start-up path and
// the first call's: a process's first tool call, a second after New,
// allocates only what a call and its own tool's validator need. It runs
// in a fresh process (this test binary, re-run), since the metaschemas
// are loaded once per process.
func TestFirstCallDoesNotLoadMetaschemas(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), firstCallEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("child printed %q: %v", out, err)
	}
	if n > 512<<10 {
		t.Errorf("the first call a second after app.New allocated %d bytes; want at most 512 KiB (the metaschemas, 1.7 MB, were loaded on the call)", n)
	}
}
