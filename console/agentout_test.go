package console

import (
	"net/http"
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

// TestCallsSinceAfterUntil: a since later than until matched nothing and
// answered an empty table as if no call had been made.
func TestCallsSinceAfterUntil(t *testing.T) {
	f := newFixture(t, plainConfig, true)
	f.record(t, rec("bash", "", "ok", `{"command":"make test"}`))
	f.waitRows(t, 1)
	if res, body := f.get(t, "/console/calls?since=2026-03-02&until=2026-03-01", ""); res.StatusCode != 400 || !strings.Contains(body, "is after until") {
		t.Errorf("calls page: status %d; want 400 saying since is after until\n%s", res.StatusCode, body)
	}
	// The event stream answers its status before streaming: read no body,
	// which a wrongly accepted filter would never end.
	res, err := http.Get(f.srv.URL + "/console/calls/events?since=1h&until=2h")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Errorf("event stream: status %d; want 400", res.StatusCode)
	}
	if res, body := f.get(t, "/console/calls?since=2h&until=1h", ""); res.StatusCode != 200 || strings.Contains(body, "is after until") {
		t.Errorf("since=2h&until=1h: status %d; want 200\n%s", res.StatusCode, body)
	}
}
