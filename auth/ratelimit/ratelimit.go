// Package ratelimit limits calls per principal, profile and tool:
// `[[limits]]` rules (calls per minute, burst) over token buckets keyed by
// (rule, principal). The buckets live behind the Limiter interface: Memory
// here (per replica); a shared store (PostgreSQL) can implement the same
// interface so replicas share limits.
//
// A rule without a tool limits every request of a principal (the HTTP
// middleware answers 429 with Retry-After); a rule with a tool glob limits
// tools/call (the server turns a refusal into a tool error the model can
// act on: Decision.Message, Decision.RetryAfterSeconds).
package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"path"
	"strconv"
	"time"
)

// Rate is a token bucket: PerMinute tokens are added per minute, up to
// Burst held.
type Rate struct {
	PerMinute float64
	// Burst is the bucket's size: how many calls may come at once. 0
	// means PerMinute rounded up (at least 1).
	Burst int
}

// BurstSize is the bucket's size: Burst, or PerMinute rounded up (at
// least 1) when Burst is 0.
func (r Rate) BurstSize() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, int(math.Ceil(r.PerMinute)))
}

// Decision is a Limiter's answer.
type Decision struct {
	// Allowed is true when the call may go ahead.
	Allowed bool
	// RetryAfter is how long until a token is back, when refused.
	RetryAfter time.Duration
	// Remaining is how many calls may follow at once, when allowed; -1
	// from Limits.Check when no rule applied.
	Remaining int
	// Rule names the rule that refused ("" when allowed).
	Rule string
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1:
// the value of Retry-After and of `retryAfterSeconds` in a tool error's
// _meta.
func (d Decision) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(d.RetryAfter.Seconds())))
}

// Message is the text of the tool error for a refused call, for the model:
// which limit, and when to retry.
func (d Decision) Message() string {
	return fmt.Sprintf("limit %s: retry in %d s", d.Rule, d.RetryAfterSeconds())
}

// Limiter takes tokens from buckets. Take must be safe for concurrent use
// and honour ctx; a shared implementation makes Take atomic across
// replicas.
type Limiter interface {
	// Take takes one token from key's bucket of shape rate, or says how
	// long until one is back.
	Take(ctx context.Context, key string, rate Rate) (Decision, error)
}

// Rule is one `[[limits]]` table. Empty globs match anything.
type Rule struct {
	// Name appears in refusals; "" means "limits[<index>]".
	Name string
	// Principal is a glob (path.Match) over the principal's ID
	// (issuer#subject) or its name, e.g. "*@example.com".
	Principal string
	// Profile is a glob over the profile name.
	Profile string
	// Tool is a glob over the tool name ("fs.*"); "" makes the rule limit
	// requests rather than tool calls.
	Tool string
	// PerMinute calls, with Burst at once (see Rate).
	PerMinute float64
	Burst     int
}

// Subject is what a check is about.
type Subject struct {
	// Principal is the principal's ID (auth.Principal.ID), Name its name.
	Principal, Name string
	Profile         string
	// Tool is the tool being called, "" for a request-level check.
	Tool string
}

// Options configure New.
type Options struct {
	Rules []Rule
	// Limiter holds the buckets; nil means NewMemory(nil).
	Limiter Limiter
	// Logger receives limiter failures (Middleware lets the request
	// through then); nil means slog.Default().
	Logger *slog.Logger
}

// Limits applies rules through a Limiter.
type Limits struct {
	rules  []Rule
	lim    Limiter
	logger *slog.Logger
}

// New checks the rules and returns Limits.
func New(o Options) (*Limits, error) {
	l := &Limits{lim: o.Limiter, logger: o.Logger}
	if l.lim == nil {
		l.lim = NewMemory(nil)
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	for i, r := range o.Rules {
		where := fmt.Sprintf("limits[%d]", i)
		if r.Name == "" {
			r.Name = where
		}
		if r.PerMinute <= 0 || math.IsInf(r.PerMinute, 0) || math.IsNaN(r.PerMinute) {
			return nil, fmt.Errorf("ratelimit: %s: per_minute must be a positive number", where)
		}
		if r.Burst < 0 {
			return nil, fmt.Errorf("ratelimit: %s: burst must not be negative", where)
		}
		for key, g := range map[string]string{"principal": r.Principal, "profile": r.Profile, "tool": r.Tool} {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("ratelimit: %s: %s %q: %w", where, key, g, err)
			}
		}
		l.rules = append(l.rules, r)
	}
	return l, nil
}

func glob(pattern string, names ...string) bool {
	if pattern == "" {
		return true
	}
	for _, n := range names {
		if ok, _ := path.Match(pattern, n); ok {
			return true
		}
	}
	return false
}

func (r Rule) matches(s Subject) bool {
	if (r.Tool == "") != (s.Tool == "") {
		return false
	}
	return glob(r.Principal, s.Principal, s.Name) && glob(r.Profile, s.Profile) && glob(r.Tool, s.Tool)
}

// Check takes a token from every rule that matches s, in order, and stops
// at the first refusal (tokens already taken from earlier rules stay
// taken). With no matching rule the call is allowed.
func (l *Limits) Check(ctx context.Context, s Subject) (Decision, error) {
	out := Decision{Allowed: true, Remaining: -1}
	for i, r := range l.rules {
		if !r.matches(s) {
			continue
		}
		d, err := l.lim.Take(ctx, strconv.Itoa(i)+"\x00"+s.Principal, Rate{PerMinute: r.PerMinute, Burst: r.Burst})
		if err != nil {
			return Decision{}, fmt.Errorf("ratelimit: %s: %w", r.Name, err)
		}
		if !d.Allowed {
			d.Rule = r.Name
			return d, nil
		}
		if out.Remaining < 0 || d.Remaining < out.Remaining {
			out.Remaining = d.Remaining
		}
	}
	return out, nil
}

// Middleware applies the request-level rules (those without a tool) to
// every request: over the limit it answers 429 with Retry-After. subject
// says who is asking (the transport knows: an explicit function, not a
// context value). If the Limiter fails, the
// request goes through and the failure is logged: a broken limiter store
// must not take the server down.
func (l *Limits) Middleware(subject func(*http.Request) Subject, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := subject(r)
		s.Tool = ""
		d, err := l.Check(r.Context(), s)
		if err != nil {
			l.logger.Warn("rate limiter failed; request let through", "err", err)
		} else if !d.Allowed {
			w.Header().Set("Retry-After", strconv.Itoa(d.RetryAfterSeconds()))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "rate_limited", "error_description": d.Message()})
			return
		}
		next.ServeHTTP(w, r)
	})
}
