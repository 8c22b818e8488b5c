package upstream_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/google/go-cmp/cmp"
)

// caller calls one tool in a loop until stopped, counting failures.
type caller struct {
	tool  string
	args  map[string]any
	calls atomic.Int64
	fails atomic.Int64
	mu    sync.Mutex
	first string // the first failure's error
}

func (c *caller) run(ctx context.Context, h *host, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			res := h.call(context.Background(), c.tool, c.args)
			c.calls.Add(1)
			if res.Err != nil {
				c.fails.Add(1)
				c.mu.Lock()
				if c.first == "" {
					c.first = res.Err.Error()
				}
				c.mu.Unlock()
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
}

// stream runs callers of tools until the returned stop, which fails the
// test for any failed call and for a caller that never got a call in.
func stream(t *testing.T, h *host, tools ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var cs []*caller
	for _, tool := range tools {
		c := &caller{tool: tool, args: map[string]any{}}
		if tool == "fs.read" {
			c.args = map[string]any{"path": "note.txt"}
		}
		cs = append(cs, c)
		c.run(ctx, h, &wg)
		c.run(ctx, h, &wg) // two goroutines per tool
	}
	return func() {
		t.Helper()
		cancel()
		wg.Wait()
		for _, c := range cs {
			t.Logf("%s: %d calls, %d failed", c.tool, c.calls.Load(), c.fails.Load())
			if c.fails.Load() > 0 || c.calls.Load() == 0 {
				t.Errorf("%s: %d of %d calls failed (first: %s)", c.tool, c.fails.Load(), c.calls.Load(), c.first)
			}
		}
	}
}

// upstreamTools is the registered tools of the named upstreams, sorted.
func upstreamTools(h *host, names ...string) []string {
	var out []string
	for _, tool := range h.Registry().Tools() {
		for _, n := range names {
			if strings.HasPrefix(tool.Name, n+".") {
				out = append(out, tool.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// waitFor polls cond for at most 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Editing bub.toml's [upstreams] while calls stream in adds, restarts and
// removes upstreams (real fakeupstream processes) without one failed call
// to a tool whose server did not change, clients are told each change,
// and a bad edit changes nothing.
func TestHotReloadUnderCalls(t *testing.T) {
	fake := fakeBinary(t)
	home := t.TempDir()
	conf := filepath.Join(home, "bub.toml")
	ws := filepath.Join(home, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "note.txt"), []byte("a note"), 0o600); err != nil {
		t.Fatal(err)
	}
	table := func(name string, flags ...string) string {
		return stdioTable(name, fake, flags, `pin = "off"`)
	}
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	one := table("one")
	write(one)
	h := newHost(t, one, home, "builtin")
	m, _ := upstream.FromApp(h.App)
	var notified atomic.Int64
	h.OnToolsChanged(func() { notified.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { defer close(watched); m.Watch(ctx, 100*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-watched })
	pid := h.status(t, "one").PID
	base := []string{"one.big", "one.burst", "one.elicit", "one.gen_0", "one.lists", "one.read", "one.sample"}
	two := []string{"two.big", "two.burst", "two.elicit", "two.gen_0", "two.lists", "two.read", "two.sample"}
	// step waits for want to be the registered tools, with a list_changed.
	step := func(what string, want []string) {
		t.Helper()
		before := notified.Load()
		waitFor(t, what, func() bool {
			return cmp.Equal(upstreamTools(h, "one", "two"), want) && notified.Load() > before
		})
	}

	// Add a second server: one's calls and a builtin's go on.
	stop := stream(t, h, "one.lists", "fs.read")
	write(one + table("two"))
	step("two mounted", slices.Concat(base, two))
	h.waitState(t, "two", upstream.StateReady, nil)
	if got := h.text(t, "two.lists", map[string]any{}); got == "" {
		t.Error("two.lists: empty")
	}
	stop()

	// Change the first one's args: it is restarted with them (its new
	// tool shows), two is not touched.
	pidTwo := h.status(t, "two").PID
	stop = stream(t, h, "two.lists", "fs.read")
	write(table("one", "-add", "extra") + table("two"))
	step("one restarted", slices.Concat([]string{"one.big", "one.burst", "one.elicit", "one.extra", "one.gen_0", "one.lists", "one.read", "one.sample"}, two))
	h.waitState(t, "one", upstream.StateReady, nil)
	if got := h.text(t, "one.extra", map[string]any{}); got != "added extra" {
		t.Errorf("one.extra: %q", got)
	}
	if p := h.status(t, "one").PID; p == pid || p == 0 {
		t.Errorf("one's pid %d after the restart; was %d", p, pid)
	}
	if p := h.status(t, "two").PID; p != pidTwo {
		t.Errorf("two's pid changed from %d to %d: an unchanged server was restarted", pidTwo, p)
	}
	stop()

	// Remove the second: its tools go, its process ends.
	stop = stream(t, h, "one.lists", "fs.read")
	write(table("one", "-add", "extra"))
	step("two removed", []string{"one.big", "one.burst", "one.elicit", "one.extra", "one.gen_0", "one.lists", "one.read", "one.sample"})
	waitFor(t, "two's process ends", func() bool { return syscallGone(pidTwo) })
	stop()
	if res := h.call(t.Context(), "two.lists", map[string]any{}); res.Err == nil {
		t.Error("two.lists still callable after two was removed")
	}
	var names []string
	for _, s := range m.Status() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"one"}, names); diff != "" {
		t.Errorf("upstreams (-want +got):\n%s", diff)
	}

	// A server in $BUB_HOME/mcp.json is mounted and removed the same way.
	mcpJSON := filepath.Join(home, upstream.MCPJSONName)
	stop = stream(t, h, "one.lists", "fs.read")
	if err := os.WriteFile(mcpJSON, []byte(`{"mcpServers": {"two": {"command": "`+fake+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two from mcp.json", func() bool { return slices.Contains(upstreamTools(h, "two"), "two.lists") })
	if err := os.Remove(mcpJSON); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two from mcp.json removed", func() bool { return len(upstreamTools(h, "two")) == 0 })
	stop()

	// Bad edits change nothing, and say where they are wrong.
	pid = h.status(t, "one").PID
	for _, bad := range []struct{ src, want string }{
		{"[upstreams.one\ncommand = 1\n", "bub.toml:2"},
		{table("one") + "[upstreams.bad]\nargs = [\"x\"]\n", "upstreams.bad.command: one of command"},
	} {
		write(bad.src)
		_, err := m.Reload()
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("reload of %q: error %v; want one naming %q", bad.src, err, bad.want)
		}
	}
	time.Sleep(100 * time.Millisecond) // the watcher saw the edit too
	if p := h.status(t, "one").PID; p != pid {
		t.Errorf("a bad edit restarted one (pid %d, was %d)", p, pid)
	}
	if got := h.text(t, "one.extra", map[string]any{}); got != "added extra" {
		t.Errorf("one.extra after bad edits: %q", got)
	}
}

// syscallGone reports whether no process has the pid any more.
func syscallGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	return p.Signal(syscall.Signal(0)) != nil
}

// A call in flight to a server a reload removes finishes with its result;
// the server is stopped after it, and a new call is refused.
func TestHotReloadDrainsRemovedServer(t *testing.T) {
	fake := fakeBinary(t)
	home := t.TempDir()
	conf := filepath.Join(home, "bub.toml")
	keep := stdioTable("keep", fake, nil, `pin = "off"`)
	src := keep + stdioTable("slow", fake, []string{"-call-delay", "1s", "-add", "work"}, `pin = "off"`)
	if err := os.WriteFile(conf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, src, home)
	m, _ := upstream.FromApp(h.App)
	pid := h.status(t, "slow").PID
	type outcome struct {
		text string
		err  *registry.Error
	}
	done := make(chan outcome, 1)
	go func() {
		res := h.call(context.Background(), "slow.work", map[string]any{})
		done <- outcome{res.Text, res.Err}
	}()
	time.Sleep(300 * time.Millisecond) // the call is in flight
	if err := os.WriteFile(conf, []byte(keep), 0o600); err != nil {
		t.Fatal(err)
	}
	ch, err := m.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(upstream.Changes{Removed: []string{"slow"}}, ch); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if got := upstreamTools(h, "slow"); len(got) != 0 {
		t.Errorf("slow's tools still registered: %v", got)
	}
	if res := h.call(t.Context(), "slow.work", map[string]any{}); res.Err == nil {
		t.Error("a new call of slow.work ran after slow was removed")
	}
	select {
	case o := <-done:
		if o.err != nil || o.text != "added work" {
			t.Errorf("the call in flight: %q, %v; want its result", o.text, o.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call in flight never ended")
	}
	waitFor(t, "slow's process ends", func() bool { return syscallGone(pid) })
}
