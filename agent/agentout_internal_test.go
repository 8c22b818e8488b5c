package agent

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type progressLog struct{ got []string }

func (p *progressLog) Begin(string)      {}
func (p *progressLog) Progress(m string) { p.got = append(p.got, m) }
func (p *progressLog) End()              {}

// TestProgressPeerShowsNotices: the approval hook tells the peer, by Log,
// that a call waits in the operator console; the REPL's peer dropped it,
// so a turn waiting for approval looked hung.
func TestProgressPeerShowsNotices(t *testing.T) {
	act := &progressLog{}
	p := progressPeer{act}
	p.Log(context.Background(), slog.LevelInfo, "confirm", "Tool 'bash' waits for approval in the operator console (bub-mcp console), up to 1m0s.")
	p.Log(context.Background(), slog.LevelDebug, "x", "debug chatter")
	p.Log(context.Background(), slog.LevelWarn, "x", map[string]any{"not": "text"})
	if diff := cmp.Diff([]string{"Tool 'bash' waits for approval in the operator console (bub-mcp console), up to 1m0s."}, act.got); diff != "" {
		t.Errorf("status line messages (-want +got):\n%s", diff)
	}
}
