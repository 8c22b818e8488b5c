package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/auth/asfront"
	"github.com/bubbuild/bub-mcp/auth/ratelimit"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/console"
	"github.com/bubbuild/bub-mcp/internal/heapfloor"
	"github.com/bubbuild/bub-mcp/internal/reclaim"
	"github.com/bubbuild/bub-mcp/limits"
	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/stdio"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/upstream"
	"github.com/spf13/cobra"
)

// serveCommand is `bub-mcp serve`.
func serveCommand(env *Env) *cobra.Command {
	var (
		c        common
		addr     string
		insecure bool
		check    bool
	)
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "serve the tools over MCP: stdio (default) or streamable HTTP at /mcp",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), env, &c, addr, insecure, check)
		},
	}
	c.flags(cmd.Flags())
	cmd.Flags().StringVar(&addr, "http", "", "serve streamable HTTP on ADDR (e.g. 127.0.0.1:8080) instead of stdio")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow a non-loopback bind without any auth token")
	cmd.Flags().BoolVar(&check, "check", false, "load and check the configuration (bub.toml, mcp.json, profiles, state key, auth) as serve would, then exit 0, or 1 with the error, without serving")
	return cmd
}

// stdioOnTerminal is what serve says when a person, not a client, is at
// the other end of stdio.
const stdioOnTerminal = "bub-mcp serve speaks MCP over stdio, one JSON-RPC message per line, to the client that starts it " +
	"(bub-mcp install adds it to one). To try it by hand, run serve --http 127.0.0.1:8080 and use curl " +
	"(README, \"Any HTTP client\"). Ctrl-D ends it."

// freeAfterStart is when serve gives start-up's garbage back to the OS:
// after a client's initialize and first listings, which come within a few
// milliseconds of the start.
const freeAfterStart = 100 * time.Millisecond

