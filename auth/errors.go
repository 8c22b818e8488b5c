package auth

import (
	"errors"
	"fmt"
)

// Error codes of RFC 6750 §3.1 that a refusal may carry in its
// WWW-Authenticate challenge.
const (
	// CodeInvalidToken: the token is missing its signature, expired, for
	// another resource or issuer, or otherwise unusable; the client should
	// get a new one.
	CodeInvalidToken = "invalid_token"
	// CodeInsufficientScope: the token is valid but lacks a required scope;
	// the client may ask for a token with more scopes (step-up).
	CodeInsufficientScope = "insufficient_scope"
	// CodeAccessDenied: the token is valid but no rule lets this principal
	// use the requested profile. Not an RFC 6750 code: it goes in the body
	// only, since a new token for the same account would not help.
	CodeAccessDenied = "access_denied"
)

// Error is a refusal: the HTTP status, the RFC 6750 error code and a
// description safe to show to the client. The description never carries a
// token, a claim value or a rule; the wrapped error (for logs) may be more
// precise but still carries no token.
type Error struct {
	// Status is the HTTP status: 401, 403 or 503.
	Status int
	// Code is one of the Code* constants, or "" for a request without a
	// token (RFC 6750 §3.1: no error code then).
	Code string
	// Description is a short, non-secret reason for the client.
	Description string
	// Err is the underlying cause, for logs; may be nil.
	Err error
}

func (e *Error) Error() string {
	s := "auth: " + e.Description
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// AsError returns the *Error in err's chain, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

func invalidToken(desc string, err error) *Error {
	return &Error{Status: 401, Code: CodeInvalidToken, Description: desc, Err: err}
}

func errorf(status int, code, desc string, format string, args ...any) *Error {
	var err error
	if format != "" {
		err = fmt.Errorf(format, args...)
	}
	return &Error{Status: status, Code: code, Description: desc, Err: err}
}
