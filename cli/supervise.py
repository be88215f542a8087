"""Running numaprof-collect so that the program cannot tell it is being recorded.

* Descriptors: every descriptor numaprof record inherited (make's jobserver, MPI's PMI_FD,
  a socket from systemd) reaches the program at the same number, as in a plain run.
  Python makes the descriptors it opens close-on-exec (PEP 446), and the collector marks
  the two it is given (--error-fd, --control-fd) close-on-exec too, so the program gets
  exactly the caller's.
* Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT reach the program as in a plain run: a
  signal sent to the process group reaches it directly, and one sent to numaprof record's
  pid is passed on, once.  numaprof record takes each one it gets with sigwaitinfo and
  relays it through the control socket; the collector, which also sees the group's
  signals, tells the two apart (collector/src/signals.c).  A signal the caller
  ignores stays ignored, so the program inherits it ignored as in a plain run.
* Death of the collector (the out-of-memory killer, kill -9): numaprof record is the
  program's child subreaper (prctl PR_SET_CHILD_SUBREAPER), so the program, orphaned,
  becomes its child instead of init's; record says so in one line, lets the program run to
  its end, passes signals on, and exits with the program's status.  The program is not
  killed: a recording that failed is no reason to lose the user's run.
* Started by the launcher: the native `numaprof` (collector/launcher/numaprof.c) may have
  forked the collector itself before executing the CLI; record then adopts it (the same
  process, made subreaper, the signals blocked across the exec) and supervises it alike.
* Death of numaprof record: the collector sees the control socket close, stops recording,
  writes what it has, and exits; the program goes on (docs/record.md).
"""

from __future__ import annotations

import os
import signal
from collections import namedtuple

from numaprof.errors import NumaprofError

COLLECTOR_FAILED = 125
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
SI_USER, SI_KERNEL = 0, 0x80  # <asm-generic/siginfo.h>


#: How a run of numaprof-collect ended: status (the collector's exit status; -N if it was
#: killed by signal N), said (its one line of failure, "" if none), program_pid (the
#: program's pid, as the collector reported it), program_status (set when record itself
#: waited for the program), kept (whether the collector kept the previous profile as
#: <dir>.old; None if it made no profile directory).  A namedtuple: typing is 2 ms of
#: imports before the program.
CollectorRun = namedtuple("CollectorRun", ["status", "said", "program_pid", "program_status", "kept"])


def _become_subreaper() -> bool:
    import ctypes  # 3 ms of imports: not on the way of a launched recording

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128+N for signal N."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class _Control:
    """numaprof record's end of the control socket: the collector's lines ("out K" once
    it made the profile directory, K 1 if it kept the previous profile as <dir>.old;
    "pid N" once the program runs), and the signals relayed to it."""

    def __init__(self, fd: int):
        self.fd = fd  # a stream socket, read and written as a file (no socket module)
        self.blocking = True
        self.buf = b""
        self.pid: int | None = None
        self.kept: bool | None = None  # set once the collector made the directory
        self.closed = False

    def relay(self, signum: int) -> bool:
        try:
            os.write(self.fd, bytes([signum]))
        except OSError:
            return False  # the collector is gone (Python ignores SIGPIPE: EPIPE)
        return True

    def close(self) -> None:
        os.close(self.fd)

    def _read(self, block: bool) -> bool:
        """Reads once what the collector wrote (waiting for it if `block`); False when
        nothing more is there now, or at its end of file."""
        if self.closed:
            return False
        try:
            if block != self.blocking:
                os.set_blocking(self.fd, block)
                self.blocking = block
            chunk = os.read(self.fd, 256)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self.closed = True
            return False
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            word, _, value = line.partition(b" ")
            if word == b"pid" and value.isdigit():
                self.pid = int(value)
            elif word == b"out" and value in (b"0", b"1"):
                self.kept = value == b"1"
        return True

    def program_pid(self) -> int | None:
        """The program's pid once the collector has said it (never blocks)."""
        while self.pid is None and self._read(False):
            pass
        return self.pid

    def output_made(self) -> bool | None:
        """Waits until the collector has made the profile directory: whether it kept the
        previous profile as <dir>.old; None if it ended without making it."""
        while self.kept is None and self._read(True):
            pass
        return self.kept


