# bub-mcp code-mode child: runs model-written Python whose
# `await tools.<name>(**kwargs)` calls are forwarded to the Go host.
# Standard library only; Python >= 3.8. The protocol is described in the
# Go package documentation (package runner).
import os
import sys


def _limit_memory():
    # The host passes the address-space limit in bytes ("0": none). It is
    # set before any code is read, and subprocesses inherit it; lowering
    # the hard limit means the code cannot raise it again without
    # CAP_SYS_RESOURCE.
    want = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0
    if want <= 0:
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and hard < want:
        want = hard
    resource.setrlimit(resource.RLIMIT_AS, (want, want))


_limit_memory()


def _take_stdio():
    # Move the protocol off fds 0 and 1 before any user code runs: the host's
    # pipes live on private, non-inheritable fds; fd 0 becomes /dev/null and
    # fd 1 a pipe that a thread forwards as "output" messages. Whatever writes
    # to fd 1 (print, os.write(1, ...), subprocesses) is output, never protocol.
    pin = os.dup(0)
    pout = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    r, w = os.pipe()
    os.dup2(w, 1)
    os.close(w)
    os.set_blocking(r, False)
    os.set_blocking(pin, False)
    return pin, pout, r


_PIN, _POUT, _OUT_R = _take_stdio()

import ast  # noqa: E402
import asyncio  # noqa: E402
import builtins  # noqa: E402
import codecs  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import keyword  # noqa: E402
import linecache  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

try:
    sys.stdout.reconfigure(encoding="utf-8")
except Exception:
    pass

# What the code writes to sys.stderr (print(..., file=sys.stderr), a
# warning, logging, a thread's traceback) is output too, in order with its
# prints: run_code answers with the output, and a model must see the
# warning or error its code reported. Descriptor 2 stays the process's
# stderr, which the host keeps for a crash's report.
sys.stderr = sys.stdout

_forked = False


def _mark_forked():
    # A process forked by the code shares the protocol descriptors; it must
    # never speak on them.
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_mark_forked)

_FLUSH_CHARS = 8192
_FLUSH_SECONDS = 0.2

_send_lock = threading.Lock()


def _send_line(data):
    data = data.encode("utf-8")
    with _send_lock:
        view = memoryview(data)
        while view:
            n = os.write(_POUT, view)
            view = view[n:]


def _send(obj):
    _send_line(json.dumps(obj) + "\n")


# ---- output forwarding ------------------------------------------------------

_out_lock = threading.Lock()
_out_buf = []
_out_len = 0
_out_eof = False
_out_last = 0.0
_decoder = codecs.getincrementaldecoder("utf-8")("replace")


def _emit_locked():
    global _out_len, _out_last
    if _out_buf:
        data = "".join(_out_buf)
        del _out_buf[:]
        _out_len = 0
        _send({"type": "output", "data": data})
    _out_last = time.monotonic()


def _drain_locked(final=False):
    # Reads whatever fd 1 holds right now; never blocks (the pipe is
    # non-blocking). The caller holds _out_lock.
    global _out_len, _out_eof
    while not _out_eof:
        try:
            chunk = os.read(_OUT_R, 65536)
        except BlockingIOError:
            break
        if not chunk:
            _out_eof = True
            break
        text = _decoder.decode(chunk)
        if text:
            _out_buf.append(text)
            _out_len += len(text)
            if _out_len >= _FLUSH_CHARS:
                _emit_locked()
    if final:
        text = _decoder.decode(b"", True)
        if text:
            _out_buf.append(text)
            _out_len += len(text)


def _flush_output(final=False):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    with _out_lock:
        _drain_locked(final)
        _emit_locked()


def _forward_output():
    while True:
        with _out_lock:
            if _out_eof:
                return
            timeout = None
            if _out_buf:
                timeout = max(0.0, _out_last + _FLUSH_SECONDS - time.monotonic())
        try:
            select.select([_OUT_R], [], [], timeout)
        except (OSError, ValueError):
            return
        with _out_lock:
            _drain_locked()
            if _out_buf and time.monotonic() - _out_last >= _FLUSH_SECONDS:
                _emit_locked()


# ---- tool calls -------------------------------------------------------------


class BubError(Exception):
    """A failed tool call; str() is the host's message, e.g. "[tool] not allowed"."""


