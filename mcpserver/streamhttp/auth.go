package streamhttp

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"

	"github.com/bubbuild/bub-mcp/auth"
	"github.com/bubbuild/bub-mcp/registry"
)

// bearerAuth makes a valid bearer token mandatory when static tokens or
// an OAuth resource server are configured, and names the caller after it:
// a static token's name and profile, or an OAuth principal (issuer#sub)
// and the profile its claims allow on this path. A static token is tried
// first (a hash look-up); anything else goes to the resource server,
// which answers refusals itself (401 with resource_metadata, 403
// insufficient_scope). It runs after callerState. Neither: no link. An
// OAuth caller's Connection also carries its token (OAuthToken), hidden
// from logs, for auth = "token_exchange" upstreams.
func bearerAuth(tokens []Token, rs *auth.ResourceServer, log *slog.Logger) Middleware {
	if len(tokens) == 0 && rs == nil {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, p, ok := authorize(w, r, tokens, rs, log)
			if !ok {
				return
			}
			caller := httpRequestFrom(r.Context()).caller
			if p == nil {
				caller.Principal, caller.Profile = tok.Name, tok.Profile
				next.ServeHTTP(w, r)
				return
			}
			caller.Principal, caller.Profile = p.ID(), p.Profile
			if p.Name != caller.Principal {
				caller.PrincipalName = p.Name
			}
			// The validated token itself, for an upstream with auth =
			// "token_exchange" to trade at its issuer; a static token
			// is never passed on.
			_, raw, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			caller.OAuthToken = registry.NewCallerToken(strings.TrimSpace(raw))
			next.ServeHTTP(w, r)
		})
	}
}

// requireToken guards an endpoint that is not MCP (/metrics) with the
// same credentials, when there are any.
func requireToken(tokens []Token, rs *auth.ResourceServer, log *slog.Logger) Middleware {
	if len(tokens) == 0 && rs == nil {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, _, ok := authorize(w, r, tokens, rs, log); ok {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// authorize finds who r's bearer token names: a static token (a hash
// look-up, tried first), else, with rs, an OAuth principal (p set). When
// neither accepts it, it has answered w with the refusal and ok is false.
func authorize(w http.ResponseWriter, r *http.Request, tokens []Token, rs *auth.ResourceServer, log *slog.Logger) (tok Token, p *auth.Principal, ok bool) {
	if tok, ok := authenticate(r, tokens); ok {
		return tok, nil, true
	}
	if rs == nil {
		unauthorized(w, r)
		return Token{}, nil, false
	}
	p, err := rs.Authenticate(r.Context(), r)
	if err != nil {
		refuseToken(w, r, rs, log, err)
		return Token{}, nil, false
	}
	return Token{}, p, true
}

// refuseToken answers an OAuth refusal and logs its cause, which the answer
// leaves out (auth.Error.Err: an unreachable IdP, an unknown key): at
// Warn when the server cannot check tokens (5xx), else at Debug. The
// causes carry no token or secret.
func refuseToken(w http.ResponseWriter, r *http.Request, rs *auth.ResourceServer, log *slog.Logger, err error) {
	level := slog.LevelDebug
	if e := auth.AsError(err); e == nil || e.Status >= 500 {
		level = slog.LevelWarn
	}
	log.Log(r.Context(), level, "mcp.auth.refused", "path", r.URL.Path, "error", err)
	rs.WriteError(w, r, err)
}

// unauthorized refuses a request no static token accepts. A bearer token
// that was sent and refused is invalid_token (RFC 6750 §3.1), which tells
// a client to get another rather than retry; a request without one gets
// the bare challenge.
func unauthorized(w http.ResponseWriter, r *http.Request) {
	challenge := `Bearer realm="bub-mcp"`
	if _, ok := bearer(r); ok {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	http.Error(w, "unauthorized: a valid bearer token is required", http.StatusUnauthorized)
}

// bearer is the token of r's "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}

// authenticate finds the token a request carries. Hashes are compared in
// constant time.
func authenticate(r *http.Request, tokens []Token) (Token, bool) {
	tok, ok := bearer(r)
	if !ok {
		return Token{}, false
	}
	sum := sha256.Sum256([]byte(tok))
	got := []byte(hex.EncodeToString(sum[:]))
	for _, t := range tokens {
		if subtle.ConstantTimeCompare(got, []byte(strings.ToLower(t.SHA256))) == 1 {
			return t, true
		}
	}
	return Token{}, false
}