def _group_signal(info) -> bool:
    """Whether a stopping signal numaprof record received was sent to its process group
    (which the program got as well, if it is in the group): one from the terminal, or one
    sent to the group by a process of the group (timeout, kill 0).  Without the collector
    as a witness, a signal sent to the group from outside it cannot be told from one sent
    to numaprof record alone: it is passed on (docs/record.md)."""
    if info.si_code == SI_KERNEL:
        return True
    try:
        return (info.si_code == SI_USER and info.si_pid > 0
                and os.getpgid(info.si_pid) == os.getpgrp())
    except OSError:
        return False


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Supervisor:
    """The wait of numaprof record: its signals and its children, one at a time.

    The stopping signals and SIGCHLD are blocked and taken with sigwaitinfo, so that each
    signal comes with who sent it: relayed to the collector while it lives, passed on to
    the program by record itself after the collector died.
    """

    def __init__(self, pid: int, control: _Control, relayed: tuple[int, ...], on_collector_death):
        self.pid = pid
        self.control = control
        self.relayed = relayed
        self.on_collector_death = on_collector_death
        self.collector_rc: int | None = None
        self.program_status: int | None = None
        self.unrelayed: list = []  # signals that came as the collector died

    def _reap(self) -> None:
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            if info.si_pid == self.pid:
                _, status = os.waitpid(self.pid, 0)
                self.collector_rc = os.waitstatus_to_exitcode(status)
                continue
            # an orphan adopted as subreaper; the program itself once the collector died;
            # or a child of one of record's threads, which may have reaped it since
            try:
                _, status = os.waitpid(info.si_pid, 0)
            except ChildProcessError:
                continue
            if info.si_pid == self.control.program_pid():
                self.program_status = _exit_code(status)

    def _pass_on(self, info) -> None:
        pid = self.control.program_pid()
        if info.si_signo not in STOP_SIGNALS:
            return  # record's own (SIGUSR2: the next slice), not the program's
        if pid is not None and not _group_signal(info):
            try:
                os.kill(pid, info.si_signo)
            except ProcessLookupError:
                pass

    def run(self) -> None:
        waited = (*self.relayed, signal.SIGCHLD)
        announced = False
        while True:
            self._reap()
            if self.collector_rc is not None:
                pid = self.control.program_pid()
                if (self.collector_rc >= 0 or pid is None or self.program_status is not None
                        or not process_alive(pid)):
                    return
                if not announced:  # the collector was killed; the program goes on
                    announced = True
                    if self.on_collector_death is not None:
                        self.on_collector_death(-self.collector_rc, pid)
                    for info in self.unrelayed:
                        self._pass_on(info)
            # not our child (no subreaper): its end is seen by polling
            adopted = self.collector_rc is None or _parent_of(pid) == os.getpid()
            info = signal.sigwaitinfo(waited) if adopted else signal.sigtimedwait(waited, 0.5)
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            if self.collector_rc is not None:
                self._pass_on(info)
            elif not self.control.relay(info.si_signo):
                self.unrelayed.append(info)  # the collector is dying: seen next round


