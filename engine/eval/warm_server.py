"""The warm sandbox's interpreter: `python -I -B warm_server.py CONTROL_FD`, started once inside
the same bubblewrap confinement as a cold run, as pid 1 of its pid namespace (bwrap
--as-pid-1). It imports what the harness imports and compiles the harness once, then runs
one program per request in a fresh child it forks. See engine/eval/warm_sandbox.h and
docs/sandbox.md.

Why each piece:
- pid 1: the kernel drops every signal a process of the namespace sends to its init unless
  init handles it, so a candidate cannot kill this process (os.kill(os.getppid(), 9)); and
  kill(-1) from it reaches every other process of the namespace, also ones that left the
  child's session, so nothing a candidate started outlives its run.
- not dumpable: candidates run as the same uid, without capabilities; a process that is not
  dumpable cannot be ptraced or read through /proc/1/mem, fd, environ by them.
- one run at a time: concurrent runs each have a warm process of their own, so a candidate
  cannot see or signal another candidate's processes.
- after every run the places a candidate can write are put back (/work emptied, /dev as it
  was, /dev/shm emptied, System V IPC objects removed); where /dev cannot be put back (an
  entry replaced) the process reports itself tainted and exits, and the engine starts a new
  one for the next run.

Protocol on CONTROL_FD (a Unix stream socket to the engine):
- this process writes "ready\\n" once it can take requests;
- a request: "R" and 8 bytes (little-endian length N) sent with three descriptors
  (SCM_RIGHTS: the run's stdout, stderr and report channel), then N bytes of fields, each a 4-byte
  little-endian length and its bytes: the limits as JSON, the main file's name, the number
  of arguments, the arguments, the number of files, then name and content of each;
- while a run is going, one byte "k" from the engine kills it (its output passed the cap);
  one that arrives after the run ended is skipped;
- the answer: one line of JSON, {"exit": E, "timed_out": B, "tainted": B}, E the exit
  status as bubblewrap reports it (128 + the signal for a signal death), or
  {"error": "..."} when the run could not be set up.
End of file on the socket ends this process.
"""
import __future__  # noqa: F401  (what the harness imports, imported once here)
import ast  # noqa: F401
import copy  # noqa: F401
import ctypes
import doctest  # noqa: F401
import hashlib  # noqa: F401
import importlib
import io  # noqa: F401
import itertools  # noqa: F401
import json
import math
import os
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import time
import traceback  # noqa: F401

WORK = "/work"
SCRATCH = WORK + "/run"  # each run's own directory: made fresh, removed after
PRELOAD = WORK + "/preload.py"  # the harness: compiled once, as SCRATCH/main.py
SERVER = WORK + "/warm_server.py"
FILTER = WORK + "/child_filter.bpf"  # a seccomp program every child installs (see below)
DEFAULT_RECURSION = sys.getrecursionlimit()

libc = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 4, 38, 22, 2
IPC_RMID = 0


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def read_exact(sock, n):
    parts, got = [], 0
    while got < n:
        part = sock.recv(min(n - got, 1 << 20))
        if not part:
            return None
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def receive(sock):
    """(fields, [out, err, chan]) of the next request; None at end of file."""
    while True:  # a "k" the engine sent as the last run ended is late: skip it
        mark, fds, _, _ = socket.recv_fds(sock, 1, 3)
        if not mark:
            return None
        if mark == b"R":
            break
        for fd in fds:
            os.close(fd)
    head = read_exact(sock, 8)
    if head is None:
        for fd in fds:
            os.close(fd)
        return None
    (length,) = struct.unpack("<Q", head)
    body = read_exact(sock, length)
    if body is None or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    fields, at = [], 0
    while at < len(body):
        (size,) = struct.unpack_from("<I", body, at)
        fields.append(body[at + 4: at + 4 + size])
        at += 4 + size
    return fields, fds


