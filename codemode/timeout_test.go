package codemode_test

import (
	"context"
	"testing"
)

// TestRunCodeTimeoutSaysWhatToDo: a run that times out says whether a
// larger timeout_seconds would be allowed, so the model knows whether to
// retry with one or to split the work.
func TestRunCodeTimeoutSaysWhatToDo(t *testing.T) {
	needPython(t)
	a, _ := newApp(t, appOptions{codemode: "max_timeout_seconds = 2"})
	tests := []struct {
		timeout int
		want    string
	}{
		{1, "[tool] Code timed out after 1 seconds (pass a larger timeout_seconds, at most 2, or do less in one run)"},
		{2, "[tool] Code timed out after 2 seconds (2 seconds is the most run_code allows: do less in one run)"},
	}
	for _, tt := range tests {
		res := runCode(t, context.Background(), a, nil, "import time\ntime.sleep(60)", tt.timeout)
		if res.Err == nil || res.Err.Error() != tt.want {
			t.Errorf("run_code(timeout_seconds=%d) = %q, %v; want %s", tt.timeout, res.Text, res.Err, tt.want)
		}
	}
}
