package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/client/transport"
)

// This file tells an upstream's authorization server that bub-mcp is done
// with a principal's token set (RFC 7009 revocation), so that a logout
// ends the grant there and not only in bub-mcp's store: a copy of the
// refresh token (a leaked backup, another replica's memory) stops working.

// LogoutResult is what Logout did for one principal whose token set it
// deleted.
type LogoutResult struct {
	// Principal is whose token set was deleted.
	Principal string
	// Revoked reports that the upstream's authorization server accepted
	// the revocation of the set's tokens.
	Revoked bool
	// NotRevoked says, when Revoked is false, why the set was deleted only
	// in bub-mcp's store: no revocation endpoint, the server unreachable
	// or refusing. It never holds a token.
	NotRevoked string
}

// maxRevokeErrorBytes bounds the error body of a refused revocation read.
const maxRevokeErrorBytes = 4 << 10

// revoker revokes token sets at u's authorization server; its metadata
// is discovered on first use, as a refresh discovers it.
type revoker struct {
	u    *upstream
	md   *transport.AuthServerMetadata
	err  error
	done bool
}

// metadata discovers the authorization server's metadata once.
func (r *revoker) metadata(ctx context.Context) (*transport.AuthServerMetadata, error) {
	if r.done {
		return r.md, r.err
	}
	r.done = true
	u := r.u
	ctx, cancel := context.WithTimeout(ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	r.md, r.err = u.oauthHandler(ctx, u.oauthConfig("")).GetServerMetadata(ctx)
	if r.err != nil {
		r.err = hideURL(fmt.Errorf("authorization server metadata: %w", r.err), u.cfg.URL)
	}
	return r.md, r.err
}

// revoke revokes set's refresh token (which, at most servers, ends the
// grant and its access tokens: RFC 7009 §2.1), then its access token, for
// the servers that do not. Each request is bounded by start_timeout.
func (r *revoker) revoke(ctx context.Context, set *tokenSet) error {
	set = r.u.withClient(set)
	md, err := r.metadata(ctx)
	if err != nil {
		return err
	}
	if md.RevocationEndpoint == "" {
		return errors.New("the authorization server offers no revocation endpoint")
	}
	for _, t := range []struct{ token, hint string }{
		{set.Token.RefreshToken, "refresh_token"},
		{set.Token.AccessToken, "access_token"},
	} {
		if t.token == "" {
			continue
		}
		if err := r.post(ctx, md, set, t.token, t.hint); err != nil {
			return fmt.Errorf("revoking the %s: %w", strings.ReplaceAll(t.hint, "_", " "), err)
		}
	}
	return nil
}

// post sends one revocation request, with set's client authenticated as
// at the token endpoint.
func (r *revoker) post(ctx context.Context, md *transport.AuthServerMetadata, set *tokenSet, token, hint string) error {
	u := r.u
	ctx, cancel := context.WithTimeout(ctx, u.cfg.StartTimeout.Duration)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	basic := false
	switch method := revocationAuthMethod(md, set); method {
	case "client_secret_basic":
		basic = true
	case "client_secret_post":
		form.Set("client_id", set.ClientID)
		form.Set("client_secret", set.ClientSecret)
	default:
		form.Set("client_id", set.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, md.RevocationEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return errors.New("the revocation endpoint is not a URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		// RFC 6749 §2.3.1: form-encoded before they are the Basic user
		// name and password.
		req.SetBasicAuth(url.QueryEscape(set.ClientID), url.QueryEscape(set.ClientSecret))
	}
	res, err := u.httpClient().Do(req)
	if err != nil {
		return hideURL(err, u.cfg.URL)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		return nil
	}
	// Only the error code is repeated: a description is the server's
	// free text, and the caller's output and the log keep it.
	var e struct {
		Code string `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(res.Body, maxRevokeErrorBytes)).Decode(&e)
	if e.Code != "" && !validErrorCode(e.Code) {
		e.Code = ""
	}
	if e.Code == "" {
		return fmt.Errorf("the authorization server answered %s", res.Status)
	}
	return fmt.Errorf("the authorization server answered %s (%s)", res.Status, e.Code)
}

// revocationAuthMethod is how set's client authenticates at the
// revocation endpoint: as it registered or was configured, else HTTP
// Basic when that is the only secret-based method the server lists (as
// mcp-go picks at the token endpoint), else in the form.
func revocationAuthMethod(md *transport.AuthServerMetadata, set *tokenSet) string {
	if set.ClientSecret == "" {
		return "none"
	}
	switch set.AuthMethod {
	case "client_secret_basic", "client_secret_post", "none":
		return set.AuthMethod
	}
	supported := md.RevocationEndpointAuthMethodsSupported
	if len(supported) == 0 {
		supported = md.TokenEndpointAuthMethodsSupported
	}
	if slices.Contains(supported, "client_secret_basic") && !slices.Contains(supported, "client_secret_post") {
		return "client_secret_basic"
	}
	return "client_secret_post"
}

// validErrorCode reports whether s is an RFC 6749 error code (printable
// ASCII without quote or backslash), short enough to repeat.
func validErrorCode(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
