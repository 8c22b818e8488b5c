package console

import (
	"strings"
	"testing"
)

// TestCallsFromFilesSaysWhatItShows: a range older than the ring is read
// from the log files; the status line called the calls it listed "the N
// calls shown live", which they are not.
func TestCallsFromFilesSaysWhatItShows(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	f.record(t, rec("fs.read", "", "ok", `{"path":"a"}`), rec("bash", "", "error", `{"command":"make test"}`))
	f.waitRows(t, 2)
	res, body := f.get(t, "/console/calls?since=1000h", "")
	if res.StatusCode != 200 || !strings.Contains(body, "make test") {
		t.Fatalf("status %d; want 200 listing the calls\n%s", res.StatusCode, body)
	}
	if !strings.Contains(body, "The newest 2 matching calls, read from the log files") || strings.Contains(body, "calls shown live") {
		t.Errorf("the status line does not say the 2 calls were read from the files:\n%s", body)
	}
}
