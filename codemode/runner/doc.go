// Package runner runs model-written Python in a subprocess and forwards its
// `await tools.<name>(**kwargs)` calls to Go, the way Bub's code mode does
// (run_code_in_subprocess). Each run gets a fresh interpreter started with
// `python3 -u -c <child source>`; the child is a standard-library-only
// script (child.py, embedded) that works on Python 3.8 and later. Anything
// that can start a process with stdin and stdout pipes can host it (see
// StartFunc); LocalStart runs it on this machine.
//
// Where the environment can host one (Options.Fork, EnvForkStart), the
// interpreter is instead forked from a fork server (forkserver.py, see
// forkServer for its protocol): a process that has done the child's
// imports, keeps Options.Pool children forked ahead and hands each run
// one, which then runs the same child source on its own pipes. The
// environment's ForkPolicy says what each child must get before it runs
// anything (namespaces; a cgroup; a pidfd the host holds it by).
//
// # Protocol
//
// Host and child exchange JSON objects, one per line, of any length.
//
// Host to child:
//
//	{"type":"run","code":"...","filename":"<run_code-1a2b3c4d>","tools":["fs_read",...]}
//	{"type":"result","id":0,"value":<JSON>}
//	{"type":"error","id":0,"message":"[tool] not allowed"}
//
// Child to host:
//
//	{"type":"ready"}                                  imports done, waiting for run
//	{"type":"call","id":0,"name":"fs_read","arguments":{...}}
//	{"type":"output","data":"..."}
//	{"type":"done"}                                   or
//	{"type":"failed","error":"ValueError: bad","traceback":"..."}
//
// Call ids count from 0. "ready" is our addition: it lets a Runner start an
// interpreter ahead of time (Options.Prestart) and know when its imports
// are done. A stdout line that is not a JSON message is taken as text.
//
// # The child
//
// The code is compiled with top-level await allowed, under the run's
// filename, and run in the namespace {"__name__": "__run_code__", "tools":
// ...}. Each tool is an async function taking keyword arguments only
// (positional ones raise TypeError "tools.X() accepts keyword arguments
// only"); arguments that are not JSON raise TypeError inside the code; an
// unknown tools.foo raises AttributeError "unknown tool 'foo'" with the
// closest name or the names it can call; an error
// reply raises BubError, whose str() is the host's message. Replies are
// read by the run's event loop itself (a thread takes over only for a call
// made from another loop), so calls gathered with asyncio.gather run
// concurrently and a lone call wakes one thread; a lone call to a fast tool
// polls for its reply for up to 100 µs, yielding the CPU, before it sleeps.
// Output is sent once 8192 characters are pending, every 0.2 s, before each
// call and at the end. An uncaught exception (SystemExit included) becomes
// "failed" with a traceback that keeps only the code's own frames. A
// process the code forks never speaks the protocol: its tool calls raise
// RuntimeError and, should it run to the end of the code, it exits quietly.
//
// # Why stdout is not shared
//
// Bub's child speaks the protocol on its stdout and reroutes the code's
// output by replacing sys.stdout; the host takes non-JSON stdout lines as
// text. Whatever writes to file descriptor 1 directly — os.write(1, ...),
// C extensions, subprocesses — bypasses sys.stdout, so a JSON-looking line
// from it is read as a protocol message (printing {"type":"done"} that way
// ends the run) and a partial line can corrupt the next real message.
//
// This child moves the protocol out of reach before the code runs: at
// start-up it duplicates fds 0 and 1 onto private, non-inheritable
// descriptors used only for the protocol, points fd 0 at /dev/null, and
// points fd 1 at a pipe that a thread reads and forwards as "output"
// messages. print, sys.stdout.write, os.write(1, ...) and subprocesses all
// become output, JSON-looking or not. sys.stderr is sys.stdout, so what
// the code itself reports there (print(..., file=sys.stderr), warnings,
// logging) is output too, in order with its prints. Descriptor 2 is left
// alone (fatal interpreter errors, subprocesses' stderr): the host keeps
// its end and returns it in a CrashError. This needs nothing from the
// spawner beyond stdin and stdout pipes (no extra descriptor to pass), so
// it works as well over a remote environment as locally.
//
// # What code can still do to the protocol
//
// Moving the protocol off fds 0 and 1 stops accidents, not the code: the
// private descriptors live in the same process, and code that looks for
// them (import __main__; __main__._POUT) can write messages and read the
// host's replies. What that reaches is its own run and nothing else. A
// forged "done" or "failed" ends the run early with what it says; a forged
// "call" is checked like a real one (the tool must be in the run's list,
// it counts towards MaxCalls, and it goes through the same hooks and
// approvals as await tools.<name>()); stolen replies only confuse its own
// calls; a line over MaxLine (32 MiB) kills the interpreter as a crash
// instead of growing the host's memory. Every run has a fresh
// interpreter, so no run can touch another's protocol. A forked run on
// the local environment can signal its fork server (its parent, the same
// user) and so end the runs in flight on it, as it could kill their
// interpreters directly; in the sandbox the server is outside the run's
// pid namespace and out of its reach.
//
// # Stopping
//
// Whatever the outcome — done, failed, timed out, canceled, crashed — Run
// kills the interpreter with Process.Signal(true), which must reach its
// whole process group, and waits up to 3 s for it to exit. Output the child
// had not sent yet (at most 0.2 s worth) is lost when it is killed or
// crashes.
package runner
