# bub-mcp code-mode fork server: one interpreter per environment that has
# done the child's imports and forks a fresh child for every run, so that
# any number of concurrent runs start warm. Standard library only;
# Python >= 3.8. The host side and the protocol are in forkserver.go.
#
# argv: [-c, child source]. Descriptor 3 is a SOCK_SEQPACKET Unix socket to
# the host, whose first packet is the configuration; nothing is read from
# stdin or written to stdout.
import os
import sys

import json  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402

# What the child imports, done once here so that each fork has it.
import ast  # noqa: E402,F401
import asyncio  # noqa: E402,F401
import builtins  # noqa: E402,F401
import codecs  # noqa: E402,F401
import inspect  # noqa: E402,F401
import keyword  # noqa: E402,F401
import linecache  # noqa: E402,F401
import re  # noqa: E402,F401
import resource  # noqa: E402,F401
import threading  # noqa: E402,F401
import time  # noqa: E402,F401
import traceback  # noqa: E402,F401
import types  # noqa: E402,F401

_zy_child_code = compile(sys.argv[1], "<bub-mcp child>", "exec")
_zy_ctl = socket.socket(fileno=3)
try:
    _zy_conf = json.loads(_zy_ctl.recv(65536).decode("utf-8"))
except Exception:
    os._exit(1)
_zy_memory = str(int(_zy_conf.get("memory") or 0))

_ZY_CLONE = {
    "mount": 0x00020000,
    "uts": 0x04000000,
    "ipc": 0x08000000,
    "pid": 0x20000000,
    "net": 0x40000000,
}
_zy_unshare = 0
for _zy_ns in _zy_conf.get("unshare") or ():
    _zy_unshare |= _ZY_CLONE[_zy_ns]
_zy_libc = None
if _zy_unshare:
    import ctypes
    import errno
    import fcntl

    _zy_libc = ctypes.CDLL(None, use_errno=True)
    _zy_own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)


class _ZyFailed(Exception):
    pass


