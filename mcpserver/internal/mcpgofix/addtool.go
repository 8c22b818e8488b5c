package mcpgofix

// Defect: mcp-go v1.2.1's MCPServer.AddTools panics on a tool definition
// it refuses (an upstream server's malformed x-mcp-header annotations),
// taking the process down with it instead of returning an error.
// Upstream: no upstream issue as of 2026-12; reported behaviour: AddTools
// with a tool whose inputSchema property carries an invalid
// "x-mcp-header" panics in the header-annotation validation.
// Test: TestAddToolRefusedDefinition (mcpgofix).
// Delete when: AddTools returns an error for a definition it refuses.

import (
	"fmt"

	"github.com/mark3labs/mcp-go/server"
)

// AddTool registers tools with s as one batch (one refused definition
// refuses them all, as mcp-go stages the batch), turning mcp-go's panic
// on a refused definition into an error.
func AddTool(s *server.MCPServer, tools ...server.ServerTool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("mcp-go refused the definition: %v", p)
		}
	}()
	s.AddTools(tools...)
	return nil
}
