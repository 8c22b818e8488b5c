package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/testbin"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// reloadServer is `bub-mcp serve` over stdio with fakeupstream servers
// in its bub.toml, which the test edits.
type reloadServer struct {
	c       *client.Client
	pid     int
	conf    string
	fake    string
	changed atomic.Int64 // notifications/tools/list_changed seen
}

func startReload(t *testing.T, poll string, upstreams ...string) *reloadServer {
	t.Helper()
	s := &reloadServer{conf: filepath.Join(t.TempDir(), "bub.toml"),
		fake: testbin.Build(t, "github.com/bubbuild/bub-mcp/upstream/internal/fakeupstream")}
	ws := noteWorkspace(t, "a note")
	s.write(t, upstreams...)
	// The workspace line stays as it is: only [upstreams] is edited.
	src, _ := os.ReadFile(s.conf)
	if err := os.WriteFile(s.conf, append([]byte(fmt.Sprintf("[profiles.default]\nworkspace = %q\n", ws)), src...), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG="+s.conf, "BUB_RELOAD_POLL="+poll)
	cmd, c := stdioClient(t, env, mcp.LATEST_PROTOCOL_VERSION, "reload-test", "serve")
	s.c, s.pid = c, cmd.Process.Pid
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/tools/list_changed" {
			s.changed.Add(1)
		}
	})
	// Start-up does not wait for upstreams: the test does.
	for _, u := range upstreams {
		name, _, _ := strings.Cut(u, " ")
		s.until(t, -1, name+"_lists", false, name)
	}
	return s
}

// write replaces the [upstreams] of the config, keeping its first two
// lines (the profile).
func (s *reloadServer) write(t *testing.T, upstreams ...string) {
	t.Helper()
	head := ""
	if b, err := os.ReadFile(s.conf); err == nil {
		lines := strings.SplitN(string(b), "\n", 3)
		if len(lines) == 3 {
			head = lines[0] + "\n" + lines[1] + "\n"
		}
	}
	var b strings.Builder
	b.WriteString(head)
	for _, u := range upstreams {
		name, args, _ := strings.Cut(u, " ")
		fmt.Fprintf(&b, "[upstreams.%s]\ncommand = %q\npin = \"off\"\n", name, s.fake)
		if args != "" {
			fmt.Fprintf(&b, "args = [%q]\n", args)
		}
	}
	if err := os.WriteFile(s.conf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tools lists the tools of the named upstreams.
func (s *reloadServer) tools(t *testing.T, prefix ...string) []string {
	t.Helper()
	res, err := s.c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		for _, p := range prefix {
			if strings.HasPrefix(tl.Name, p+"_") {
				out = append(out, tl.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// until waits (at most 30s) for the listed tools of the prefixes to
// include (or, with gone, not include) tool, and for a list_changed
// since before.
func (s *reloadServer) until(t *testing.T, before int64, tool string, gone bool, prefix ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		has := slices.Contains(s.tools(t, prefix...), tool)
		if has != gone && s.changed.Load() > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tool %s present=%v, list_changed %d (was %d)", tool, has, s.changed.Load(), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// calls streams calls of tools from two goroutines each until stop, which
// fails the test for any failed call.
func (s *reloadServer) calls(t *testing.T, tools ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var n, failed atomic.Int64
	var mu sync.Mutex
	var first string
	for _, tool := range tools {
		args := map[string]any{}
		if tool == "fs_read" {
			args["path"] = "note.txt"
		}
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					res, err := callTool(context.Background(), s.c, tool, args, nil)
					n.Add(1)
					if err != nil || res.IsError {
						failed.Add(1)
						mu.Lock()
						if first == "" {
							first = fmt.Sprintf("%s: %v %v", tool, err, res)
						}
						mu.Unlock()
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
	}
	return func() {
		t.Helper()
		cancel()
		wg.Wait()
		t.Logf("%v: %d calls, %d failed", tools, n.Load(), failed.Load())
		if failed.Load() > 0 || n.Load() == 0 {
			t.Errorf("%d of %d calls failed (first: %s)", failed.Load(), n.Load(), first)
		}
	}
}

// SIGHUP to `bub-mcp serve` reloads [upstreams] (the file watch is off
// here, so only the signal can): a new server's tools are listed, with
// list_changed, while calls to the running one and a builtin go on.
func TestServeReloadsUpstreamsOnSIGHUP(t *testing.T) {
	s := startReload(t, "off", "one")
	before := s.changed.Load()
	stop := s.calls(t, "one_lists", "fs_read")
	s.write(t, "one", "two")
	time.Sleep(300 * time.Millisecond)
	if got := s.tools(t, "two"); len(got) != 0 {
		t.Fatalf("two listed before SIGHUP: %v", got)
	}
	if err := syscall.Kill(s.pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	s.until(t, before, "two_lists", false, "two")
	stop()
	res, err := callTool(t.Context(), s.c, "two_lists", map[string]any{}, nil)
	if err != nil || res.IsError {
		t.Fatalf("two_lists: %v %v", err, res)
	}
}

// With the file watch on, editing bub.toml restarts a changed server and
// removes a dropped one, and calls to the server that stays never fail.
func TestServeReloadsEditedUpstreams(t *testing.T) {
	s := startReload(t, "100ms", "one", "two")
	before := s.changed.Load()
	stop := s.calls(t, "two_lists", "fs_read")
	s.write(t, "one -add=extra", "two")
	s.until(t, before, "one_extra", false, "one")
	stop()

	before = s.changed.Load()
	stop = s.calls(t, "one_extra", "fs_read")
	s.write(t, "one -add=extra")
	s.until(t, before, "two_lists", true, "two")
	stop()
	if res, err := callTool(t.Context(), s.c, "two_lists", map[string]any{}, nil); err == nil && !res.IsError {
		t.Error("two_lists callable after two was removed")
	}
}
