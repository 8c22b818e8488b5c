package environment

import (
	"context"
	"encoding/json"
)

// CodeRunner is implemented by environments that run run_code's Python
// their own way (a remote interpreter, a notebook kernel), as the seed's
// Environment.run_code allows. It is optional, found by type assertion
// (the database/sql way): code mode uses it when the session's
// environment has it, and otherwise runs its own runner over Spawn, so
// every Environment runs run_code.
type CodeRunner interface {
	// RunCode runs req.Code, in which `await tools.<name>(**kwargs)`
	// calls req.CallTool(ctx, name, kwargs) for the names in req.Tools,
	// and hands what the code prints to req.Write as it comes. It returns
	// nil when the code ran to its end and a *CodeFailed when the code
	// raised; any other error means the runner itself failed. When ctx
	// ends (timeout, cancellation) it must stop the code and everything
	// it started, and return.
	RunCode(ctx context.Context, req CodeRequest) error
}

// CodeRequest is one run for a CodeRunner.
type CodeRequest struct {
	// Code is the Python source; top-level await is expected to work.
	Code string
	// Tools are the names the code may call as tools.<name>.
	Tools []string
	// CallTool makes a nested call through the host's tool path (hooks,
	// approvals, audit). Args and the result are JSON; an error is to be
	// raised in the code at the await, with its text as the message.
	CallTool func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
	// Write receives the code's stdout as it arrives; it is safe for
	// concurrent use.
	Write func(chunk string)
}

// CodeFailed is the error of code that raised, as Bub's CodeFailed.
type CodeFailed struct {
	// Message is "<ExceptionType>: <message>".
	Message string
	// Traceback is the formatted traceback, code frames only where the
	// runner can tell.
	Traceback string
}

// Error is the message, as Bub prints CodeFailed.
func (e *CodeFailed) Error() string { return e.Message }
