package codemode_test

import (
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/codemode"
	"github.com/google/go-cmp/cmp"
)

func TestPrompt(t *testing.T) {
	path := "/home/u/.bub/codemode/4a241db87c9aef15/tools-725c546b990d.pyi"
	want := "<code_mode>\n" +
		"More tools are available as async Python functions `tools.<name>(...)` inside `run_code`. " +
		"Their signatures, result types and documentation are in the stub file " + path + "; " +
		"read it with `fs_read` before you call a tool for the first time.\n" +
		"Always `await` tool calls (top-level `await` works) and pass keyword arguments only. " +
		"Calls return structured values (dicts, lists, ...) and raise an exception when the tool fails.\n" +
		"`run_code` returns only what the code prints, so print the results you need, " +
		"and run independent calls together with `asyncio.gather` in one `run_code` call.\n" +
		"</code_mode>"
	got := codemode.Prompt(path)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prompt(%q) mismatch (-want +got):\n%s", path, diff)
	}
	for _, part := range []string{"tools.<name>(...)", "run_code", path, "fs_read", "await", "keyword arguments only", "raise", "print", "asyncio.gather"} {
		if !strings.Contains(got, part) {
			t.Errorf("Prompt(%q) lacks %q", path, part)
		}
	}
}