def _zy_check(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise _ZyFailed("%s: %s" % (what, os.strerror(e)))


def _zy_send(obj):
    try:
        _zy_ctl.send(json.dumps(obj).encode("utf-8"))
    except OSError:
        os._exit(0)  # the host is gone


def _zy_close_all_but(keep):
    # /proc/self/fd rather than closerange up to the descriptor limit, which
    # is slow on Pythons without close_range.
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        names = [str(fd) for fd in range(3, 1024)]
    for name in names:
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _zy_hello(run):
    # The host reads this process's pid (in its own pid namespace) from the
    # credentials the kernel attaches, puts the process where its tree can
    # be killed, and answers "go"; nothing else runs before that.
    os.write(run, b"hello")
    if os.read(run, 16) != b"go":
        os._exit(1)
    os.close(run)


def _zy_exec_child():
    sys.argv = ["-c", _zy_memory]
    main = sys.modules["__main__"]
    exec(_zy_child_code, main.__dict__)
    os._exit(0)


def _zy_drop_caps():
    # The fork server keeps CAP_SYS_ADMIN (and CAP_NET_ADMIN, CAP_SETPCAP)
    # in the sandbox's user namespace to make each run's namespaces; the
    # run gets none, and cannot regain any by exec (no_new_privs).
    libc = _zy_libc
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            if ctypes.get_errno() == errno.EINVAL:
                break
            _zy_check(-1, "drop bounding capability %d" % cap)
    _zy_check(libc.prctl(47, 4, 0, 0, 0), "clear ambient capabilities")
    hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (ctypes.c_uint32 * 6)()
    _zy_check(libc.capset(hdr, data), "capset")
    _zy_check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")  # PR_SET_NO_NEW_PRIVS
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")):
                if int(line.split()[1], 16) != 0:
                    raise _ZyFailed("capabilities left after dropping: " + line.strip())


def _zy_loopback_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0))  # SIOCGIFFLAGS
        flags = struct.unpack("16sH", ifr[:18])[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
    finally:
        s.close()


def _zy_status(st):
    if os.WIFSIGNALED(st):
        return 128 + os.WTERMSIG(st)
    return os.WEXITSTATUS(st)


_ZY_FD_SIZE = struct.calcsize("i")


def _zy_worker(spare):
    # The interpreter-to-be, made ahead: it waits for its run's pipes and
    # per-run socket, makes them its 0, 1 and 2, and says hello.
    msg, anc, _, _ = spare.recvmsg(16, socket.CMSG_SPACE(8 * _ZY_FD_SIZE))
    if msg == b"probe":
        spare.send(b"ok")
        os._exit(0)
    fds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            n = len(data) - len(data) % _ZY_FD_SIZE
            fds.extend(struct.unpack("%di" % (n // _ZY_FD_SIZE), data[:n]))
    if msg != b"run" or len(fds) != 4:
        os._exit(0)  # the fork server is gone, or it is stopping spares
    spare.close()
    for i in range(3):
        os.dup2(fds[i], i)
    for fd in fds[:3]:
        if fd > 2:
            os.close(fd)
    _zy_hello(fds[3])
    _zy_exec_child()


def _zy_release_stdio(keep_err=False):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1) if keep_err else (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _zy_init(spare):
    # Pid 1 of the run's pid namespace, as bubblewrap's own pid 1 is for a
    # spawned command: it reaps orphans, and when the interpreter exits so
    # does it, and the kernel kills everything left in the namespace.
    libc = _zy_libc
    _zy_check(libc.prctl(1, signal.SIGKILL, 0, 0, 0), "parent death signal")  # PR_SET_PDEATHSIG
    if _zy_unshare & _ZY_CLONE["mount"]:
        # A /proc of the run's own pid namespace: no other run's processes
        # are visible.
        _zy_check(libc.mount(b"proc", b"/proc", b"proc", 2 | 4 | 8, None), "mount /proc")
    _zy_drop_caps()
    worker = os.fork()
    if worker == 0:
        os.setsid()
        _zy_worker(spare)
    spare.close()
    _zy_release_stdio()

    def forward(signum, frame):
        try:
            os.kill(worker, signum)
        except OSError:
            pass

    signal.signal(signal.SIGTERM, forward)
    while True:
        try:
            pid, st = os.wait()
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == worker:
            os._exit(_zy_status(st))


def _zy_pid1(spare):
    # Pid 1 of the run's new pid namespace (the fork server forked it
    # there, see _zy_make_spare): it makes the run's other namespaces for
    # itself, then serves as the run's init.
    os.setsid()
    _zy_check(_zy_libc.unshare(_zy_unshare & ~_ZY_CLONE["pid"]), "unshare")
    if _zy_unshare & _ZY_CLONE["mount"]:
        _zy_check(_zy_libc.mount(None, b"/", None, 16384 | 262144, None), "make / private")
    if _zy_unshare & _ZY_CLONE["net"]:
        _zy_loopback_up()
    _zy_init(spare)


def _zy_spare_main(spare):
    # In the fork: nothing the fork server holds stays open but stdio and
    # this spare's socket.
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _zy_close_all_but({0, 1, 2, spare.fileno()})
        if _zy_unshare:
            _zy_pid1(spare)
        else:
            os.setsid()
            _zy_worker(spare)
    except BaseException as exc:
        try:
            os.write(2, ("bub-mcp fork server: %s\n" % (exc,)).encode("utf-8", "replace"))
        except OSError:
            pass
    os._exit(125)


def _zy_make_spare():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = _zy_fork_spare()
    except OSError:
        a.close()
        b.close()
        return None
    if pid == 0:
        a.close()
        _zy_spare_main(b)
    b.close()
    return (pid, a)


def _zy_fork_spare():
    # With a pid namespace per run, the spare is forked straight into a
    # new one, as its pid 1: unshare(CLONE_NEWPID) changes only where the
    # fork server's next child goes, and setns puts that back to its own
    # namespace. One process fewer per run than forking an intermediate to
    # unshare (a fork and exit of this interpreter is ~1 ms of CPU here).
    if not _zy_unshare & _ZY_CLONE["pid"]:
        return os.fork()
    if _zy_libc.unshare(_ZY_CLONE["pid"]) != 0:
        raise OSError(ctypes.get_errno(), "unshare CLONE_NEWPID")
    try:
        pid = os.fork()
    except OSError:
        _zy_pidns_back()
        raise
    if pid != 0:
        _zy_pidns_back()
    return pid


def _zy_pidns_back():
    if _zy_libc.setns(_zy_own_pidns, _ZY_CLONE["pid"]) != 0:
        # Every later fork would land in that namespace: stop.
        os.write(2, b"bub-mcp fork server: setns: %s\n" % os.strerror(ctypes.get_errno()).encode())
        os._exit(1)


def _zy_probe():
    # Make one run's namespaces now, so that a sandbox that cannot is
    # reported at start-up and the host spawns each run instead.
    spare = _zy_make_spare()
    if spare is None:
        return "fork failed"
    pid, sock = spare
    try:
        sock.send(b"probe")
        ok = sock.recv(16) == b"ok"
    except OSError:
        ok = False
    sock.close()
    _, st = os.waitpid(pid, 0)
    if not ok or _zy_status(st) != 0:
        return "a run's namespaces could not be made (exit status %d; see its stderr)" % _zy_status(st)
    return None


def _zy_main():
    if _zy_unshare:
        err = _zy_probe()
        if err:
            _zy_send({"type": "unavailable", "error": err})
            os._exit(1)
    want = max(1, int(_zy_conf.get("spares") or 1))
    spares = []  # [(pid, socket)]: forked ahead, waiting for a run
    children = {}  # pid -> run id, for each run in progress
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w)
    _zy_send({"type": "ready"})
    while True:
        # Spares are made only when nothing is waiting, so that a request
        # never waits for one that is not its own.
        timeout = 0 if len(spares) < want else None
        try:
            ready, _, _ = select.select([_zy_ctl, wake_r], [], [], timeout)
        except InterruptedError:
            continue
        if not ready:
            spare = _zy_make_spare()
            if spare is not None:
                spares.append(spare)
                _zy_send({"type": "spares", "n": len(spares)})
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            while True:
                try:
                    pid, st = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                for i, (spid, sock) in enumerate(spares):
                    if spid == pid:
                        sock.close()
                        del spares[i]
                        break
                run_id = children.pop(pid, None)
                if run_id is None:
                    continue
                if os.WIFSIGNALED(st):
                    _zy_send({"type": "exit", "id": run_id, "code": -os.WTERMSIG(st)})
                else:
                    _zy_report(run_id, os.WEXITSTATUS(st))
        if _zy_ctl in ready:
            try:
                msg, anc, _, _ = _zy_ctl.recvmsg(4096, socket.CMSG_SPACE(8 * _ZY_FD_SIZE))
            except InterruptedError:
                continue
            except OSError:
                os._exit(0)
            if not msg:
                os._exit(0)  # the host closed its end
            fds = []
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    n = len(data) - len(data) % _ZY_FD_SIZE
                    fds.extend(struct.unpack("%di" % (n // _ZY_FD_SIZE), data[:n]))
            try:
                run_id = int(json.loads(msg.decode("utf-8"))["id"])
            except Exception:
                run_id = None
            if run_id is not None and len(fds) == 4:
                _zy_assign(run_id, fds, spares, children)
                _zy_send({"type": "spares", "n": len(spares)})
            elif run_id is not None:
                _zy_send({"type": "fail", "id": run_id, "error": "want 4 descriptors, got %d" % len(fds)})
            for fd in fds:
                os.close(fd)


def _zy_report(run_id, code):
    if _zy_unshare and code > 128:
        code = 128 - code  # the run's pid 1 passes a signal on as 128+N
    _zy_send({"type": "exit", "id": run_id, "code": code})


def _zy_assign(run_id, fds, spares, children):
    # Hands the run to a spare, forking one if none is left.
    for _ in range(3):
        if not spares:
            spare = _zy_make_spare()
            if spare is None:
                break
            spares.append(spare)
        pid, sock = spares.pop(0)
        try:
            sock.sendmsg([b"run"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("4i", *fds))])
        except OSError:
            sock.close()  # it died; it is reaped as a spare
            continue
        sock.close()  # the message stays queued for the spare
        children[pid] = run_id
        return
    _zy_send({"type": "fail", "id": run_id, "error": "no child could be forked"})


_zy_main()
