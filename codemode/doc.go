// Package codemode exposes tools to model-written Python: it renders the
// Python stub that declares every code tool as an async function (with
// package pystub), stores it under $BUB_HOME, and builds the system-prompt
// fragment that points to it.
//
// A host wires it in with [Provider], which splits each View into direct
// tools plus run_code and the code tools, and [LocalRunner], which gives
// every session environment a Python runner (package runner). The run_code
// tool and the code_mode command register themselves in init and run
// inside a host.Host.
package codemode
