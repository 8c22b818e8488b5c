package sessions

import "sync"

// MemoryKind is the store that keeps every tape in this process's memory
// ([store] kind = "memory", the module store.memory): nothing reaches
// $BUB_HOME's tapes, and everything is gone when the process ends. For
// tests, and servers whose sessions need not outlive them.
const MemoryKind = "memory"

func init() { Register(MemoryKind, openMemoryBackend) }

// memBackend keeps the tapes of one Store by name, so that a session
// released and opened again finds its tape as it left it.
type memBackend struct {
	mu    sync.Mutex
	tapes map[string]*memTape
}

func openMemoryBackend(BackendOptions) (Backend, error) {
	return &memBackend{tapes: map[string]*memTape{}}, nil
}

func (b *memBackend) Tape(name string) TapeBackend {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.tapes[name]
	if !ok {
		t = &memTape{}
		b.tapes[name] = t
	}
	return t
}

func (b *memBackend) Close() error { return nil }

var _ Backend = (*memBackend)(nil)
