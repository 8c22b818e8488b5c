package asfront

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// serveRevoke is the revocation endpoint (RFC 7009). A refresh token the
// front issued revokes its whole grant (every refresh token of its
// family), so a client's logout ends the grant here and not only in the
// client's own storage.
//
// Access tokens are not revocable: they are self-contained JWTs that the
// resource server checks by signature alone, and they live
// Options.AccessTokenTTL (10 min by default). Like an unknown token, one
// is answered 200, as RFC 7009 §2.2 asks (the client cannot act on a
// refusal, and the answer tells an attacker nothing); token_type_hint is
// therefore not needed and is ignored (§2.1 allows it).
func (f *Front) serveRevoke(w http.ResponseWriter, r *http.Request) {
	form, ok := f.publicClientForm(w, r)
	if !ok {
		return
	}
	token := form.Get("token")
	if token == "" {
		f.refuse(w, r, oerr(400, "invalid_request", "token is required", nil))
		return
	}
	rec, err := f.opts.Store.Get(r.Context(), KindRefresh, hash(token))
	switch {
	case errors.Is(err, ErrNotFound):
		// An access token or an unknown (or long purged) one.
		w.WriteHeader(http.StatusOK)
		return
	case err != nil:
		f.refuse(w, r, oerr(503, "temporarily_unavailable", "the store is unavailable", err))
		return
	}
	var g grantData
	if err := json.Unmarshal(rec.Data, &g); err != nil {
		f.refuse(w, r, oerr(500, "server_error", "a stored refresh token is unreadable", err))
		return
	}
	// RFC 7009 §2.1: only the client the token was issued to may revoke
	// it, or anyone who saw a token could end another client's grant.
	if clientID := form.Get("client_id"); clientID != g.ClientID {
		f.refuse(w, r, oerr(400, "invalid_grant", "the token was issued to another client", fmt.Errorf("client_id %q", clientID)))
		return
	}
	if rec.Family == "" {
		// Every refresh token is stored with its grant's family; revoking
		// the empty family would touch records of no grant.
		f.refuse(w, r, oerr(500, "server_error", "a stored refresh token has no grant", nil))
		return
	}
	if err := f.opts.Store.RevokeFamily(r.Context(), rec.Family); err != nil {
		f.refuse(w, r, oerr(503, "temporarily_unavailable", "the store is unavailable", err))
		return
	}
	f.opts.Logger.Info("oauth.proxy.revoked", "client_id", g.ClientID, "sub", g.Session.Subject)
	w.WriteHeader(http.StatusOK)
}
