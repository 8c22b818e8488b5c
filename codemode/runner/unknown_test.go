package runner

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestUnknownToolListsAtMost40: with many tools and no near name, the
// error of an unknown tool lists the first 40 and points at the stub for
// the rest, so that it stays short enough to read.
func TestUnknownToolListsAtMost40(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, false)
	names := make([]string, 45)
	for i := range names {
		names[i] = fmt.Sprintf("t%02d", i)
	}
	_, err := r.Run(t.Context(), Request{Code: "await tools.zzzzzzzz()", Tools: names})
	var ce *CodeError
	if !errors.As(err, &ce) {
		t.Fatalf("Run = %v; want a CodeError", err)
	}
	want := "unknown tool 'zzzzzzzz'; the tools callable from code are: " + strings.Join(names[:40], ", ") +
		", and 5 more (see the stub). A tool offered to you directly (outside run_code) is not callable here: call it as a tool."
	if ce.Type != "AttributeError" || ce.Message != want {
		t.Errorf("error = %s: %q; want AttributeError: %q", ce.Type, ce.Message, want)
	}
}