def parse(fields):
    limits = json.loads(fields[0])
    main_file = fields[1].decode()
    n_args = int(fields[2])
    args = [a.decode("utf-8", "surrogateescape") for a in fields[3: 3 + n_args]]
    n_files = int(fields[3 + n_args])
    at = 4 + n_args
    files = [(fields[at + 2 * i].decode(), fields[at + 2 * i + 1]) for i in range(n_files)]
    return limits, main_file, args, files


# --- The child: one run ----------------------------------------------------------------

def set_limit(which, value):
    resource.setrlimit(which, (value, value))


def install_filter(program):
    if not program:
        return
    fprog = SockFprog(len(program) // 8, program)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")


def frame_depth():
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def exit_status(error):
    """The exit status Python gives an uncaught SystemExit."""
    code = error.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def become_run(limits, fds, devnull, program_filter):
    """What a fresh interpreter under bubblewrap would be: its own session, descriptors 0-3
    only, the run's rlimits, environment, directory, arguments and signal dispositions."""
    os.setsid()
    os.dup2(devnull, 0)
    for target, fd in zip((1, 2, 3), fds):
        os.dup2(fd, target)
    os.closerange(4, 65536)
    wall = float(limits["wall_seconds"])
    cpu = int(limits["cpu_seconds"]) or math.ceil(wall) + 1
    set_limit(resource.RLIMIT_CPU, cpu)
    set_limit(resource.RLIMIT_AS, int(limits["memory_bytes"]))
    set_limit(resource.RLIMIT_FSIZE, int(limits["max_file_bytes"]))
    set_limit(resource.RLIMIT_NOFILE, int(limits["max_open_files"]))
    set_limit(resource.RLIMIT_CORE, 0)
    # Counted in the namespace: this server and the run's processes, as the cold path counts
    # bubblewrap's init and the run's.
    set_limit(resource.RLIMIT_NPROC, int(limits["max_processes"]))
    install_filter(program_filter)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as a fresh interpreter is
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(SCRATCH)
    os.environ.clear()
    os.environ.update({"PATH": "/usr/bin:/bin", "HOME": SCRATCH, "TMPDIR": SCRATCH,
                       "LC_ALL": "C.UTF-8", "PWD": SCRATCH})


def run_child(limits, main_file, args, code, fds, devnull, program_filter):
    """Runs `main_file` as __main__ (never returns)."""
    status = 1
    try:
        become_run(limits, fds, devnull, program_filter)
        path = SCRATCH + "/" + main_file
        if code is None:
            with open(path, "rb") as f:
                code = compile(f.read(), path, "exec", dont_inherit=True)
        main = type(sys)("__main__")
        main.__file__ = path
        main.__builtins__ = __builtins__
        main.__cached__ = None
        sys.modules["__main__"] = main
        sys.argv = [main_file] + args  # (-I: no script directory on sys.path, as in a cold run)
        importlib.invalidate_caches()
        # The run's frames start where a fresh interpreter's would: as deep as it may recurse.
        sys.setrecursionlimit(DEFAULT_RECURSION + frame_depth())
        try:
            exec(code, main.__dict__)
            status = 0
        except SystemExit as error:
            status = exit_status(error)
        except BaseException as error:
            sys.excepthook(type(error), error, error.__traceback__.tb_next)
            status = 1
        # What interpreter shutdown does: wait for threads, run atexit, flush.
        try:
            import threading
            threading._shutdown()
        except BaseException:
            pass
        try:
            import atexit
            atexit._run_exitfuncs()
        except BaseException:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                status = 120 if status == 0 else status
    except BaseException:
        try:
            traceback.print_exc()
        except BaseException:
            pass
        status = 127
    os._exit(status)


# --- The server --------------------------------------------------------------------------

def kill_everything():
    """Kills every process of the namespace but this one and reaps them all; returns the
    wait statuses by pid."""
    statuses = {}
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return statuses
        statuses[pid] = status
        while pid:  # reap every other one that is dead by now, then kill again
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return statuses
            if pid:
                statuses[pid] = status


def empty(path):
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass


def identity(path):
    info = os.lstat(path)
    return (info.st_ino, info.st_mode, info.st_uid, info.st_rdev)


def dev_state():
    return {name: identity("/dev/" + name) for name in os.listdir("/dev")}


def remove_ipc():
    """System V IPC objects outlive their processes (the namespace is this server's, not the
    run's): remove every one."""
    for kind, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                         ("msg", lambda i: libc.msgctl(i, IPC_RMID, None)),
                         ("sem", lambda i: libc.semctl(i, 0, IPC_RMID))):
        try:
            with open("/proc/sysvipc/" + kind) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            words = line.split()
            if len(words) > 1:
                remove(int(words[1]))


