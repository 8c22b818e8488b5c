package runner

import "testing"

// TestStderrIsOutput: what the code writes to sys.stderr (a print, a log
// record) reaches the output in order with its prints, rather than being
// dropped on a run that does not crash.
func TestStderrIsOutput(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, false)
	code := "import sys, logging\nprint('a')\nprint('b', file=sys.stderr)\nlogging.warning('logged')\nprint('c')"
	out, err := r.Run(t.Context(), Request{Code: code})
	if want := "a\nb\nWARNING:root:logged\nc\n"; err != nil || out != want {
		t.Errorf("Run = %q, %v; want %q", out, err, want)
	}
}
