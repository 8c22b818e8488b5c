package mcpserver

import (
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
)

// StateMetaKey is the tools/call _meta key under which an MCP client
// passes request-scoped state (Bub's state=..., such as a request_id):
// the tool sees it as ToolContext.State; nothing persists it.
const StateMetaKey = "bub/state"

// callerState returns the request's _meta state; a value that is not a
// JSON object is refused.
func callerState(req mcp.CallToolRequest) (map[string]any, error) {
	if req.Params.Meta == nil {
		return nil, nil
	}
	v, ok := req.Params.Meta.AdditionalFields[StateMetaKey]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New(`_meta "` + StateMetaKey + `" must be a JSON object`)
	}
	return m, nil
}
