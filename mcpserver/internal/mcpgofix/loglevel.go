package mcpgofix

// Defect: mcp-go v1.2.1's SendLogMessageToClient reports success for a
// message its level filter dropped, so a caller cannot tell whether a
// notification will reach the stream (and must not wait for it; see
// dropnotify.go).
// Upstream: no upstream issue as of 2026-12; reported behaviour: with the
// session's level at "error", SendLogMessageToClient(ctx, info message)
// returns nil and sends nothing.
// Test: none fails outright without it: a call that logs below the
// client's level would hold its result for notificationWait (1 s) waiting
// for a notification that never comes (a latency regression only).
// Delete when: SendLogMessageToClient reports a filtered message (an
// error value or a bool).

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// LogWanted mirrors mcp-go's filter in SendLogMessageToClient: whether a
// message of lvl is sent to the client of ctx's request.
func LogWanted(ctx context.Context, lvl mcp.LoggingLevel) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.LogLevel != "" && lvl.ShouldSendTo(info.LogLevel)
	}
	if sl, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging); ok {
		return lvl.ShouldSendTo(sl.GetLogLevel())
	}
	return false
}
