// Package auth answers "who is calling" for bub-mcp's HTTP transport: it is
// an OAuth 2.1 resource server (RFC 9728 metadata, RFC 6750 challenges,
// JWT access tokens checked against the issuer's JWKS, RFC 8707 audience,
// RFC 7662 introspection for opaque tokens) and maps the token's claims to a
// Principal and the profiles it may use.
//
// The package is transport-independent: it offers net/http middleware and
// handlers that a server mounts, and it knows nothing about MCP or tools.
// The authenticated Principal travels in the request's context (request
// data, like the net/http request itself, not a dependency); the server puts
// it into providers.Connection and the audit record.
//
// A client's bearer token is only ever checked here; nothing in this package
// forwards it anywhere (no confused deputy).
package auth
