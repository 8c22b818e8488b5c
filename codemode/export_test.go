package codemode

import "context"

// Runners is how many runners m keeps, so tests can see one released
// when its Environment closes.
func (m *Module) Runners() int {
	m.runners.mu.Lock()
	defer m.runners.mu.Unlock()
	return len(m.runners.runners)
}

// WaitReady waits until every runner m keeps has an interpreter
// pre-started, so that benchmarks time warm runs, as between model turns.
func (m *Module) WaitReady(ctx context.Context) error {
	m.runners.mu.Lock()
	rs := make([]interface{ WaitReady(context.Context) error }, 0, len(m.runners.runners))
	for _, r := range m.runners.runners {
		rs = append(rs, r)
	}
	m.runners.mu.Unlock()
	for _, r := range rs {
		if err := r.WaitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Forking is how many of m's runners fork their runs from a fork server.
func (m *Module) Forking() int {
	m.runners.mu.Lock()
	defer m.runners.mu.Unlock()
	n := 0
	for _, r := range m.runners.runners {
		if r.Forking() {
			n++
		}
	}
	return n
}
