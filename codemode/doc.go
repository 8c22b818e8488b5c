// Package codemode exposes tools to model-written Python, as Bub's code
// mode does: the model sees the preserved tools plus run_code, and every
// other tool in scope is `await tools.<name>(...)` inside run_code,
// declared in a Python stub (rendered by package pystub) that the
// system-prompt fragment points to.
//
// It is one app module, [Module] ("codemode", configured by [codemode] in
// bub.toml), enabled by a blank import:
//
//	import _ "github.com/bubbuild/bub-mcp/codemode"
//
// The module registers run_code and the code_mode command, installs the
// View split ([Module.Split]), offers the stub as the resource [StubURI],
// and keeps a Python runner (package runner) per session Environment,
// started through the Environment's Spawn.
package codemode