def _running(pid: int) -> bool:
    """Whether child `pid` has not exited yet (it is left to be reaped)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


#: What Python itself ignores (SIGPIPE, SIGXFSZ), which a plain run of the program would not.
_PYTHON_IGNORED = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ")
                        if hasattr(signal, name))


def _spawn(argv: list[str]) -> int:
    """Starts `argv` in a child with every descriptor this process inherited (see the module
    docstring) and returns its pid; OSError if it cannot be executed.

    fork and exec rather than the subprocess module (3 ms of imports before the program
    starts) or posix_spawn, whose glibc child leaves glibc's internal signals 32 and 33
    ignored (sysdeps/unix/sysv/linux/spawni.c): the program would inherit that.  No thread
    runs yet, so the child may run Python until its exec.
    """
    rfd, wfd = os.pipe2(os.O_CLOEXEC)
    try:
        pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        raise
    if pid == 0:  # the child: an exec, or its errno back to the parent and an exit
        try:
            os.close(rfd)
            for s in _PYTHON_IGNORED:
                signal.signal(s, signal.SIG_DFL)
            os.execv(argv[0], argv)
        except OSError as e:
            os.write(wfd, str(e.errno or 0).encode())
        finally:
            os._exit(127)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:  # closed by the exec, or holding the errno
        failed = f.read()
    if failed:
        os.waitpid(pid, 0)
        code = int(failed) if failed.isdigit() else 0
        raise OSError(code, os.strerror(code))
    return pid


def run_collector(argv: list[str], on_collector_death=None, also_relay: tuple[int, ...] = (),
                  on_started=None, launched: tuple[int, int, int] | None = None,
                  on_spawned=None) -> CollectorRun:
    """Runs numaprof-collect `argv` (see the module docstring for what the program sees).

    `on_collector_death(signal_number, program_pid)` is called when the collector was
    killed while the program still runs, before record waits for the program.
    `on_started(kept, running)` is called once the collector has made the profile
    directory (kept: whether the previous profile is now <dir>.old; None if it ended
    without making it; running: whether it still runs), with the stopping signals and
    SIGCHLD blocked (a thread it starts inherits that mask): work that can wait for the
    program's start is not on its way.  `on_spawned()` is called before that, as soon as
    the collector runs (the same mask): work that needs no profile directory and should
    not wait for it (attach mode's reading of the heap, which the program runs on from).
    `also_relay`: signals besides the stopping ones that end the collector's recording
    of an attached process (SIGUSR2 for `--switch-output`); never passed on to the program.
    `launched`: (pid, control descriptor, error descriptor) of a collector that the
    native `numaprof` launcher started before it executed this interpreter: adopted
    instead of started.  The launcher made this process the subreaper and blocked the
    signals relayed here and SIGCHLD before its exec, so none is lost meanwhile.
    """
    # a signal the caller ignores stays ignored (the program inherits that through exec)
    relayed = tuple(s for s in STOP_SIGNALS if signal.getsignal(s) != signal.SIG_IGN) + tuple(also_relay)
    if launched is not None:
        pid, ctl, rfd = launched
        return _supervise(pid, _Control(ctl), relayed, rfd, (on_spawned, on_started),
                          on_collector_death, {})
    try:
        rfd, wfd = os.pipe()
    except OSError as e:
        raise NumaprofError(f"cannot start the collector: {e.strerror}", COLLECTOR_FAILED) from e
    import socket  # 5 ms of imports: not on the way of a launched recording

    try:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as e:
        os.close(rfd)
        os.close(wfd)
        raise NumaprofError(f"cannot start the collector: {e.strerror}", COLLECTOR_FAILED) from e
    control = _Control(mine.detach())
    argv = [argv[0], "--error-fd", str(wfd), "--control-fd", str(theirs.fileno()), *argv[1:]]
    _become_subreaper()
    # the handlers serve only until the signals are blocked, just after the start
    previous = {s: signal.signal(s, lambda signum, _frame: control.relay(signum))
                for s in relayed}
    try:
        os.set_inheritable(wfd, True)
        os.set_inheritable(theirs.fileno(), True)
        pid = _spawn(argv)
    except OSError as e:
        os.close(rfd)
        for s, h in previous.items():
            signal.signal(s, h)
        control.close()
        raise NumaprofError(f"cannot run the collector {argv[0]}: {e.strerror}",
                            COLLECTOR_FAILED) from e
    finally:
        os.close(wfd)
        theirs.close()
    return _supervise(pid, control, relayed, rfd, (on_spawned, on_started), on_collector_death,
                      previous)


def _supervise(pid: int, control: _Control, relayed: tuple[int, ...], rfd: int, callbacks,
               on_collector_death, previous: dict) -> CollectorRun:
    """The wait for collector `pid` (started or adopted), to its end; `callbacks`:
    (on_spawned, on_started) of run_collector; `previous`: the signal handlers to restore
    after it."""
    on_spawned, on_started = callbacks
    try:
        # blocked only now: the collector must not inherit the mask (it hands its own on)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, (*relayed, signal.SIGCHLD))
        try:
            if on_spawned is not None:
                on_spawned()
            kept = control.output_made()
            if on_started is not None:
                on_started(kept, _running(pid))
            sup = _Supervisor(pid, control, relayed, on_collector_death)
            sup.run()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        control.close()
    with os.fdopen(rfd, "rb") as f:  # the collector has exited: its write end is closed
        said = f.read(4096).decode(errors="replace").strip()
    said = said.removeprefix("numaprof: ").splitlines()[0] if said else ""
    return CollectorRun(sup.collector_rc, said, control.program_pid(), sup.program_status, kept)