class _Tools(types.SimpleNamespace):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(_unknown(name, sorted(n for n in vars(self) if n.isidentifier())))


# How many names an unknown tool's error lists before it points at the stub.
_MAX_LISTED = 40


def _unknown(name, known):
    # "unknown tool 'x'" and what the code can call instead: the closest
    # name, else the names (a model that guessed a name, or reached for a
    # tool it was offered directly, learns what it can do).
    msg = "unknown tool %r" % (name,)
    import difflib  # only on this error path: not worth every run's start-up

    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return msg + "; did you mean %r?" % (close[0],)
    if not known:
        return msg + "; no tools can be called from this run"
    listed = ", ".join(known[:_MAX_LISTED])
    if len(known) > _MAX_LISTED:
        listed += ", and %d more (see the stub)" % (len(known) - _MAX_LISTED)
    return (
        msg
        + "; the tools callable from code are: "
        + listed
        + ". A tool offered to you directly (outside run_code) is not callable here: call it as a tool."
    )


_pending = {}
_pending_lock = threading.Lock()
_next_id = 0


# Soft keywords get a "_" prefix too, as in the stub (pystub.Identifier).
_RESERVED = frozenset(keyword.kwlist) | {"_", "case", "match", "type"}


def _identifier(name):
    # Must match pystub.Identifier, which names the stub's functions:
    # ASCII word characters only (Python NFKC-normalizes other letters).
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not ident or ident[0].isdigit() or ident in _RESERVED:
        ident = "_" + ident
    return ident


def _make_tool(ident, name):
    quoted = json.dumps(name)

    async def tool(*args, **kwargs):
        global _next_id
        if args:
            raise TypeError("tools.%s() accepts keyword arguments only" % ident)
        if _forked:
            raise RuntimeError("tools.%s() cannot be called from a forked process" % ident)
        try:
            arguments = json.dumps(kwargs, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                "tools.%s() arguments are not JSON serializable: %s" % (ident, exc)
            ) from None
        loop = asyncio.get_running_loop()
        _ensure_reader(loop)
        future = loop.create_future()
        with _pending_lock:
            call_id = _next_id
            _next_id += 1
            _pending[call_id] = future
        try:
            _flush_output()
            _send_line(
                '{"type": "call", "id": %d, "name": %s, "arguments": %s}\n'
                % (call_id, quoted, arguments)
            )
            _spin(loop, future)
            return await future
        finally:
            with _pending_lock:
                _pending.pop(call_id, None)

    tool.__name__ = ident
    tool.__qualname__ = "tools." + ident
    return tool


# A lone call to a fast tool is answered in tens of microseconds, less
# than it takes to put this thread to sleep and wake it again (on a VM,
# an idle vCPU's wake-up is most of a nested call's round trip). So it
# polls for its reply for up to _SPIN_SECONDS before it sleeps, yielding
# the CPU between polls so that it never delays the host: only when
# nothing else is in flight or ready to run on the loop and the last call
# took under _SPIN_AFTER_SECONDS, so slow tools and asyncio.gather never
# spin.
_SPIN_SECONDS = 0.0001
_SPIN_AFTER_SECONDS = 0.001
_last_call_seconds = 0.0


def _spin(loop, future):
    start = time.perf_counter()
    if (
        loop is _main_loop
        and _last_call_seconds < _SPIN_AFTER_SECONDS
        and len(_pending) == 1
        and not getattr(loop, "_ready", True)  # CPython's queue of runnable callbacks
    ):
        deadline = start + _SPIN_SECONDS
        while not future.done() and time.perf_counter() < deadline:
            _pump()
            os.sched_yield()  # a host thread woken on this CPU runs at once

    def timed(_):
        global _last_call_seconds
        _last_call_seconds = time.perf_counter() - start

    future.add_done_callback(timed)


def _resolve(future, ok, value):
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(BubError(value))


# Replies are read where the awaiting code runs: by a reader on the run's
# own event loop, so an answered call wakes one thread once. A call made
# from another loop (asyncio.run in a thread, or code without top-level
# await) also starts a reader thread; both read the non-blocking pipe
# under _in_lock, so each reply is taken exactly once.
_in_lock = threading.Lock()
_in_buf = bytearray()
_main_loop = None
_reader_started = False


