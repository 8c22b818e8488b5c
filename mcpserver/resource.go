package mcpserver

import (
	"context"

	"github.com/bubbuild/bub-mcp/providers"
	"github.com/mark3labs/mcp-go/server"
)

// ConnectionFromContext returns the caller of the request in ctx as its
// transport identified it (transport, profile, principal, client), not yet
// resolved: an Extension's handler resolves it through its Backend to
// reach the caller's session and View. Outside a request it returns an
// empty Connection.
func ConnectionFromContext(ctx context.Context) *providers.Connection {
	var c providers.Connection
	if r := requestFrom(ctx); r != nil {
		c = r.caller
	}
	if sess, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		info := sess.GetClientInfo()
		c.ClientName, c.ClientVersion = info.Name, info.Version
	}
	return &c
}

// TextResource is an Extension offering one text resource whose content
// depends on the caller: read gets the caller's unresolved Connection
// (see ConnectionFromContext). An error from read fails resources/read,
// and resources/list leaves the resource out for that caller.
func TextResource(uri, name, description, mimeType string, read func(ctx context.Context, conn *providers.Connection) (string, error)) Extension {
	readable := func(ctx context.Context, conn *providers.Connection) bool {
		_, err := read(ctx, conn)
		return err == nil
	}
	return Extension{
		Readable: map[string]func(context.Context, *providers.Connection) bool{uri: readable},
		Resources: []Resource{{
			ResourceInfo: ResourceInfo{URI: uri, Name: name, Description: description, MIMEType: mimeType},
			Read: func(ctx context.Context, conn *providers.Connection, _ ReadRequest) ([]ResourceContents, error) {
				text, err := read(ctx, conn)
				if err != nil {
					return nil, err
				}
				return []ResourceContents{{URI: uri, MIMEType: mimeType, Text: text}}, nil
			},
		}},
	}
}
