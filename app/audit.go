package app

import (
	"bytes"
	"encoding/json"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// The audit trail's entries are Bub's tool_call/tool_result pairs. Their
// fields are declared in the order encoding/json gives a map's keys
// (sorted), so the lines match what earlier versions wrote.

type auditMetaEntry struct {
	Client    string `json:"client,omitempty"`
	Principal string `json:"principal,omitempty"`
	Profile   string `json:"profile"`
	RunID     string `json:"run_id"`
	Transport string `json:"transport"`
}

type auditFunction struct {
	Arguments json.RawMessage `json:"arguments"`
	Name      string          `json:"name"`
}

type auditCallEntry struct {
	Function auditFunction `json:"function"`
	ID       string        `json:"id"`
	Type     string        `json:"type"`
}

type auditResultEntry struct {
	CallID    string `json:"call_id"`
	ElapsedMS int64  `json:"elapsed_ms"`
	Output    string `json:"output"`
	Status    string `json:"status"`
}

// encode writes v as one tape payload: HTML escaping off, as tape lines
// are, and no trailing newline.
func encode(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("{}") // only unencodable Go values fail; ours are strings
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// auditMeta encodes a call's meta: run id, transport, profile, and the
// principal and client when known.
func auditMeta(conn *providers.Connection, runID string) []byte {
	m := auditMetaEntry{Principal: conn.Principal, Profile: conn.Profile, RunID: runID, Transport: conn.Transport}
	if conn.ClientName != "" {
		m.Client = conn.ClientName + "/" + conn.ClientVersion
	}
	return encode(m)
}

// auditCall encodes a tool_call payload: one function call with the
// arguments as given (arguments that are not JSON are kept as a string
// rather than lost).
func auditCall(callID, name string, args json.RawMessage) []byte {
	switch {
	case len(bytes.TrimSpace(args)) == 0:
		args = json.RawMessage("{}")
	case !json.Valid(args):
		args, _ = json.Marshal(string(args))
	}
	return encode(struct {
		Calls []auditCallEntry `json:"calls"`
	}{[]auditCallEntry{{Function: auditFunction{Arguments: args, Name: name}, ID: callID, Type: "function"}}})
}

// auditResult encodes a tool_result payload.
func auditResult(callID string, res *registry.Result) []byte {
	status := "ok"
	if res.Err != nil {
		status = "error"
	}
	return encode(struct {
		Results []auditResultEntry `json:"results"`
	}{[]auditResultEntry{{CallID: callID, ElapsedMS: res.Duration.Milliseconds(), Output: res.Output(), Status: status}}})
}