def _take_lines():
    # The complete lines read so far; the caller holds _in_lock.
    end = _in_buf.rfind(b"\n")
    if end < 0:
        return []
    lines = bytes(_in_buf[: end + 1]).splitlines()
    del _in_buf[: end + 1]
    return lines


def _fill():
    # Reads what the host has sent without blocking; the caller holds
    # _in_lock. False at EOF: the host is gone.
    while True:
        try:
            chunk = os.read(_PIN, 1 << 16)
        except BlockingIOError:
            return True
        except InterruptedError:
            continue
        if not chunk:
            return False
        _in_buf.extend(chunk)
        if len(chunk) < 1 << 16:
            return True


def _pump():
    with _in_lock:
        if not _fill():
            # Nobody will ever answer or collect output.
            os._exit(1)
        lines = _take_lines()
    for line in lines:
        _dispatch(line)


def _dispatch(line):
    try:
        msg = json.loads(line.decode("utf-8", "replace"))
        kind = msg.get("type")
        call_id = msg.get("id")
    except Exception:
        return
    with _pending_lock:
        future = _pending.get(call_id)
    if future is None:
        return
    if kind == "result":
        args = (future, True, msg.get("value"))
    elif kind == "error":
        args = (future, False, str(msg.get("message", "")))
    else:
        return
    loop = future.get_loop()
    if asyncio._get_running_loop() is loop:
        _resolve(*args)
        return
    try:
        loop.call_soon_threadsafe(_resolve, *args)
    except RuntimeError:
        pass  # the loop is closed: the code finished without awaiting


def _read_replies():
    while True:
        try:
            select.select([_PIN], [], [])
        except InterruptedError:
            continue
        _pump()


def _ensure_reader(loop):
    global _reader_started
    if loop is _main_loop or _reader_started:
        return
    with _pending_lock:
        if _reader_started:
            return
        _reader_started = True
    threading.Thread(target=_read_replies, daemon=True).start()


def _read_first():
    # The run request, the one message read before any reader exists.
    while True:
        with _in_lock:
            more = _fill()
            end = _in_buf.find(b"\n")
            if end >= 0:
                line = bytes(_in_buf[:end])
                del _in_buf[: end + 1]
                return line
            if not more:
                os._exit(0)  # stopped before a run
        select.select([_PIN], [], [])


# ---- running the code -------------------------------------------------------


def _describe(exc):
    try:
        return "%s: %s" % (type(exc).__name__, exc)
    except BaseException:
        return "%s: <unprintable %s object>" % (type(exc).__name__, type(exc).__name__)


def _format_traceback(exc, filename):
    try:
        return _format_frames(exc, filename)
    except BaseException:
        return _describe(exc) + "\n"


def _format_frames(exc, filename):
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename
    ]
    lines = []
    if frames:
        lines.append("Traceback (most recent call last):\n")
        lines.extend(traceback.format_list(frames))
    lines.extend(traceback.format_exception_only(type(exc), exc))
    return "".join(lines)


def _run(msg):
    code = msg.get("code", "")
    filename = msg.get("filename") or "<run_code>"
    tools = _Tools()
    for name in msg.get("tools") or ():
        ident = _identifier(name)
        fn = _make_tool(ident, name)
        setattr(tools, ident, fn)
        if name != ident:
            setattr(tools, name, fn)
    namespace = {"__name__": "__run_code__", "__builtins__": builtins, "tools": tools}
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)

    global _main_loop
    try:
        compiled = compile(
            code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
        )
        if compiled.co_flags & inspect.CO_COROUTINE:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            _main_loop = loop
            loop.add_reader(_PIN, _pump)
            loop.run_until_complete(eval(compiled, namespace))
        else:
            exec(compiled, namespace)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt included
        if _forked:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        _flush_output(final=True)
        _send(
            {
                "type": "failed",
                "error": _describe(exc),
                "traceback": _format_traceback(exc, filename),
            }
        )
    else:
        if _forked:
            sys.stdout.flush()
            os._exit(0)
        _flush_output(final=True)
        _send({"type": "done"})


def _main():
    threading.Thread(target=_forward_output, daemon=True).start()
    _send({"type": "ready"})
    msg = json.loads(_read_first().decode("utf-8", "replace"))
    try:
        _run(msg)
    finally:
        os._exit(0)


_main()
