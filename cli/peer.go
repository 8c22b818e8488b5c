package cli

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/bubbuild/bub-mcp/registry"
)

// stderrPeer is the Peer of `bub-mcp call` on a terminal: a tool's
// progress (bash's output as it comes) is written to stderr for the
// person watching, while stdout keeps the result alone. It has no model
// or human to ask.
type stderrPeer struct {
	mu sync.Mutex
	w  io.Writer
}

// Progress writes the message as it is: bash's chunks are the raw
// output, so a newline of our own would break a line split across two
// chunks. A report without a message (figures only) is not shown.
func (p *stderrPeer) Progress(ctx context.Context, progress, total float64, message string) {
	if message == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.w, message)
}

// Log is not shown: slog's own records already reach stderr.
func (*stderrPeer) Log(context.Context, slog.Level, string, any) {}

// Sample has no model to ask.
func (*stderrPeer) Sample(context.Context, registry.SampleRequest) (*registry.SampleResult, error) {
	return nil, registry.ErrNoPeer
}

// Elicit has no form to show.
func (*stderrPeer) Elicit(context.Context, registry.ElicitRequest) (*registry.ElicitResult, error) {
	return nil, registry.ErrNoPeer
}

// CanElicit says so, so tools do not try.
func (*stderrPeer) CanElicit(context.Context) bool { return false }
