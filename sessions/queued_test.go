package sessions

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestQueuedEntriesAreRead checks that entries queued by AppendAsync are
// seen whole by every reader, before and after their group commit.
func TestQueuedEntriesAreRead(t *testing.T) {
	st, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sess, err := st.Session(t.TempDir(), "audit")
	if err != nil {
		t.Fatal(err)
	}
	tape := sess.Tape()
	if err := tape.Handoff("start", "s"); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		if err := tape.AppendAsync(KindToolCall, map[string]any{"calls": []any{map[string]any{"id": fmt.Sprint(i)}}}, map[string]any{"run_id": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Queued, not yet written: readers see it all the same.
	if got := tape.Entries(); !cmp.Equal(got[len(got)-1].Payload, map[string]any{"calls": []any{map[string]any{"id": fmt.Sprint(n - 1)}}}) {
		t.Errorf("queued entry read back = %v", got[len(got)-1].Payload)
	}
	if _, err := tape.AppendEvent("run", map[string]any{"usage": map[string]any{"total_tokens": 42}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tape.Flush(); err != nil {
		t.Fatal(err)
	}
	entries := tape.SinceLastAnchor()
	if len(entries) != n+2 { // the handoff event, n calls, the run event
		t.Fatalf("SinceLastAnchor() = %d entries; want %d", len(entries), n+2)
	}
	if diff := cmp.Diff(map[string]any{"calls": []any{map[string]any{"id": "7"}}}, entries[8].Payload); diff != "" {
		t.Errorf("entry read back (-want +got):\n%s", diff)
	}
	if entries[8].Meta["run_id"] != "7" {
		t.Errorf("meta read back = %v", entries[8].Meta)
	}
	if info := tape.Info(); info.LastTokenUsage == nil || *info.LastTokenUsage != 42 {
		t.Errorf("Info() usage = %v; want 42 from the run event", info.LastTokenUsage)
	}
	res := tape.Search(SearchQuery{Query: "299", Kinds: []string{KindToolCall}})
	found := false
	for _, m := range res.Matches {
		found = found || strings.Contains(m.Content, `"299"`)
	}
	if !found {
		t.Errorf("Search(299) = %v; want the queued call among the matches", res.Matches)
	}
}
