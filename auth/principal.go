package auth

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Principal is who is calling: an account at an issuer, with what the token
// grants. The server copies it into providers.Connection, the audit record
// and telemetry.
type Principal struct {
	// Issuer is the token's `iss`, exactly as the issuer wrote it.
	Issuer string
	// Subject is the token's `sub`: stable and unique within Issuer.
	Subject string
	// Name is a display name from the configured claim (Options.NameClaim),
	// falling back to Subject. For people, not for access decisions.
	Name string
	// ClientID is the OAuth client the token was issued to (`client_id`,
	// `azp`), when the token says.
	ClientID string
	// Profiles are the profiles the rules allow, in rule order without
	// duplicates. Empty when no rules are configured.
	Profiles []string
	// Profile is the profile this request runs in: the requested one (a
	// path like /mcp/p/<profile>), else the first of Profiles, else "" (the
	// server's default profile).
	Profile string
	// Scopes are the token's scopes (`scope`, or `scp`).
	Scopes []string
	// Expiry is when the token stops being valid; zero when unknown.
	Expiry time.Time
}

// ID is the principal's unique key: issuer and subject joined by "#" (an
// issuer URL has no fragment, RFC 8414 §2, so the join is unambiguous).
// Rate limits and per-principal state key on it.
func (p *Principal) ID() string { return p.Issuer + "#" + p.Subject }

// HasScope reports whether the token grants scope s.
func (p *Principal) HasScope(s string) bool { return slices.Contains(p.Scopes, s) }

// Rule maps a claim value to a profile: `[[auth.oauth.rules]] claim =
// "groups", value = "eng", profile = "dev"`. Rules are tried in order; the
// first that matches gives the principal's default profile, and every rule
// that matches adds its profile to the ones the principal may ask for.
type Rule struct {
	// Claim is the token claim to look at: a top-level name, or a dotted
	// path into nested objects ("realm_access.roles"). "scope" matches the
	// token's scopes whether they came as `scope` or `scp`.
	Claim string
	// Value must equal the claim's value, or one element when the claim is
	// an array (groups, roles). For the claim "email", a value starting
	// with "@" matches the domain ("@example.com"), and only when the token
	// does not say `email_verified: false`.
	Value string
	// Profile is the profile the rule allows.
	Profile string
}

func (r Rule) validate(i int) error {
	switch {
	case r.Claim == "":
		return fmt.Errorf("auth: rules[%d]: claim is empty", i)
	case r.Value == "":
		return fmt.Errorf("auth: rules[%d]: value is empty", i)
	case r.Profile == "":
		return fmt.Errorf("auth: rules[%d]: profile is empty", i)
	case r.Claim == "email" && strings.HasPrefix(r.Value, "@") && len(r.Value) == 1:
		return fmt.Errorf("auth: rules[%d]: value %q names no email domain", i, r.Value)
	}
	return nil
}

// matches reports whether the rule matches claims; scopes are the token's
// parsed scopes.
func (r Rule) matches(claims map[string]any, scopes []string) bool {
	if r.Claim == "scope" || r.Claim == "scp" {
		return slices.Contains(scopes, r.Value)
	}
	v, ok := lookupClaim(claims, r.Claim)
	if !ok {
		return false
	}
	if r.Claim == "email" && strings.HasPrefix(r.Value, "@") {
		if verified, ok := claims["email_verified"].(bool); ok && !verified {
			return false
		}
		s, ok := v.(string)
		at := strings.LastIndexByte(s, '@')
		return ok && at > 0 && strings.EqualFold(s[at:], r.Value)
	}
	switch v := v.(type) {
	case string:
		return v == r.Value
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && s == r.Value {
				return true
			}
		}
	case bool:
		return fmt.Sprint(v) == r.Value
	}
	return false
}

// lookupClaim finds name in claims: the top-level key first (claim names may
// contain dots, e.g. URLs), then a dotted path into nested objects.
func lookupClaim(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// scopesOf reads the token's scopes: `scope` as a space-separated string
// (RFC 8693 §4.2, RFC 9068), or `scp` as an array or string (Entra, Okta,
// Hydra).
func scopesOf(claims map[string]any) []string {
	var out []string
	add := func(s string) {
		for f := range strings.FieldsSeq(s) {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	for _, k := range []string{"scope", "scp"} {
		switch v := claims[k].(type) {
		case string:
			add(v)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					add(s)
				}
			}
		}
	}
	return out
}

// profilesFor returns the profiles the rules allow, in rule order, without
// duplicates.
func profilesFor(rules []Rule, claims map[string]any, scopes []string) []string {
	var out []string
	for _, r := range rules {
		if !slices.Contains(out, r.Profile) && r.matches(claims, scopes) {
			out = append(out, r.Profile)
		}
	}
	return out
}

// choose picks the request's profile: requested ("" for the plain endpoint)
// must be among allowed. With no rules configured only the default profile
// (requested == "") is served.
func choose(hasRules bool, allowed []string, requested string) (string, *Error) {
	deny := &Error{Status: 403, Code: CodeAccessDenied,
		Description: "this account is not allowed on this endpoint"}
	switch {
	case !hasRules && requested == "":
		return "", nil
	case !hasRules:
		deny.Err = fmt.Errorf("profile %q requested but no rules are configured", requested)
		return "", deny
	case len(allowed) == 0:
		deny.Err = fmt.Errorf("no rule matches the token's claims")
		return "", deny
	case requested == "":
		return allowed[0], nil
	case slices.Contains(allowed, requested):
		return requested, nil
	default:
		deny.Err = fmt.Errorf("no rule allows profile %q", requested)
		return "", deny
	}
}
