package mcpserver

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// rootsWait bounds how long the server waits for a client's roots/list
// answer (on HTTP it travels on the client's GET stream, which the client
// may open only after notifications/initialized).
const rootsWait = 30 * time.Second

// rootsWorkspaces holds, per 2025 session, the workspace its client's
// roots name: the first file:// root that is an existing directory. A
// session that has none is absent. Entries end with their session.
type rootsWorkspaces struct {
	use func(profile string) bool // Options.RootsWorkspace

	mu  sync.Mutex
	ws  map[string]string // session id → directory
	gen map[string]uint64 // session id → the latest roots/list asked
}

// watchRoots asks a session's client for its roots once the session is
// initialized and again whenever the client says they changed.
func (s *Server) watchRoots(hooks *server.Hooks) {
	if s.roots.use == nil {
		return
	}
	s.roots.ws, s.roots.gen = map[string]string{}, map[string]uint64{}
	hooks.AddOnUnregisterSession(func(_ context.Context, sess server.ClientSession) {
		s.roots.mu.Lock()
		delete(s.roots.ws, sess.SessionID())
		delete(s.roots.gen, sess.SessionID())
		s.roots.mu.Unlock()
	})
}

// askRoots is the handler of notifications/initialized and
// notifications/roots/list_changed. Notifications are handled where the
// transport reads (stdio's read loop), and the answer comes in there, so
// the question goes out from a goroutine of its own.
func (s *Server) askRoots(ctx context.Context, _ mcp.JSONRPCNotification) {
	if s.roots.use == nil {
		return
	}
	// On stdio the notification carries no caller; the profile is checked
	// again where the workspace is used (rootsWorkspace).
	if p := ConnectionFromContext(ctx).Profile; p != "" && !s.roots.use(p) {
		return
	}
	sess := server.ClientSessionFromContext(ctx)
	ci, ok := sess.(server.SessionWithClientInfo)
	if !ok || sess.SessionID() == "" || ci.GetClientCapabilities().Roots == nil {
		return
	}
	id := sess.SessionID()
	s.roots.mu.Lock()
	s.roots.gen[id]++
	gen := s.roots.gen[id]
	s.roots.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rootsWait)
		defer cancel()
		dir := ""
		err := s.outboundOf(ctx).BeforeRequest(ctx)
		if err == nil {
			var res *mcp.ListRootsResult
			if res, err = s.mcp.RequestRoots(ctx, mcp.ListRootsRequest{Request: mcp.Request{Method: string(mcp.MethodListRoots)}}); err == nil {
				dir = firstDirRoot(res.Roots)
			}
		}
		if err != nil {
			s.log.Warn("mcp.roots.unanswered", "session", id, "error", err)
		}
		s.roots.mu.Lock()
		defer s.roots.mu.Unlock()
		if _, open := s.roots.gen[id]; !open || s.roots.gen[id] != gen {
			return // the session ended, or a newer question is out
		}
		if dir == "" {
			delete(s.roots.ws, id)
			return
		}
		s.roots.ws[id] = dir
		s.log.Info("mcp.roots.workspace", "session", id, "workspace", dir)
	}()
}

// rootsWorkspace is the workspace ctx's session takes from its client's
// roots, or "" (the profile's, --workspace, or the working directory).
func (s *Server) rootsWorkspace(ctx context.Context, profile string) string {
	if s.roots.use == nil || !s.roots.use(profile) {
		return ""
	}
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil {
		return ""
	}
	s.roots.mu.Lock()
	defer s.roots.mu.Unlock()
	return s.roots.ws[sess.SessionID()]
}

// firstDirRoot returns the first file:// root that names an existing
// directory.
func firstDirRoot(roots []mcp.Root) string {
	for _, r := range roots {
		u, err := url.Parse(r.URI)
		if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
			continue
		}
		p := filepath.FromSlash(u.Path)
		if !filepath.IsAbs(p) {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return filepath.Clean(p)
		}
	}
	return ""
}