// serve serves until ctx ends; with check, it stops before serving,
// once everything serving needs has loaded.
func serve(ctx context.Context, env *Env, c *common, addr string, insecure, check bool) error {
	if addr != "" {
		if err := checkListen(addr, "--http"); err != nil {
			return err
		}
	}
	a, err := newApp(ctx, env, c)
	if err != nil {
		return err
	}
	defer closeApp(env, a)
	cfg := a.Config()
	stateKey := env.Getenv("BUB_STATE_KEY")
	if stateKey == "" {
		stateKey = cfg.Server.StateKey
	}
	key, err := mcpserver.LoadStateKey(stateKey, a.Home())
	if err != nil {
		return err
	}
	// The process's memory limit is the runtime's: one reclaimer for the
	// process, made here where the process is, not per Server.
	srv, err := mcpserver.New(&mcpserver.Options{Version: VersionString(), Backend: a, Reclaimer: reclaim.New(), Registry: a.Registry(), Extensions: serverExtensions(a), Logger: env.Logger, StateKey: key, Telemetry: a.Telemetry(),
		// Without --workspace, a profile without one works in the
		// client's roots when the client has them.
		RootsWorkspace: func(profile string) bool {
			p, ok := cfg.Profiles[profile]
			return c.workspace == "" && ok && p.Workspace == ""
		},
		Limits: mcpserver.Limits{
			MaxMessageBytes:        a.Config().Server.MaxMessageBytes,
			MaxConcurrentRequests:  a.Config().Server.MaxConcurrentRequests,
			MaxConcurrentPerClient: a.Config().Server.MaxConcurrentPerClient,
			ReadTimeout:            a.Config().Server.ReadTimeout.Duration,
			IdleTimeout:            a.Config().Server.IdleTimeout.Duration,
			// 2025 HTTP sessions.
			MaxSessions:             a.Config().Server.MaxSessions,
			MaxSessionsPerPrincipal: a.Config().Server.MaxSessionsPerPrincipal,
		}})
	if err != nil {
		return err
	}
	// Start-up (schema compilation, SDK registrations) leaves a few MiB of
	// garbage; give those pages back soon rather than when the scavenger
	// gets to them, since a server often idles (one per IDE window). Not
	// at once: the forced collection then competes with a client's first
	// requests for the CPU (~2 ms of ~21 ms to the first tools/list here).
	time.AfterFunc(freeAfterStart, debug.FreeOSMemory)
	heapfloor.Keep(env.Getenv, heapfloor.Default)
	grace := cfg.Server.ShutdownGrace.Duration
	if !check {
		poll, err := reloadPollOf(env)
		if err != nil {
			return err
		}
		stopReload := hotReload(ctx, a, poll)
		defer stopReload()
	}
	if addr == "" {
		if check {
			printChecked(env, cfg.Path, filepath.Join(a.Home(), upstream.MCPJSONName), len(cfg.ProfileNames()))
			return nil
		}
		env.Logger.Info("mcp.stdio.start", "profile", c.profile, "tools", profileToolCount(ctx, a, c.profile))
		if env.terminal(env.Stdin) {
			// A person typed `bub-mcp serve`: without a word it only
			// seems to hang.
			fmt.Fprintln(env.Stderr, stdioOnTerminal)
		}
		if cfg.Server.Metrics {
			env.Logger.Warn("mcp.metrics.unserved", "reason", "[server] metrics serves /metrics on the HTTP transport only (serve --http)")
		}
		return stdio.Serve(ctx, srv, env.Stdin, env.Stdout, providers.Connection{Profile: c.profile}, grace)
	}
	loopback := streamhttp.IsLoopback(addr)
	tokens := make([]streamhttp.Token, len(cfg.Auth.Tokens))
	for i, t := range cfg.Auth.Tokens {
		tokens[i] = streamhttp.Token{Name: t.Name, SHA256: t.SHA256, Profile: t.Profile}
	}
	front, oauth, closeFront, err := oauthFront(ctx, cfg, a.Home(), a.StoreDSN(), env.Logger)
	if err != nil {
		return err
	}
	defer closeFront()
	requestLimits, err := requestLimitsOf(a, env)
	if err != nil {
		return err
	}
	if !loopback && len(tokens) == 0 && oauth == nil && !insecure {
		return errors.New("refusing to serve " + addr + " without auth: configure [[auth.tokens]] or [auth.oauth] in bub.toml, bind 127.0.0.1, or pass --insecure")
	}
	profiles := cfg.ProfileNames()
	if err := checkProfileWorkspaces(cfg, profiles); err != nil { // HTTP serves every profile
		return err
	}
	var metrics http.Handler
	if cfg.Server.Metrics {
		metrics = a.Telemetry().MetricsHandler()
	}
	var con http.Handler
	if m, ok := console.FromApp(a); ok && m.Enabled {
		// The console's own auth: [[console.tokens]], [[auth.tokens]]
		// (admin = true for everything) and OAuth rules with console =
		// true; beyond loopback it needs one of them.
		conOAuth, err := consoleOAuth(cfg, front)
		if err != nil {
			return err
		}
		cs, err := console.New(console.Options{App: a, Loopback: loopback, AllowedHosts: cfg.Server.AllowedHosts, Logger: env.Logger, Version: VersionString(), OAuth: conOAuth})
		if err != nil {
			return fmt.Errorf("[console] enabled: %w", err)
		}
		defer cs.Close()
		con = cs.Handler()
	}
	routes := frontRoutes(front)
	ups, hasUpstreams := upstream.FromApp(a)
	if hasUpstreams {
		// The sign-in of auth = "oauth" upstreams: login links and the
		// OAuth callback.
		if routes == nil {
			routes = map[string]http.Handler{}
		}
		maps.Copy(routes, ups.LoginRoutes())
	}
	handler := streamhttp.New(srv, streamhttp.Options{
		Console:        con,
		Routes:         routes,
		Metrics:        metrics,
		DefaultProfile: c.profile,
		Profiles:       profiles,
		Tokens:         tokens,
		OAuth:          oauth,
		RequestLimits:  requestLimits,
		CheckHosts:     loopback,
		AllowedHosts:   cfg.Server.AllowedHosts,
		SessionIdleTTL: cfg.Server.SessionIdleTTL.Duration,
		Health:         upstreamHealth(a),
		Loopback:       loopback,
		CORSOrigins:    cfg.Server.CORSOrigins,
	})
	if check {
		printChecked(env, cfg.Path, filepath.Join(a.Home(), upstream.MCPJSONName), len(profiles))
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if hasUpstreams {
		// Login links point to public_url, else the address served.
		base := cfg.Server.PublicURL
		if base == "" {
			base = "http://" + ln.Addr().String()
		}
		ups.SetLoginBase(base)
	}
	env.Logger.Info("mcp.http.start", "url", "http://"+ln.Addr().String()+"/mcp", "profiles", profiles, "auth", len(tokens) > 0 || oauth != nil, "oauth", oauth != nil)
	return handler.Serve(ctx, ln, grace)
}

// reloadPoll is how often serve looks at bub.toml and mcp.json for edits,
// unless $BUB_RELOAD_POLL says otherwise.
const reloadPoll = time.Second

// reloadPollOf reads $BUB_RELOAD_POLL: a duration, or "off" (or 0) for
// SIGHUP only.
func reloadPollOf(env *Env) (time.Duration, error) {
	v := env.Getenv("BUB_RELOAD_POLL")
	switch v {
	case "":
		return reloadPoll, nil
	case "off", "0":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Millisecond {
		return 0, fmt.Errorf("$BUB_RELOAD_POLL: want a duration of at least 10ms (such as 1s) or \"off\", not %q", v)
	}
	return d, nil
}

// hotReload reloads the upstreams when bub.toml or $BUB_HOME/mcp.json is
// edited (polled every poll; never when poll is 0), or on SIGHUP, until
// the returned stop is called.
func hotReload(ctx context.Context, a *app.App, poll time.Duration) (stop func()) {
	m, ok := upstream.FromApp(a)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		if poll > 0 {
			m.Watch(ctx, poll)
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				m.ReloadLogged("SIGHUP")
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
		<-done
	}
}

// oauthServer builds the OAuth resource server of [auth.oauth]; nil
// without one. It contacts the issuer only on the first request. With
// [auth.oauth.proxy] it accepts the front's tokens: front, in this
// process, gives their keys in memory; without it (bub-mcp console) they
// come from the front's jwks_uri.
//
// keep, when set, keeps only the rules it accepts (the console's); nil
// when none is kept.
func oauthServer(cfg *config.Config, front *asfront.Front, keep func(config.OAuthRule) bool) (*auth.ResourceServer, error) {
	o := cfg.Auth.OAuth
	if o == nil || (keep != nil && !slices.ContainsFunc(o.Rules, keep)) {
		return nil, nil
	}
	opts := auth.Options{
		Issuer:         o.Issuer,
		PublicURL:      cfg.Server.PublicURL,
		RequiredScopes: o.RequiredScopes,
		Audience:       o.Audience,
		NameClaim:      o.NameClaim,
		JWKSURL:        o.JWKSURL,
		ClockSkew:      o.ClockSkew.Duration,
		ResourceName:   "bub-mcp",
	}
	for _, r := range o.Rules {
		if keep == nil || keep(r) {
			opts.Rules = append(opts.Rules, auth.Rule{Claim: r.Claim, Value: r.Value, Profile: r.Profile})
		}
	}
	if in := o.Introspection; in != nil {
		opts.Introspection = &auth.Introspection{URL: in.URL, ClientID: in.ClientID, ClientSecret: in.ClientSecret}
	}
	if o.Proxy != nil {
		issuer, err := proxyIssuer(cfg)
		if err != nil {
			return nil, err
		}
		// The front's tokens name the resource itself; audience is for
		// the IdP's own tokens (Entra's api://…).
		opts.Issuer, opts.JWKSURL, opts.Audience, opts.Introspection = issuer, issuer+asfront.JWKSPath, nil, nil
		if front != nil {
			// In-process fetches are cheap: a rotated key is seen at once.
			opts.HTTPClient, opts.MinRefetchInterval = front.KeysClient(), time.Second
		}
	}
	rs, err := auth.NewResourceServer(opts)
	if err != nil {
		return nil, fmt.Errorf("[auth.oauth]: %w", err)
	}
	return rs, nil
}

// requestLimitsOf builds the limiter of the [[limits]] rules that name no
// tool (the limits module applies the others to tool calls); nil when
// there are none.
func requestLimitsOf(a *app.App, env *Env) (*ratelimit.Limits, error) {
	m, ok := limits.FromApp(a)
	if !ok {
		return nil, nil
	}
	var rules []ratelimit.Rule
	for _, r := range m.Rules() {
		if r.Tool == "" {
			rules = append(rules, r)
		}
	}
	if len(rules) == 0 {
		return nil, nil
	}
	return ratelimit.New(ratelimit.Options{Rules: rules, Limiter: m.Buckets(), Logger: env.Logger})
}
