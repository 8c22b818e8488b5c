package runner

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("runner: closed")

// A CodeError reports that the code raised an exception (SystemExit and
// SyntaxError included). Its message is Bub's "Code raised <Type>: <msg>".
type CodeError struct {
	Type      string // exception class name, e.g. "ValueError"
	Message   string // str() of the exception
	Traceback string // only frames of the code itself, then the exception line(s)
	Output    string // what the code printed before it raised
}

func (e *CodeError) Error() string {
	return "Code raised " + e.Type + ": " + e.Message
}

// newCodeError splits the child's "Type: msg" error.
func newCodeError(failed message, output string) *CodeError {
	typ, msg, _ := strings.Cut(failed.Error, ": ")
	return &CodeError{Type: typ, Message: msg, Traceback: failed.Traceback, Output: output}
}

// A TimeoutError reports that the code ran past Request.Timeout or the
// deadline of Run's context. It matches context.DeadlineExceeded.
type TimeoutError struct {
	Timeout time.Duration
	Output  string // what the code printed before it was killed
}

func (e *TimeoutError) Error() string {
	return "Code timed out after " + strconv.FormatFloat(e.Timeout.Seconds(), 'f', -1, 64) + " seconds"
}

func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// A CanceledError reports that Run's context was canceled before the code
// finished. Err is the context's Err, so errors.Is(err, context.Canceled)
// holds.
type CanceledError struct {
	Err    error
	Output string // what the code printed before it was killed
}

func (e *CanceledError) Error() string { return "runner: run canceled: " + e.Err.Error() }

func (e *CanceledError) Unwrap() error { return e.Err }

// A CrashError reports that the interpreter ended without saying whether
// the code finished, e.g. after os._exit or a signal.
type CrashError struct {
	Code   int    // exit code, -N after signal N, -1 if unknown
	Stderr string // the end of what the process wrote to stderr
	Output string // what the code printed before the crash
}

func (e *CrashError) Error() string {
	return "Code runner exited unexpectedly with code " + strconv.Itoa(e.Code)
}
