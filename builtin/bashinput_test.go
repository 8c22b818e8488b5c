package builtin

import (
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

func TestBashInput(t *testing.T) { eachEnv(t, testBashInput) }

func testBashInput(t *testing.T, f *fixture) {
	id := shellID(t, f.ok("bash", map[string]any{
		"command": `while read -r l; do echo "got:$l"; done; echo eof`, "background": true}))

	res := f.call("bash.input", map[string]any{"shell_id": id, "input": "a b\nc\n"})
	if res.Err != nil {
		t.Fatalf("bash.input: %v", res.Err)
	}
	if diff := cmp.Diff(BashInputResult{ID: id, Bytes: 6, Stdin: "open"}, res.Value); diff != "" {
		t.Errorf("bash.input result (-want +got):\n%s", diff)
	}
	if want := "id: " + id + "\nwrote: 6 bytes\nstdin: open\nRead the output with bash_output."; res.Text != want {
		t.Errorf("bash.input text = %q; want %q", res.Text, want)
	}
	if got, want := f.pollOutput(id, 3), []string{"got:a", "b", "got:c"}; !cmp.Equal(got[:3], want) {
		t.Errorf("output after input = %q; want %q", got, want)
	}

	// The last line without its newline, then end-of-file: read sees both.
	res = f.call("bash.input", map[string]any{"shell_id": id, "input": "d", "close_stdin": true})
	if res.Err != nil {
		t.Fatalf("bash.input close_stdin: %v", res.Err)
	}
	if diff := cmp.Diff(BashInputResult{ID: id, Bytes: 1, Stdin: "closed"}, res.Value); diff != "" {
		t.Errorf("bash.input close result (-want +got):\n%s", diff)
	}
	sh, err := f.mod.shells.get(f.env, id)
	if err != nil {
		t.Fatal(err)
	}
	if !waitDone(t.Context(), sh, testTimeout) {
		t.Fatalf("shell %s did not end after its stdin was closed", id)
	}
	e := f.fails("bash.input", map[string]any{"shell_id": id, "input": "late\n"})
	if e.Kind != registry.KindInvalidInput || !strings.Contains(e.Message, "is closed") {
		t.Errorf("bash.input after close_stdin = %v; want stdin closed", e)
	}
	out := f.ok("bash.output", map[string]any{"shell_id": id})
	if !strings.Contains(out, "status: exited\nexit_code: 0") || !strings.HasSuffix(out, "got:a b\ngot:c\neof") {
		t.Errorf("bash.output after EOF = %q; want the loop to end at EOF (the unterminated d is dropped by read)", out)
	}
}

func TestBashInputFailures(t *testing.T) { eachEnv(t, testBashInputFailures) }

func testBashInputFailures(t *testing.T, f *fixture) {
	exited := shellID(t, f.ok("bash", map[string]any{"command": "exit 3", "background": true}))
	sh, err := f.mod.shells.get(f.env, exited)
	if err != nil {
		t.Fatal(err)
	}
	if !waitDone(t.Context(), sh, testTimeout) {
		t.Fatalf("shell %s did not exit", exited)
	}
	fg := shellID(t, f.ok("bash", map[string]any{"command": "sleep 300", "timeout_seconds": 1}))
	defer f.ok("bash.kill", map[string]any{"shell_id": fg})
	running := shellID(t, f.ok("bash", map[string]any{"command": "sleep 300", "background": true}))
	defer f.ok("bash.kill", map[string]any{"shell_id": running})

	tests := []struct {
		name     string
		args     map[string]any
		kind     registry.Kind
		contains string
	}{
		{"unknown id", map[string]any{"shell_id": "bash-00000000", "input": "x"}, registry.KindNotFound, "unknown shell id: bash-00000000"},
		{"no input", map[string]any{"shell_id": running}, registry.KindInvalidInput, "`input` must not be empty unless close_stdin is true."},
		{"exited", map[string]any{"shell_id": exited, "input": "x"}, registry.KindInvalidInput, "shell " + exited + " has exited (exit code 3)"},
		{"foreground", map[string]any{"shell_id": fg, "input": "x"}, registry.KindInvalidInput, "started in the foreground"},
		{"missing shell_id", map[string]any{"input": "x"}, registry.KindInvalidInput, "argument validation failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := f.fails("bash.input", tt.args)
			if e.Kind != tt.kind || !strings.Contains(e.Message, tt.contains) {
				t.Errorf("bash.input(%v) = %v; want [%s] containing %q", tt.args, e, tt.kind, tt.contains)
			}
		})
	}
	// Closing alone is allowed, and only once.
	if got := f.ok("bash.input", map[string]any{"shell_id": running, "close_stdin": true}); !strings.Contains(got, "stdin: closed") {
		t.Errorf("bash.input close_stdin alone = %q", got)
	}
	if e := f.fails("bash.input", map[string]any{"shell_id": running, "close_stdin": true}); !strings.Contains(e.Message, "is closed") {
		t.Errorf("second close_stdin = %v; want stdin closed", e)
	}
}
