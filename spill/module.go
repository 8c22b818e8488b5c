package spill

import (
	"context"
	"fmt"
	"strconv"

	"github.com/bubbuild/bub-mcp/app"
)

func init() {
	app.RegisterModule(new(Module))
}

// Module is the spill feature of one App. Its exported field is its part
// of the [tools] table of bub.toml (the App reads max_concurrency from
// the same table).
type Module struct {
	// SpillThreshold: outputs of at least 4× this many characters spill;
	// 0 disables spilling, a negative value is refused. Nil leaves it to
	// BUB_SPILL_THRESHOLD, else DefaultThreshold.
	SpillThreshold *int `toml:"spill_threshold"`
}

// BubModule registers the module as "spill", configured by [tools].
func (*Module) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "spill", Config: "tools", New: func() app.Module { return new(Module) }}
}

// Provision contributes spill.read and the spill hook, with the threshold
// Threshold resolves.
func (m *Module) Provision(ctx context.Context, a *app.App) error {
	if m.SpillThreshold != nil && *m.SpillThreshold < 0 {
		return a.Config().Fail("must be >= 0", "tools", "spill_threshold")
	}
	threshold, err := m.Threshold(a.Getenv)
	if err != nil {
		return err
	}
	if err := a.RegisterTool(ReadTool()); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	a.AddHooks(Hook(threshold, a.Logger()))
	return nil
}

// Threshold resolves the spill threshold: [tools] spill_threshold wins
// over BUB_SPILL_THRESHOLD (read with getenv), which wins over
// DefaultThreshold. A malformed BUB_SPILL_THRESHOLD is an error even when
// the configuration sets the threshold, so a typo never goes unnoticed.
func (m *Module) Threshold(getenv func(string) string) (int, error) {
	threshold := DefaultThreshold
	if v := getenv("BUB_SPILL_THRESHOLD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("BUB_SPILL_THRESHOLD=%q: want a whole number >= 0", v)
		}
		threshold = n
	}
	if m.SpillThreshold != nil {
		threshold = *m.SpillThreshold
	}
	return threshold, nil
}

var (
	_ app.Module      = (*Module)(nil)
	_ app.Provisioner = (*Module)(nil)
)
