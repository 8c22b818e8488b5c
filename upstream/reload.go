package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
)

// This file is hot reload: bub.toml's [upstreams] and $BUB_HOME/mcp.json
// are read again (on an edit, or when asked: SIGHUP), and the running set
// of servers is changed to match, server by server, without touching the
// ones whose configuration is the same.

// drainMax bounds how long a removed or replaced server's in-flight calls
// may run before its connection is closed under them.
const drainMax = 30 * time.Second

// hotState is what the last (re)load saw.
type hotState struct {
	mu      sync.Mutex // one reload at a time
	path    string     // bub.toml; empty without one
	mcpJSON string
	// others is a digest of bub.toml without [upstreams]: a change there
	// needs a restart, which a reload says.
	others string
	// files are the watched files' contents' digests.
	files map[string]string
	// seen is what each watched file's digest was last computed from, so
	// a poll reads and hashes a file only when its size or time changed.
	seen map[string]seenFile
}

// seenFile is a watched file's size and modification time, with the
// digest of its content then.
type seenFile struct {
	size   int64
	mod    time.Time
	digest string
}

// digest is path's content digest (fileDigest), computed again only
// when the file's size or modification time changed since the last one.
func (h *hotState) digest(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		delete(h.seen, path)
		return "missing"
	}
	if f, ok := h.seen[path]; ok && f.size == fi.Size() && f.mod.Equal(fi.ModTime()) {
		return f.digest
	}
	d := fileDigest(path)
	if h.seen == nil {
		h.seen = map[string]seenFile{}
	}
	h.seen[path] = seenFile{size: fi.Size(), mod: fi.ModTime(), digest: d}
	return d
}

func (h *hotState) init(a *app.App) {
	h.path = a.Config().Path
	h.mcpJSON = filepath.Join(a.Home(), MCPJSONName)
	h.files = map[string]string{}
	for _, f := range h.watched() {
		h.files[f] = h.digest(f)
	}
	if h.path != "" {
		if b, err := os.ReadFile(h.path); err == nil {
			h.others = othersDigest(b)
		}
	}
}

func (h *hotState) watched() []string {
	if h.path == "" {
		return []string{h.mcpJSON}
	}
	return []string{h.path, h.mcpJSON}
}

