package upstream

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// benchTools is a list of n tools shaped like real servers' (a
// description, three typed arguments, annotations).
func benchTools(n int) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for i := range out {
		out[i] = json.RawMessage(fmt.Sprintf(`{"name":"tool_%03d","title":"Tool %d","description":"Does thing number %d to a file; returns what changed.",`+
			`"inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"the file"},"count":{"type":"integer","minimum":1,"maximum":1e3},`+
			`"force":{"type":"boolean"}},"required":["path"]},"annotations":{"readOnlyHint":false,"destructiveHint":true}}`, i, i, i))
	}
	return out
}

// BenchmarkPinCheck is the cost of checking one tool list of 100 tools
// against its pins (all unchanged, the steady state): canonicalisation
// and hashing alone, and the whole admit with the file store's lock, read
// and stamp. Calls pay nothing: the check happens when a list arrives.
func BenchmarkPinCheck(b *testing.B) {
	raws := benchTools(100)
	b.Run("canonical+sha256", func(b *testing.B) {
		for b.Loop() {
			for _, r := range raws {
				if _, _, _, ok := canonicalTool(r); !ok {
					b.Fatal("not a tool")
				}
			}
		}
	})
	b.Run("admit", func(b *testing.B) {
		m := &Module{log: slog.New(slog.DiscardHandler), pinStore: FilePinStore{Dir: b.TempDir()}}
		u := &upstream{cfg: &Server{name: "bench", Pin: PinStrict}, m: m}
		err := m.pinStore.Update("bench", func(*PinSet) (*PinSet, bool, error) {
			set := newPinSet(time.Now())
			for _, r := range raws {
				name, canon, sum, _ := canonicalTool(r)
				set.Pins[name] = Pin{SHA256: sum, Definition: canon, By: "bench"}
			}
			return set, true, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if got := u.admit(raws); len(got) != len(raws) {
				b.Fatalf("admitted %d of %d", len(got), len(raws))
			}
		}
	})
}
