package codemode

// Prompt returns the system-prompt fragment that introduces code mode: the
// tools missing from the tool list are async functions inside run_code,
// declared in the stub at stubPath.
func Prompt(stubPath string) string {
	return "<code_mode>\n" +
		"More tools are available as async Python functions `tools.<name>(...)` inside `run_code`. " +
		"Their signatures, result types and documentation are in the stub file " + stubPath + "; " +
		"read it with `fs_read` before you call a tool for the first time.\n" +
		"Always `await` tool calls (top-level `await` works) and pass keyword arguments only. " +
		"Calls return structured values (dicts, lists, ...) and raise an exception when the tool fails.\n" +
		"`run_code` returns only what the code prints, so print the results you need, " +
		"and run independent calls together with `asyncio.gather` in one `run_code` call.\n" +
		"</code_mode>"
}
