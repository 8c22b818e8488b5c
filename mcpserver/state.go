package mcpserver

import (
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
)

// StateMetaKey is the tools/call _meta key under which an MCP client
// passes request-scoped state (Bub's state=..., such as a request_id):
// the tool sees it as ToolContext.State; nothing persists it. Its
// "code_mode" (app.StateCodeMode) switches code mode for the request,
// on tools/list too, so a client can list the code-mode View.
const StateMetaKey = "bub/state"

// callerState returns the request's _meta state; a value that is not a
// JSON object is refused.
func callerState(req mcp.CallToolRequest) (map[string]any, error) {
	return metaState(req.Params.Meta)
}

// metaState returns the state in a request's _meta; a value that is not
// a JSON object is refused.
func metaState(meta *mcp.Meta) (map[string]any, error) {
	if meta == nil {
		return nil, nil
	}
	v, ok := meta.AdditionalFields[StateMetaKey]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New(`_meta "` + StateMetaKey + `" must be a JSON object`)
	}
	return m, nil
}
