package builtin

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLaxInputs checks that the builtins accept the out-of-range numbers
// Bub accepts, with Bub's meaning, instead of refusing them: Bub clamps
// offsets and limits (lines[max(0, offset):], max(0, limit)), slices
// fs.edit's start as Python does (negative counts from the end) and
// treats a bash timeout of 0 or less as already passed (asyncio.timeout),
// so the command goes on in the background at once.
func TestLaxInputs(t *testing.T) {
	eachEnv(t, func(t *testing.T, f *fixture) {
		f.write("r.txt", "a\nb\nc\n")
		reads := []struct {
			name string
			args map[string]any
			want string
		}{
			{"negative offset reads from 0", map[string]any{"path": "r.txt", "offset": -1}, "a\nb\nc"},
			{"very negative offset", map[string]any{"path": "r.txt", "offset": -100, "limit": 2}, "a\nb"},
			{"zero limit reads none", map[string]any{"path": "r.txt", "limit": 0}, ""},
			{"negative limit reads none", map[string]any{"path": "r.txt", "offset": 1, "limit": -1}, ""},
		}
		for _, tt := range reads {
			t.Run("fs.read "+tt.name, func(t *testing.T) {
				f := f.in(t)
				if diff := cmp.Diff(tt.want, f.ok("fs.read", tt.args)); diff != "" {
					t.Errorf("fs.read(%v) (-want +got):\n%s", tt.args, diff)
				}
			})
		}

		edits := []struct {
			name  string
			start int
			want  string
		}{
			{"start -1 is the last line", -1, "x\nx\ny\n"},
			{"start -2", -2, "x\ny\ny\n"},
			{"start before the first line is the whole file", -100, "y\ny\ny\n"},
		}
		for _, tt := range edits {
			t.Run("fs.edit "+tt.name, func(t *testing.T) {
				f := f.in(t)
				f.write("e.txt", "x\nx\nx\n")
				f.ok("fs.edit", map[string]any{"path": "e.txt", "old": "x", "new": "y", "start": tt.start})
				if diff := cmp.Diff(tt.want, f.read("e.txt")); diff != "" {
					t.Errorf("fs.edit start=%d (-want +got):\n%s", tt.start, diff)
				}
			})
		}

		for _, timeout := range []int{0, -5} {
			t.Run("bash timeout_seconds="+strconv.Itoa(timeout)+" goes to the background", func(t *testing.T) {
				f := f.in(t)
				text := f.ok("bash", map[string]any{"command": "echo one; echo two; sleep 30", "timeout_seconds": timeout})
				id := shellID(t, text)
				if want := "command timed out after " + strconv.Itoa(timeout) + " seconds; continuing in background\nshell_id: " + id; text != want {
					t.Errorf("bash = %q; want %q", text, want)
				}
				if got := f.pollOutput(id, 2); !cmp.Equal(got, []string{"one", "two"}) {
					t.Errorf("output = %q", got)
				}
				outputs := []struct {
					args map[string]any
					want string
				}{
					{map[string]any{"shell_id": id, "offset": -3}, "one\ntwo\n"},
					{map[string]any{"shell_id": id, "offset": 4, "limit": -2}, ""},
				}
				for _, o := range outputs {
					res := f.call("bash.output", o.args)
					if res.Err != nil {
						t.Fatalf("bash.output(%v): %v", o.args, res.Err)
					}
					if got := res.Value.(BashOutputResult).Output; got != o.want {
						t.Errorf("bash.output(%v) output = %q; want %q", o.args, got, o.want)
					}
				}
				f.ok("bash.kill", map[string]any{"shell_id": id})
			})
		}
	})
}

// in returns f reporting to t, so a subtest's failure stops that subtest
// only (FailNow on the parent from a subtest is not allowed).
func (f *fixture) in(t testing.TB) *fixture {
	c := *f
	c.t = t
	return &c
}
