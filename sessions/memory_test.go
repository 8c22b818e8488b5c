package sessions

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMemoryStore: kind "memory" keeps tapes in the process: nothing is
// written under $BUB_HOME/tapes, and a session released and opened again
// finds its entries, settings and ids where it left them.
func TestMemoryStore(t *testing.T) {
	home := t.TempDir()
	s := openStore(t, home, &Options{Store: MemoryKind, Logger: (&logBuffer{}).logger()})
	ws := t.TempDir()
	sess := session(t, s, ws, "kept")
	mustAppend(t, sess.Tape(), KindMessage, msg("user", "one"), nil)
	if err := sess.Tape().AppendAsync(KindEvent, eventPayload("loop.step", map[string]any{"i": 2}), nil); err != nil {
		t.Fatal(err)
	}
	if err := sess.SetCodeMode(true); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ws, "kept"); err != nil {
		t.Fatal(err)
	}
	again := session(t, s, ws, "kept")
	if again == sess {
		t.Fatal("Release kept the session open")
	}
	var kinds []string
	for _, e := range again.Tape().Entries() {
		kinds = append(kinds, e.Kind)
	}
	if diff := cmp.Diff([]string{KindMessage, KindEvent, KindEvent}, kinds); diff != "" {
		t.Errorf("entries after reopening (-want +got):\n%s", diff)
	}
	if cm := again.Settings().CodeMode; cm == nil || !*cm {
		t.Errorf("code mode after reopening = %v; want true", cm)
	}
	if e := mustAppend(t, again.Tape(), KindMessage, msg("user", "four"), nil); e.ID != 4 {
		t.Errorf("next id after reopening = %d; want 4", e.ID)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(home, "tapes", "*"))
	if len(files) != 0 {
		t.Errorf("memory store wrote %v", files)
	}
}