def restore(initial_dev):
    """Puts back what a run may have changed; False when /dev cannot be put back."""
    empty(WORK)
    empty("/dev/shm")
    remove_ipc()
    for name in set(os.listdir("/dev")) - set(initial_dev):
        full = "/dev/" + name
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass
    try:
        return dev_state() == initial_dev and not os.listdir(WORK) and not os.listdir("/dev/shm")
    except OSError:
        return False


def serve(sock, request, compiled, devnull, program_filter, initial_dev):
    fields, fds = request
    try:
        limits, main_file, args, files = parse(fields)
        os.mkdir(SCRATCH, 0o700)
        for name, content in files:
            with open(SCRATCH + "/" + name, "xb") as f:
                f.write(content)
        main_content = dict(files).get(main_file)
        code = compiled[1] if main_content is not None and main_content == compiled[0] else None
    except Exception as error:
        for fd in fds:
            os.close(fd)
        restore(initial_dev)
        return {"error": "cannot set up the run: %r" % (error,)}
    pid = os.fork()
    if pid == 0:
        sock.close()
        run_child(limits, main_file, args, code, fds, devnull, program_filter)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    deadline = time.monotonic() + float(limits["wall_seconds"])
    timed_out, engine_gone = False, False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([sock, pidfd], [], [], left)
        if pidfd in ready:
            break
        if sock in ready:
            engine_gone = sock.recv(1) != b"k"
            break
    os.close(pidfd)
    statuses = kill_everything()
    status = statuses.get(pid, 0)
    if engine_gone:
        sys.exit(0)
    clean = restore(initial_dev)
    if os.WIFSIGNALED(status):
        exit = 128 + os.WTERMSIG(status)
    else:
        exit = os.WEXITSTATUS(status)
    return {"exit": exit, "timed_out": timed_out, "tainted": not clean}


def main():
    sock = socket.socket(fileno=int(sys.argv[1]))
    sock.setblocking(True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    # pid 1 ignores what it does not handle; Python handles SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    with open(PRELOAD, "rb") as f:
        preload = f.read()
    compiled = (preload, compile(preload, SCRATCH + "/main.py", "exec", dont_inherit=True))
    try:
        with open(FILTER, "rb") as f:
            program_filter = f.read()
    except OSError:
        program_filter = b""
    for path in (PRELOAD, SERVER, FILTER):
        try:
            os.unlink(path)
        except OSError:
            pass
    devnull = os.open("/dev/null", os.O_RDONLY)
    initial_dev = dev_state()
    if not restore(initial_dev):
        sys.stderr.write("warm sandbox: /work or /dev is not as expected\n")
        return 1
    # Nothing of this process writes to its own stdout and stderr from here on.
    sys.stdout.flush()
    sys.stderr.flush()
    sock.sendall(b"ready\n")
    quiet = os.open("/dev/null", os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    os.close(quiet)
    while True:
        request = receive(sock)
        if request is None:
            return 0
        answer = serve(sock, request, compiled, devnull, program_filter, initial_dev)
        sock.sendall((json.dumps(answer) + "\n").encode())
        if answer.get("tainted"):
            return 0


if __name__ == "__main__":
    sys.exit(main())
