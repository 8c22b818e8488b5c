// Package auth answers "who is calling" for bub-mcp's HTTP transport: it is
// an OAuth 2.1 resource server (RFC 9728 metadata, RFC 6750 challenges,
// JWT access tokens checked against the issuer's JWKS, RFC 8707 audience,
// RFC 7662 introspection for opaque tokens) and maps the token's claims to a
// Principal and the profiles it may use.
//
// The package is transport-independent: it offers the metadata handler a
// server mounts and Authenticate and WriteError for the server's own
// request handling, and it knows nothing about MCP or tools. Authenticate
// returns the Principal; the server names the caller after it (the
// connection, the audit record), with no context value in between.
//
// A client's bearer token is only ever checked here; nothing in this package
// forwards it anywhere (no confused deputy).
package auth
