package registry

import (
	"encoding/json"
	"errors"
)

// Kind classifies a tool failure the way Bub's BubError does, so that models,
// hooks and clients can tell a bad argument from a broken tool from a
// temporary outage without parsing messages.
type Kind string

// The error kinds a tool call can end with.
const (
	KindInvalidInput Kind = "invalid_input"
	KindConfig       Kind = "config"
	KindProvider     Kind = "provider"
	KindTool         Kind = "tool"
	KindTemporary    Kind = "temporary"
	KindNotFound     Kind = "not_found"
	KindUnknown      Kind = "unknown"
)

// Error is the value a failed tool call carries. It is data, not control
// flow: the executor hands it back to the model (as JSON) or to an MCP client
// (as an isError result) and the turn goes on.
type Error struct {
	Kind    Kind
	Message string
	// Details carries machine-readable context (validator output, the
	// handler's error, captured output). Nil when there is none.
	Details map[string]any
	// Meta, when set, goes into the MCP result's _meta, for the client
	// or gateway rather than the model: e.g. retryAfterSeconds of a rate
	// limit. The model sees Message and Details.
	Meta map[string]any
	// Cause is the underlying Go error, if any; it is reachable with
	// errors.Is/As but never serialized.
	Cause error
}

// NewError returns an *Error of the given kind; a convenience for handlers
// that want a kind other than the executor's default "tool".
func NewError(kind Kind, message string, details map[string]any) *Error {
	return &Error{Kind: kind, Message: message, Details: details}
}

// Error returns "[kind] message", Bub's str(BubError).
func (e *Error) Error() string { return "[" + string(e.Kind) + "] " + e.Message }

// String is the same as Error.
func (e *Error) String() string { return e.Error() }

// Unwrap exposes the cause to errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Cause }

// MarshalJSON encodes {kind, message[, details]}, Bub's as_dict().
func (e *Error) MarshalJSON() ([]byte, error) {
	type wire struct {
		Kind    Kind           `json:"kind"`
		Message string         `json:"message"`
		Details map[string]any `json:"details,omitempty"`
	}
	return marshalNoEscape(wire{e.Kind, e.Message, e.Details})
}

// JSON is MarshalJSON as a string; it never fails for details made of JSON
// values, and falls back to the plain message otherwise.
func (e *Error) JSON() string {
	b, err := e.MarshalJSON()
	if err != nil {
		return e.Error()
	}
	return string(b)
}

// AsError converts any error into an *Error, keeping an *Error found in the
// chain and classifying everything else with the fallback kind.
func AsError(err error, fallback Kind) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: fallback, Message: err.Error(), Cause: err}
}

// marshalNoEscape encodes v as compact JSON without HTML escaping, so that
// "<" and "&" reach the model as themselves (Python's json.dumps behaviour).
func marshalNoEscape(v any) ([]byte, error) {
	var buf jsonBuffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.b
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	return b, nil
}

// jsonBuffer is a minimal io.Writer; bytes.Buffer would do but costs an
// extra allocation for its struct on every render.
type jsonBuffer struct{ b []byte }

func (w *jsonBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
