// Package registry is Bub's tool system in Go: the Tool (typed
// constructors that reflect its schemas once), the Registry of tools and
// hooks, the ToolContext a handler gets (its session, environment, the
// caller's other tools, the client), and the Executor that runs a call:
// validation, before hooks, the handler, rendering, after hooks, with
// Bub's error kinds. It knows nothing of MCP, transports or Python.
package registry