// fileDigest is a file's content digest; a missing file has its own.
func fileDigest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "missing"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// othersDigest digests a bub.toml's tables other than [upstreams]; ""
// when it does not parse (the reload reports that).
func othersDigest(src []byte) string {
	var v map[string]any
	if _, err := toml.Decode(string(src), &v); err != nil {
		return ""
	}
	delete(v, "upstreams")
	b, err := json.Marshal(v) // maps are written sorted
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// serverDigest identifies everything a server's table says (configDigest
// is only what process it is): any difference restarts the server.
func serverDigest(s *Server) string {
	b, _ := json.Marshal([]any{s, s.origin, s.envModule})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Changes is what a reload did, by server name.
type Changes struct {
	Added, Removed, Restarted []string
}

// Reload reads bub.toml's [upstreams] and $BUB_HOME/mcp.json again and
// makes the running servers match: a new server is mounted (and started
// as at start-up: eager, or lazy without a remembered tool list), a
// removed one loses its tools at once and is stopped once its in-flight
// calls end (at most drainMax), a changed one is stopped so and started
// again with its new settings, and an unchanged one is not touched.
// Clients are told the tool list changed. A configuration that does not
// load or check changes nothing: the error names the file, line and key.
// Other tables of bub.toml are not reloaded; a change to them is logged
// as needing a restart.
func (m *Module) Reload() (Changes, error) {
	var ch Changes
	if m.ctx == nil || m.app.OnDemand() {
		return ch, fmt.Errorf("upstream: hot reload needs a serving App")
	}
	h := &m.hot
	h.mu.Lock()
	defer h.mu.Unlock()
	if m.ctx.Err() != nil {
		return ch, fmt.Errorf("upstream: shutting down, not reloading")
	}
	for _, f := range h.watched() {
		delete(h.seen, f) // asked to reload: read it whatever its time says
		h.files[f] = h.digest(f)
	}
	cfg := &config.Config{}
	if h.path != "" {
		src, err := os.ReadFile(h.path)
		if err != nil {
			return ch, fmt.Errorf("config: %w", err)
		}
		if cfg, err = config.Parse(h.path, string(src), m.app.Getenv); err != nil {
			return ch, err
		}
		if d := othersDigest(src); d != h.others {
			h.others = d
			m.log.Warn("upstream.reload.restart_needed", "file", h.path,
				"why", "only [upstreams] is reloaded; restart bub-mcp to apply the other changes")
		}
	}
	servers, err := m.servers(cfg)
	if err != nil {
		return ch, err
	}
	want := map[string]*Server{}
	for _, s := range servers {
		want[s.name] = s
	}
	old := m.list()
	var keep, gone []*upstream
	for _, u := range old {
		s, ok := want[u.cfg.name]
		switch {
		case !ok:
			gone = append(gone, u)
			ch.Removed = append(ch.Removed, u.cfg.name)
		case serverDigest(s) != serverDigest(u.cfg):
			gone = append(gone, u)
			ch.Restarted = append(ch.Restarted, u.cfg.name)
		default:
			keep = append(keep, u)
			delete(want, u.cfg.name)
		}
	}
	var fresh []*upstream
	for _, s := range servers {
		if _, ok := want[s.name]; !ok {
			continue
		}
		if !slices.Contains(ch.Restarted, s.name) {
			ch.Added = append(ch.Added, s.name)
		}
		u := newUpstream(s, m)
		u.inheritSubscriptions(gone) // a restarted server's clients stay subscribed
		fresh = append(fresh, u)
	}
	// The leaving servers' tools go first, in one change, so a replaced
	// server's new tools do not clash with its old ones.
	// Closed first, under the lock registration holds, so no list it is
	// loading meanwhile brings them back.
	var names []string
	for _, u := range gone {
		u.loadMu.Lock()
		u.close()
		u.mu.Lock()
		names = append(names, u.names...)
		u.names, u.digest = nil, ""
		u.mu.Unlock()
		u.loadMu.Unlock()
	}
	if len(names) > 0 {
		if err := m.app.UpdateTools(names, nil); err != nil {
			return ch, err
		}
	}
	for _, u := range gone {
		m.retire(u)
	}
	all := append(keep, fresh...)
	slices.SortFunc(all, func(a, b *upstream) int { return strings.Compare(a.cfg.name, b.cfg.name) })
	m.upsMu.Lock()
	m.ups = all
	m.upsMu.Unlock()
	m.catalogChanged() // removed servers' resources and prompts go
	for _, u := range fresh {
		m.mount(u)
	}
	if len(ch.Added)+len(ch.Removed)+len(ch.Restarted) > 0 {
		m.log.Info("upstream.reload", "added", ch.Added, "removed", ch.Removed, "restarted", ch.Restarted)
	}
	return ch, nil
}

// retire stops a closed server whose tools are unregistered: calls that
// are still running get drainMax (or the server's timeout, if shorter)
// to end, new ones are told it is shut down, then its connection and
// environment are closed.
func (m *Module) retire(u *upstream) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		drain := time.NewTimer(min(drainMax, u.cfg.Timeout.Duration))
		select {
		case <-u.active.idle():
		case <-drain.C:
		case <-m.ctx.Done():
		}
		drain.Stop()
		u.cancel()
		// The run loop stops the session when its ctx ends; wait for
		// that before closing the environment it ran in.
		u.mu.Lock()
		running := u.running
		u.mu.Unlock()
		if running {
			u.waitStopped()
		}
		if err := u.closeEnvironment(); err != nil {
			m.log.Warn("upstream.reload.close", "upstream", u.cfg.name, "error", err)
		}
	}()
}

// Watch polls bub.toml and $BUB_HOME/mcp.json every interval until ctx
// ends, and reloads (Reload) when either one's content changed and then
// stayed the same for one interval; a reload that fails is logged with its error and changes nothing.
func (m *Module) Watch(ctx context.Context, interval time.Duration) {
	if m.ctx == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last []string // the digests of the previous poll
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		h := &m.hot
		h.mu.Lock()
		var now []string
		changed := ""
		for _, f := range h.watched() {
			d := h.digest(f)
			now = append(now, d)
			if d != h.files[f] {
				changed = f
			}
		}
		h.mu.Unlock()
		// An edit is read once it has settled: the same content on two
		// polls in a row, so a file caught while being written (an
		// editor truncates, then writes) is not taken for the new one.
		settled := slices.Equal(now, last)
		last = now
		if changed == "" || !settled {
			continue
		}
		m.ReloadLogged("file changed: " + changed)
	}
}

// ReloadLogged is Reload with its outcome logged, for triggers that have
// no one to answer (a file watch, SIGHUP).
func (m *Module) ReloadLogged(why string) {
	if _, err := m.Reload(); err != nil {
		m.log.Error("upstream.reload.refused", "why", why, "error", err,
			"kept", "the running upstreams are unchanged")
	}
}
