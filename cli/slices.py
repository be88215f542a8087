"""`record --switch-output`: a recording in slices, one whole profile each
(docs/record.md, "Long runs in slices").

A running process (`-p PID`) is attached to, sampled, its heap read, and detached from,
slice after slice.  A COMMAND is started first, with the allocation shim, then recorded
the same way, its allocations from the shim instead of its heap: its exit status is
numaprof record's, as when it is recorded whole.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from numaprof import paths
from numaprof.cli.record import SIGNAL_ONLY
from numaprof.cli.recording import RecordConfig, run_record
from numaprof.cli.supervise import STOP_SIGNALS, process_alive
from numaprof.errors import NumaprofError


def slice_path(output: Path, k: int) -> Path:
    """The profile of slice ``k`` (from 1) of `--switch-output`: prof.data.0001, ..."""
    return output.with_name(f"{output.name}.{k:04d}")


def run_slices(cfg: RecordConfig, every, argv: list[str], release_fd: int | None = None) -> int:
    """`record -p PID --switch-output SECONDS|signal`: one whole profile per slice
    (attach, sample, read the heap, detach), one after the other, until the process ends,
    --duration (the whole) passes, or a slice is stopped (Ctrl-C).  A slice ends after
    SECONDS, or when numaprof record gets SIGUSR2 (perf record's --switch-output=signal):
    then the next one starts.  Between two slices the collector detaches and attaches
    again: a few tens of milliseconds are not sampled (docs/record.md).  ``release_fd``:
    the process waits before its exec for a byte on that pipe, which the first slice's
    collector writes once attached (closed here after that slice, whatever happened)."""
    end = time.monotonic() + cfg.duration if cfg.duration else None
    # SIGUSR2 between two slices (or before the first) must not end numaprof record:
    # its default action would.  During a slice the collector's supervisor relays it.
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: None)
    done = []
    try:
        while True:
            length = None if every == SIGNAL_ONLY else float(every)
            if end is not None:
                length = end - time.monotonic() if length is None else min(length, end - time.monotonic())
                if length < 0.1:
                    break
            out = slice_path(cfg.output, len(done) + 1)
            started = time.monotonic()
            # no duration: until SIGUSR2, Ctrl-C or the process's end (the collector's 0)
            if release_fd is not None:
                os.set_inheritable(release_fd, True)
            try:
                rc = run_record(cfg._replace(output=out, duration=length,
                                                    rotate_on=signal.SIGUSR2, release_fd=release_fd), argv)
            except NumaprofError:
                if done and not process_alive(cfg.pid):
                    break  # it ended between two slices: nothing to attach to
                raise
            finally:
                if release_fd is not None:
                    os.close(release_fd)  # the program goes on, recorded or not
                    release_fd = None
            if rc != 0:
                return rc
            done.append(out)
            if not process_alive(cfg.pid):
                break
            if _slice_interrupted(out) == "SIGUSR2":
                continue  # asked for the next slice
            if length is None or time.monotonic() - started < 0.9 * length:
                break  # stopped early: Ctrl-C, or the collector lost the process
    finally:
        signal.signal(signal.SIGUSR2, previous)
        if release_fd is not None:
            os.close(release_fd)  # no slice was recorded: the program goes on all the same
    if done:
        print(f"numaprof: {len(done)} slice(s): {done[0]}" + (f" .. {done[-1].name}" if len(done) > 1 else "")
              + f"; next: numaprof report {cfg.output}.*", file=sys.stderr)
    return 0


def _slice_interrupted(out: Path) -> str | None:
    """What ended the recording of slice ``out`` early, as its collector said."""
    try:
        doc = json.loads((out / "collector.json").read_text())
    except (OSError, ValueError):
        return None
    return doc.get("interrupted") if isinstance(doc, dict) else None



def run_launched(cfg: RecordConfig, every, argv: list[str]) -> int:
    """`record --switch-output SECONDS|signal -- COMMAND`: COMMAND started, then recorded
    in slices as a running process is (run_slices); returns COMMAND's exit status.

    COMMAND is the child of a keeper process that waits for it and reports its end
    through a pipe, so that its status reaches numaprof record whichever wait runs when
    it ends (a slice's supervisor reaps every child of numaprof record).  It runs with
    the allocation shim, which writes into a directory of its own beside the slices
    for the whole run; each slice's collector takes from it the allocations alive during
    the slice (numaprof-collect --alloc-dir).  It is held before its exec until the first
    slice's collector has attached (numaprof-collect --release-fd), so that it is
    recorded from its first instruction (docs/record.md).  Without the shim it is not
    held (the first slice would read the heap of the image before the exec).  Each slice
    also attaches to the processes below it (numaprof-collect --children), as a whole
    recording follows what the command starts."""
    alloc_dir, env = _shim_directory(cfg)
    try:
        return _launch(cfg._replace(alloc_dir=alloc_dir, children=True), env, every, argv)
    finally:
        if alloc_dir is not None:
            shutil.rmtree(alloc_dir, ignore_errors=True)


def _shim_directory(cfg: RecordConfig) -> tuple[Path | None, dict | None]:
    """The directory the allocation shim of a sliced COMMAND writes into (hidden, beside
    the slices, removed at the end) and COMMAND's environment with the shim preloaded, as
    numaprof-collect gives a command it launches (collector/src/launch.c); (None, None)
    when the shim is not built or the directory cannot be made (then the heap is read)."""
    shim = paths.shim()
    if not shim.exists():
        return None, None
    try:
        alloc_dir = Path(tempfile.mkdtemp(prefix=f".{cfg.output.name}.alloc-", dir=cfg.output.parent))
    except OSError as e:
        print(f"numaprof: warning: cannot make the allocation shim's directory in {cfg.output.parent}: "
              f"{e.strerror}; the program's arrays are found by reading its heap", file=sys.stderr)
        return None, None
    env = dict(os.environ)
    preload = env.get("LD_PRELOAD")
    env.update(NUMAPROF_DIR=str(alloc_dir), NUMAPROF_ALLOC_THRESHOLD=str(cfg.alloc_threshold),
               LD_PRELOAD=f"{shim}:{preload}" if preload else str(shim))
    return alloc_dir, env


def _launch(cfg: RecordConfig, env: dict | None, every, argv: list[str]) -> int:
    go_r, go_w = os.pipe() if cfg.alloc_dir is not None else (None, None)
    rfd, wfd = os.pipe()
    keeper = os.fork()
    if keeper == 0:  # the keeper: COMMAND's parent, single-threaded
        os.close(rfd)
        if go_w is not None:
            os.close(go_w)
        _keep(cfg.command, env, go_r, wfd)  # never returns
    os.close(wfd)
    if go_r is not None:
        os.close(go_r)
    with os.fdopen(rfd) as report:
        first = report.readline().split()
        if first[:1] != ["pid"]:
            if go_w is not None:
                os.close(go_w)
            _reap(keeper)
            err = int(first[1]) if len(first) > 1 else 0
            print(f"numaprof: cannot run {cfg.command[0]}: {os.strerror(err) if err else 'unknown error'}",
                  file=sys.stderr)
            return 126 if err in (errno.EACCES, errno.ENOEXEC) else 127  # as a shell says
        pid = int(first[1])
        rc = run_slices(cfg._replace(pid=pid), every, argv, release_fd=go_w)
        last = report.readline().split()  # blocks until COMMAND ends
    _reap(keeper)
    status = int(last[1]) if last[:1] == ["status"] else None
    if not slice_path(cfg.output, 1).exists():
        print(f"numaprof: {cfg.command[0]} ended before its first slice was recorded", file=sys.stderr)
    if status is None:
        print("numaprof: the program's exit status is unknown", file=sys.stderr)
        return rc or 1
    return status


def _keep(command, env: dict | None, go: int | None, wfd: int) -> None:
    """In the keeper: start COMMAND, report its pid, wait, report its exit status
    (128 + N when killed by signal N), exit.  The stopping signals reach COMMAND (it
    is in the same process group); the keeper ignores them, to report its end.  With
    ``go``, COMMAND waits before its exec for a byte on that pipe (or its end)."""
    code = 0
    try:
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        try:
            if go is None:
                pid = subprocess.Popen(command, env=env, preexec_fn=_default_signals).pid  # noqa: PLW1509 (no threads here)
            else:
                pid = _held(command, env, go)
        except OSError as e:
            os.write(wfd, f"error {e.errno or 0}\n".encode())
            return
        os.write(wfd, f"pid {pid}\n".encode())
        _, st = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(st)
        os.write(wfd, f"status {128 - rc if rc < 0 else rc}\n".encode())
    except BaseException:  # noqa: BLE001 - the keeper never returns into numaprof record
        code = 1
    finally:
        os._exit(code)


def _held(command, env: dict | None, go: int) -> int:
    """COMMAND forked, held before its exec until a byte (or the end) comes on ``go``;
    its pid.  A command that cannot be found or run is an OSError here, before any
    slice, as Popen's would be; an exec that fails after the release ends the process
    with 127 (not found) or 126, as a shell does."""
    environ = os.environ if env is None else env
    path = command[0] if "/" in command[0] else shutil.which(command[0], path=environ.get("PATH", os.defpath))
    if path is None or not os.path.exists(path):
        raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), command[0])
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), command[0])
    pid = os.fork()
    if pid == 0:
        try:
            _default_signals()
            while True:
                try:
                    os.read(go, 1)
                    break
                except InterruptedError:
                    continue
            os.close(go)
            os.execve(path, list(command), environ)
        except OSError as e:
            os._exit(127 if e.errno == errno.ENOENT else 126)
        finally:
            os._exit(127)
    os.close(go)
    return pid


def _default_signals() -> None:
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # already reaped by a slice's supervisor
