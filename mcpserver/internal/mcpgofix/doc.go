// Package mcpgofix holds every repair bub-mcp makes of a defect in
// mark3labs/mcp-go v1.2.1, one file per defect, in the manner of
// net/http's AllowQuerySemicolons: each file is headed by
//
//   - Defect: what mcp-go does wrong, observed on v1.2.1;
//   - Upstream: the mark3labs/mcp-go issue or pull request, or "no
//     upstream issue as of 2026-12" with the behaviour to report;
//   - Test: the test in mcpserver that fails without the repair;
//   - Delete when: the condition under which the file goes.
//
// The MCP edge (mcpserver and its transports) calls these as small named
// functions and types; no repair is a branch inside an unrelated function.
// The package knows mcp-go, net/http and encoding/json, nothing of
// bub-mcp.
package mcpgofix
