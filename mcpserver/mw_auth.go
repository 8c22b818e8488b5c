package mcpserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// staticTokens makes a valid bearer token mandatory when tokens are
// configured, and names the caller (principal and profile) after it. It
// runs after callerState. No tokens: no link.
func staticTokens(tokens []Token) Middleware {
	if len(tokens) == 0 {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, ok := authenticate(r, tokens)
			if !ok {
				unauthorized(w)
				return
			}
			caller := &httpRequestFrom(r.Context()).caller
			caller.Principal, caller.Profile = tok.Name, tok.Profile
			next.ServeHTTP(w, r)
		})
	}
}

// requireToken guards an endpoint that is not MCP (/metrics) with the
// same tokens, when there are any.
func requireToken(tokens []Token) Middleware {
	if len(tokens) == 0 {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := authenticate(r, tokens); !ok {
				unauthorized(w)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="bub-mcp"`)
	http.Error(w, "unauthorized: a valid bearer token is required", http.StatusUnauthorized)
}

// authenticate finds the token a request carries. Hashes are compared in
// constant time.
func authenticate(r *http.Request, tokens []Token) (Token, bool) {
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return Token{}, false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	got := []byte(hex.EncodeToString(sum[:]))
	for _, t := range tokens {
		if subtle.ConstantTimeCompare(got, []byte(strings.ToLower(t.SHA256))) == 1 {
			return t, true
		}
	}
	return Token{}, false
}
