package host

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// The audit trail's entries are encoded here directly, with the keys in
// the order encoding/json gives a map's (sorted), so the lines are the
// ones the map-based encoding wrote; building maps only to encode them
// was most of an audited call's cost.

// auditMeta encodes a call's meta: run id, transport, profile, and the
// principal and client when known.
func auditMeta(dst []byte, conn *providers.Connection, runID string) []byte {
	dst = append(dst, '{')
	if conn.ClientName != "" {
		dst = append(dst, `"client":`...)
		dst = sessions.AppendString(dst, conn.ClientName+"/"+conn.ClientVersion)
		dst = append(dst, ',')
	}
	if conn.Principal != "" {
		dst = append(dst, `"principal":`...)
		dst = sessions.AppendString(dst, conn.Principal)
		dst = append(dst, ',')
	}
	dst = append(dst, `"profile":`...)
	dst = sessions.AppendString(dst, conn.Profile)
	dst = append(dst, `,"run_id":`...)
	dst = sessions.AppendString(dst, runID)
	dst = append(dst, `,"transport":`...)
	dst = sessions.AppendString(dst, conn.Transport)
	return append(dst, '}')
}

// auditCall encodes a tool_call payload: one function call with the
// arguments as given (compacted; arguments that are not JSON are kept as
// a string rather than lost).
func auditCall(dst []byte, callID, name string, args json.RawMessage) []byte {
	dst = append(dst, `{"calls":[{"function":{"arguments":`...)
	switch {
	case len(bytes.TrimSpace(args)) == 0:
		dst = append(dst, "{}"...)
	default:
		buf := bytes.NewBuffer(dst)
		if err := json.Compact(buf, args); err != nil {
			dst = sessions.AppendString(dst, string(args))
		} else {
			dst = buf.Bytes()
		}
	}
	dst = append(dst, `,"name":`...)
	dst = sessions.AppendString(dst, name)
	dst = append(dst, `},"id":`...)
	dst = sessions.AppendString(dst, callID)
	return append(dst, `,"type":"function"}]}`...)
}

// auditResult encodes a tool_result payload.
func auditResult(dst []byte, callID string, res *registry.Result) []byte {
	dst = append(dst, `{"results":[{"call_id":`...)
	dst = sessions.AppendString(dst, callID)
	dst = append(dst, `,"elapsed_ms":`...)
	dst = strconv.AppendInt(dst, res.Duration.Milliseconds(), 10)
	dst = append(dst, `,"output":`...)
	dst = sessions.AppendString(dst, res.Output())
	if res.Err != nil {
		return append(dst, `,"status":"error"}]}`...)
	}
	return append(dst, `,"status":"ok"}]}`...)
}
