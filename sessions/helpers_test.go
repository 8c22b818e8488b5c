package sessions

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// logBuffer collects slog output safely from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// resolveWorkspace resolves ws as Store.Session does, to name its tape.
func resolveWorkspace(ws string) string {
	r, _ := resolveExisting(ws)
	return r
}

// openStore opens a store on home and closes it when the test ends.
func openStore(t *testing.T, home string, opts *Options) *Store {
	t.Helper()
	if opts == nil {
		opts = &Options{Logger: (&logBuffer{}).logger()}
	}
	s, err := Open(home, opts)
	if err != nil {
		t.Fatalf("Open(%q) error: %v", home, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func session(t *testing.T, s *Store, workspace, id string) *Session {
	t.Helper()
	sess, err := s.Session(workspace, id)
	if err != nil {
		t.Fatalf("Session(%q, %q) error: %v", workspace, id, err)
	}
	return sess
}

func mustAppend(t *testing.T, tp *Tape, kind string, payload, meta map[string]any) Entry {
	t.Helper()
	e, err := tp.Append(kind, payload, meta)
	if err != nil {
		t.Fatalf("Append(%q) error: %v", kind, err)
	}
	return e
}

func msg(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

// fileLines returns the non-empty lines of a file.
func fileLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("ReadFile(%q) error: %v", path, err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// listFiles returns the names of the files under dir, recursively.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WalkDir(%q) error: %v", dir, err)
	}
	return out
}

// entryLine is e as the tape writes it, newline included; tests build tape
// files with it to control the dates.
func entryLine(tb testing.TB, e Entry) []byte {
	tb.Helper()
	p, err := encodeObject(e.Payload)
	if err != nil {
		tb.Fatalf("encoding payload of entry %d: %v", e.ID, err)
	}
	m, err := encodeObject(e.Meta)
	if err != nil {
		tb.Fatalf("encoding meta of entry %d: %v", e.ID, err)
	}
	return encodeLine(e.ID, e.Kind, p, m, e.Date)
}
