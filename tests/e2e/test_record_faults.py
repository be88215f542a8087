"""`numaprof record` under faults: what is never lost, what the program never sees.

* the output rotation never removes what numaprof did not write;
* setup failures are one line and exit 125;
* descriptors, signal dispositions and signals reach the program as in a plain run;
* a program that closes or dup2()s over numaprof's descriptors keeps being recorded;
* SIGKILL of the collector, of numaprof record or of the program leaves a readable
  profile, and the program is neither killed nor left orphaned without a word;
* a full disk at every write leaves the previous profile intact and nothing half-written;
* --redact-args keeps the arguments out of the profile;
* the allocation shim's own memory is never an object of the program.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, fill_disk, numaprof_argv, run_numaprof

from numaprof.analyzer.profile import read_table

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")]
PROGS = ROOT / "tests" / "progs"
BLOCK = 3 << 20  # tests/progs/fdabuse.c


def _env():
    env = dict(os.environ)
    if "numaprof.cli.main" in " ".join(numaprof_argv()):
        env["PYTHONPATH"] = str(ROOT)
    return env


def _one_line(proc, code=125):
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("numaprof: "), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    return lines[0]


def _tree(d: Path) -> dict:
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _wait_for(cond, what, timeout=60.0):
    """Polls `cond` (synchronisation with the program under test, not a timing check)."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def progs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("progs")
    built = {}
    for name in ("sigcount", "fdabuse", "mallocbench"):
        exe = out / name
        r = subprocess.run(["gcc", "-O2", "-g", str(PROGS / f"{name}.c"), "-o", str(exe)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        built[name] = exe
    return built


# ------------------------------------------------------------------- output rotation

def test_a_directory_of_user_files_at_old_is_never_removed(tmp_path):
    """mkdir prof.old; echo x > prof.old/thesis.tex; record twice: thesis.tex stays."""
    (tmp_path / "prof.old").mkdir()
    (tmp_path / "prof.old" / "thesis.tex").write_text("x")
    run_numaprof("record", "-o", tmp_path / "prof", "--", "true", check=True)
    first = _tree(tmp_path / "prof")
    proc = run_numaprof("record", "-o", tmp_path / "prof", "--", "true")
    line = _one_line(proc)
    assert "prof.old" in line and "not a numaprof profile" in line
    assert (tmp_path / "prof.old" / "thesis.tex").read_text() == "x"
    assert _tree(tmp_path / "prof") == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prof", "prof.old"]


def test_an_old_profile_holding_a_users_file_is_kept(tmp_path):
    """A real profile at prof.old with something numaprof does not write in it."""
    for _ in range(2):
        run_numaprof("record", "-o", tmp_path / "prof", "--", "true", check=True)
    (tmp_path / "prof.old" / "notes.txt").write_text("mine")
    before = _tree(tmp_path / "prof.old")
    line = _one_line(run_numaprof("record", "-o", tmp_path / "prof", "--", "true"))
    assert "notes.txt" in line
    assert _tree(tmp_path / "prof.old") == before


def test_old_as_a_symlink_is_not_followed_or_removed(tmp_path):
    target = tmp_path / "elsewhere"
    run_numaprof("record", "-o", target, "--", "true", check=True)  # a real profile
    run_numaprof("record", "-o", tmp_path / "prof", "--", "true", check=True)
    (tmp_path / "prof.old").symlink_to(target)
    before = _tree(target)
    _one_line(run_numaprof("record", "-o", tmp_path / "prof", "--", "true"))
    assert (tmp_path / "prof.old").is_symlink() and _tree(target) == before


def test_a_directory_with_a_foreign_manifest_is_not_rotated(tmp_path):
    """A manifest.json of another tool does not make a directory a numaprof profile."""
    d = tmp_path / "results"
    d.mkdir()
    (d / "manifest.json").write_text('{"format": "other.tool", "files": ["a"]}')
    (d / "a").write_text("data")
    _one_line(run_numaprof("record", "-o", d, "--", "true"))
    assert (d / "a").read_text() == "data" and not (tmp_path / "results.old").exists()


def test_profiles_rotate_and_the_old_profile_is_replaced(tmp_path, progs):
    """What numaprof writes in a profile (an archive of the program and its source
    included) is recognised as its own: the third recording removes the first."""
    out = tmp_path / "prof"
    starts = []
    for _ in range(3):
        run_numaprof("record", "-o", out, "--", progs["fdabuse"], "close", "1", check=True)
        starts.append(json.loads((out / "manifest.json").read_text())["start_time"])
    assert (tmp_path / "prof.old" / "archive").is_dir()
    assert json.loads((tmp_path / "prof.old" / "manifest.json").read_text())["start_time"] == starts[1]


# ------------------------------------------------------------------- setup errors

NOBODY = "numaprof-test"


@pytest.fixture
def ordinary_user():
    if os.geteuid() != 0:
        pytest.skip("needs root to run numaprof as another user")
    if subprocess.run(["id", NOBODY], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", NOBODY],
                       check=True)
    probe = subprocess.run(["runuser", "-u", NOBODY, "--", *numaprof_argv(), "--version"],
                           capture_output=True, text=True, env=_env(), cwd="/tmp")
    if probe.returncode != 0:
        pytest.skip(f"numaprof cannot run as {NOBODY} here: {probe.stderr.strip()[:200]}")
    return NOBODY


@pytest.mark.parametrize("target", ["/root/x", "/root/x/y"])
def test_an_output_one_may_not_write_is_one_line(ordinary_user, target):
    proc = subprocess.run(["runuser", "-u", ordinary_user, "--", *numaprof_argv(), "record",
                           "-o", target, "--", "true"], capture_output=True, text=True,
                          env=_env(), cwd="/tmp")
    line = _one_line(proc)
    assert target in line and "Permission denied" in line


def test_setup_failures_exit_125(tmp_path):
    (tmp_path / "file").write_text("x")
    line = _one_line(run_numaprof("record", "-o", tmp_path / "file" / "p", "--", "true"))
    assert "Not a directory" in line
    line = _one_line(run_numaprof("record", "-o", tmp_path / "no" / "p", "--", "true"))
    assert "No such file or directory" in line
    # a bad -o template is a bad option value: 2, as for every numaprof command
    _one_line(run_numaprof("record", "-o", tmp_path / "p.%x", "--", "true"), code=2)


def test_record_from_a_removed_directory(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    out = tmp_path / "p"
    proc = subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh",
                           str(gone), *numaprof_argv(), "record", "-o", str(out), "--", "true"],
                          capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "manifest.json").read_text())["cwd"] is None


# ------------------------------------------------------------------- descriptors

def _fd_listing(argv_prefix, fds):
    """The descriptors `sh` sees, as "number target" lines (pipe inode numbers dropped)."""
    script = 'for f in /proc/$$/fd/*; do echo "${f##*/} $(readlink "$f")"; done'
    proc = subprocess.run([*argv_prefix, "sh", "-c", script], pass_fds=fds,
                          capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stderr
    # the directory /proc/$$/fd the glob reads is not compared
    return sorted(re.sub(r"pipe:\[\d+\]", "pipe", ln) for ln in proc.stdout.splitlines()
                  if "/proc/" not in ln)


def test_inherited_descriptors_reach_the_program(tmp_path):
    """`numaprof record -- sh -c 'echo hi >&3' 3>out` works as a plain run does, and the
    program sees exactly the caller's descriptors (a file, a pipe) and none of numaprof's."""
    out = tmp_path / "out"
    proc = subprocess.run(["sh", "-c", 'o=$1; shift; exec "$@" 3>"$o"', "sh", str(out),
                           *numaprof_argv(), "record", "-o", str(tmp_path / "p"), "--",
                           "sh", "-c", "echo hi >&3"], capture_output=True, text=True,
                          env=_env())
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == "hi\n"
    fd = os.open(out, os.O_WRONLY | os.O_APPEND)
    r, w = os.pipe()
    try:
        plain = _fd_listing([], (fd, w))
        recorded = _fd_listing([*numaprof_argv(), "record", "-o", str(tmp_path / "p"), "--"],
                               (fd, w))
    finally:
        for x in (fd, r, w):
            os.close(x)
    assert recorded == plain
    assert {str(fd), str(w)} <= {ln.split()[0] for ln in plain}, plain


def test_ignored_signals_stay_ignored_and_the_mask_is_the_callers(tmp_path):
    """A caller that ignores SIGINT and SIGQUIT (a background job) gives the program the
    same dispositions and mask with or without numaprof."""
    show = "grep -E '^Sig(Ign|Blk)' /proc/self/status"
    wrap = 'trap "" INT QUIT; exec "$@"'
    plain = subprocess.run(["sh", "-c", wrap, "sh", "sh", "-c", show], capture_output=True,
                           text=True, check=True).stdout
    rec = subprocess.run(["sh", "-c", wrap, "sh", *numaprof_argv(), "record", "-o",
                          str(tmp_path / "p"), "--", "sh", "-c", show], capture_output=True,
                         text=True, env=_env())
    assert rec.returncode == 0, rec.stderr
    assert rec.stdout == plain


@pytest.mark.parametrize("shim_mode", ["mapped", "write"])
@pytest.mark.parametrize("mode", ["close", "dup2"])
def test_a_program_that_closes_or_dup2s_over_every_descriptor(tmp_path, progs, mode, shim_mode):
    """Closing every descriptor >= 3, or dup2()ing a file of the program's onto every
    number, neither stops the recording nor sends records into the program's file (in
    the shim's write(2) fallback too, NUMAPROF_SHIM_MODE=write)."""
    user = tmp_path / "user.txt"
    user.write_text("precious\n")
    n = 1000  # 2000 shim records: beyond the chunks mapped when the run starts
    args = ["close", str(n)] if mode == "close" else ["dup2", str(user), str(n)]
    env = {"NUMAPROF_SHIM_MODE": shim_mode}
    proc = run_numaprof("record", "-o", tmp_path / "p", "--", progs["fdabuse"], *args, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"done {n}\n"
    assert user.read_text() == "precious\n"
    objs = read_table(tmp_path / "p", "objects")
    # a block freed and allocated again at its address is one row of several instances
    assert int(np.asarray(objs["instances"])[np.asarray(objs["size"]) == BLOCK].sum()) == n


# ------------------------------------------------------------------- signals

def _default_stop_signals():
    """The stopping signals at their defaults, as at a terminal: run from a job a
    non-interactive shell started with &, the tests would inherit SIGINT and SIGQUIT
    ignored, which numaprof record rightly keeps ignored."""
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


class _Counted:
    """numaprof record (or the plain program) running tests/progs/sigcount.c in a session
    of its own, so that signals to its process group reach nothing else."""

    def __init__(self, progs, tmp_path, recorded=True, extra=(), tty=False):
        self.dir = tmp_path / "sig"
        self.dir.mkdir()
        argv = [str(progs["sigcount"]), str(self.dir), *extra]
        if recorded:
            argv = [*numaprof_argv(), "record", "-o", str(tmp_path / "p"), "--", *argv]
        kw = {}
        self.master = None
        if tty:
            self.master, slave = os.openpty()
            kw = {"stdin": slave, "stdout": slave, "stderr": slave,
                  "preexec_fn": lambda: (_default_stop_signals(),
                                         fcntl.ioctl(0, termios.TIOCSCTTY, 0))}
        else:
            kw = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE,
                  "preexec_fn": _default_stop_signals}
        self.proc = subprocess.Popen(argv, start_new_session=True, env=_env(), **kw)
        if tty:
            os.close(slave)
        _wait_for(lambda: (self.dir / "ready").exists(), "the program to start")

    def count(self) -> dict[str, int]:
        p = self.dir / "count"
        words = p.read_text().split() if p.exists() else []
        return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}

    def wait_count(self, name, n):
        _wait_for(lambda: self.count().get(name, 0) >= n, f"{name} #{n} to reach the program")
        time.sleep(0.5)  # time for a second, duplicate delivery to show up in the count

    def stop(self):
        (self.dir / "stop").touch()
        self.proc.wait(timeout=120)
        if self.master is not None:
            os.close(self.master)
        return self.count()


def test_a_signal_to_the_process_group_reaches_the_program_once(tmp_path, progs):
    """kill -INT -PGID from outside the group (a batch system): 4 signals, 4 deliveries
    (numaprof record and the collector both passed each one on: up to 3 each)."""
    run = _Counted(progs, tmp_path)
    for k in range(1, 5):
        os.killpg(run.proc.pid, signal.SIGINT)
        run.wait_count("INT", k)
    assert run.stop()["INT"] == 4
    assert run.proc.returncode == 0


def test_a_signal_to_numaprofs_pid_reaches_the_program_once(tmp_path, progs):
    run = _Counted(progs, tmp_path)
    for k in range(1, 3):
        os.kill(run.proc.pid, signal.SIGTERM)
        run.wait_count("TERM", k)
    os.kill(run.proc.pid, signal.SIGHUP)
    run.wait_count("HUP", 1)
    assert run.stop() == {"INT": 0, "TERM": 2, "HUP": 1, "QUIT": 0}


def test_ctrl_c_at_a_terminal_reaches_the_program_once(tmp_path, progs):
    run = _Counted(progs, tmp_path, tty=True)
    for k in range(1, 4):
        os.write(run.master, b"\x03")
        run.wait_count("INT", k)
    assert run.stop()["INT"] == 3


def test_a_program_outside_the_group_gets_what_is_sent_to_numaprof(tmp_path, progs):
    """The program moved to a process group of its own: a group signal does not reach it
    (as in a plain run); one sent to numaprof record's pid does, once."""
    run = _Counted(progs, tmp_path, extra=("leave-group",))
    os.killpg(run.proc.pid, signal.SIGINT)
    os.kill(run.proc.pid, signal.SIGTERM)
    run.wait_count("TERM", 1)
    assert run.stop() == {"INT": 0, "TERM": 1, "HUP": 0, "QUIT": 0}


# ------------------------------------------------------------------- SIGKILL

def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _running_three(progs, tmp_path):
    run = _Counted(progs, tmp_path)
    _wait_for(lambda: _children(run.proc.pid), "the collector")
    collector = _children(run.proc.pid)[0]
    _wait_for(lambda: _children(collector), "the program")
    return run, collector, _children(collector)[0]


def _report(profile: Path) -> dict:
    proc = run_numaprof("report", profile, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["profile"]


def test_sigkill_of_the_collector(tmp_path, progs):
    """One line with the program's pid; the program runs to its end and record waits for it
    (no orphan), exits with its status, and the partial profile is readable."""
    run, collector, program = _running_three(progs, tmp_path)
    os.kill(collector, signal.SIGKILL)
    _wait_for(lambda: _state(collector) == "gone", "the collector to be reaped")
    assert _state(program) not in ("gone", "Z")  # not killed
    os.kill(run.proc.pid, signal.SIGTERM)  # record now passes signals on itself
    run.wait_count("TERM", 1)
    counts = run.stop()
    assert counts["TERM"] == 1
    err = run.proc.stderr.read().decode()
    assert run.proc.returncode == 0, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "numaprof-collect was killed by SIGKILL" in lines[0], err
    assert f"pid {program}" in lines[0]
    assert _state(program) == "gone"  # reaped by record, not left to init
    doc = _report(tmp_path / "p")
    assert doc["complete"] is False and "SIGKILL" in doc["incomplete_reason"]
    assert doc["exit_status"] == 0


def test_sigkill_of_numaprof_record(tmp_path, progs):
    """The collector stops and exits; the program goes on to its end (docs/record.md); the
    profile is readable and says it is incomplete."""
    run, collector, program = _running_three(progs, tmp_path)
    os.kill(run.proc.pid, signal.SIGKILL)
    run.proc.wait(timeout=60)
    _wait_for(lambda: _state(collector) in ("gone", "Z"), "the collector to exit")
    assert _state(program) not in ("gone", "Z")
    (run.dir / "stop").touch()
    _wait_for(lambda: _state(program) in ("gone", "Z"), "the program to end")
    doc = _report(tmp_path / "p")
    assert doc["complete"] is False and "numaprof record was killed" in doc["incomplete_reason"]


def test_sigkill_of_the_program(tmp_path, progs):
    run, collector, program = _running_three(progs, tmp_path)
    os.kill(program, signal.SIGKILL)
    run.proc.wait(timeout=120)
    assert run.proc.returncode == 128 + signal.SIGKILL
    doc = _report(tmp_path / "p")
    assert doc["complete"] is False and "signal 9" in doc["incomplete_reason"]
    assert _state(collector) == "gone"


# ------------------------------------------------------------------- full disk

def _check_outcome(proc, disk: Path, before: dict, seen: dict, others=()) -> None:
    """Either a whole new profile (the previous one kept as .old) or exit 125 with one
    line, the previous profile back byte for byte and nothing else left."""
    names = sorted(p.name for p in disk.iterdir())
    if proc.returncode == 0:
        assert names == sorted([*others, "p", "p.old"]), names
        assert _tree(disk / "p.old") == before
        assert json.loads((disk / "p" / "manifest.json").read_text())["complete"] is True
        # nothing silently missing: the program's one 3 MiB block is in the objects
        assert list(read_table(disk / "p", "objects")["size"]) == [BLOCK]
        key = "complete"
    else:
        line = _one_line(proc)
        assert names == sorted([*others, "p"]), (names, line)
        assert _tree(disk / "p") == before
        key = line.replace(str(disk), "DIR").split(": ")[1]  # what could not be written
    seen[key] = seen.get(key, 0) + 1


def test_full_disk_at_every_write_of_the_collector(small_disk, progs, tmp_path):
    """The disk is filled to within `leave` bytes, `leave` growing 16 KiB at a time until
    the profile fits: the manifest, the tables, the shim's file, collector.json each fail
    in turn."""
    exe = [progs["fdabuse"], "close", "1"]
    run_numaprof("record", "-o", small_disk / "p", "--", *exe, check=True)
    pristine = tmp_path / "pristine"
    shutil.copytree(small_disk / "p", pristine)
    before = _tree(pristine)
    seen: dict = {}
    leave, fits = 0, 0
    while fits < 2:
        for e in small_disk.iterdir():
            shutil.rmtree(e) if e.is_dir() else e.unlink()
        shutil.copytree(pristine, small_disk / "p")
        fill_disk(small_disk, leave)
        proc = run_numaprof("record", "-o", small_disk / "p", "--", *exe)
        _check_outcome(proc, small_disk, before, seen, others=("filler",))
        fits = fits + 1 if proc.returncode == 0 else 0
        leave += 16 << 10
        assert leave < 3 << 20, seen
    failures = [k for k in seen if k != "complete"]
    assert len(failures) >= 2, seen  # more than one write was hit


_INJECT = r"""
import errno, os, shutil, sys
target, n = os.path.realpath(sys.argv[1]), int(sys.argv[2])
calls = [0]
def hit(path):
    p = os.path.realpath(os.fspath(path)) if isinstance(path, (str, bytes, os.PathLike)) else ""
    if p == target or p.startswith(target + os.sep):
        calls[0] += 1
        if calls[0] == n:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))
def wrap(fn, writes=lambda *a, **k: True):
    def inner(*a, **k):
        if writes(*a, **k):
            hit(a[0] if fn is not shutil.copyfile else a[1])
        return fn(*a, **k)
    return inner
W = os.O_WRONLY | os.O_RDWR | os.O_CREAT
os.open = wrap(os.open, lambda path, flags, *a, **k: flags & W)
os.mkdir = wrap(os.mkdir)
os.replace = wrap(os.replace)
os.rename = wrap(os.rename)
shutil.copyfile = wrap(shutil.copyfile)
real_fsync = os.fsync
def fsync(fd):
    hit(os.readlink(f"/proc/self/fd/{fd}"))
    return real_fsync(fd)
os.fsync = fsync
from numaprof.cli.main import main
sys.argv = ["numaprof", "record", "-o", sys.argv[1], "--", *sys.argv[3:]]
try:
    main(sys.argv[1:])
finally:
    print(f"injected-calls {calls[0]}", file=sys.stderr)
"""


def test_a_failed_write_at_every_step_of_record(tmp_path, progs):
    """ENOSPC injected into the Nth write of numaprof record's own Python code into the
    profile (directory, manifest, sources.json, archive, archive.json, fsyncs), for every
    N until a run completes: one line, exit 125, the previous profile back as it was."""
    disk = tmp_path / "d"
    disk.mkdir()
    exe = [str(progs["fdabuse"]), "close", "1"]
    run_numaprof("record", "-o", disk / "p", "--", *exe, check=True)
    pristine = tmp_path / "pristine"
    shutil.copytree(disk / "p", pristine)
    before = _tree(pristine)
    seen: dict = {}
    for n in range(1, 200):
        shutil.rmtree(disk)
        disk.mkdir()
        shutil.copytree(pristine, disk / "p")
        proc = subprocess.run([sys.executable, "-c", _INJECT, str(disk / "p"), str(n), *exe],
                              capture_output=True, text=True, env=_env())
        calls = int(proc.stderr.rsplit("injected-calls ", 1)[1])
        proc.stderr = proc.stderr.rsplit("injected-calls ", 1)[0]
        if calls < n:  # the Nth write never came: every write was tried
            assert proc.returncode == 0, proc.stderr
            break
        _check_outcome(proc, disk, before, seen)
    else:
        raise AssertionError("record kept writing")
    assert n > 5 and len(seen) >= 2, seen


# ------------------------------------------------------------------- user data

def test_redact_args_keeps_the_arguments_out_of_the_profile(tmp_path):
    secret = "hunter2-" + os.urandom(4).hex()
    out = tmp_path / "p"
    proc = run_numaprof("record", "--redact-args", "-o", out, "--", "sh", "-c", "exit 0",
                        "sh", f"--password={secret}")
    assert proc.returncode == 0, proc.stderr
    for p in out.rglob("*"):
        if p.is_file():
            assert secret.encode() not in p.read_bytes(), p
    m = json.loads((out / "manifest.json").read_text())
    assert m["command"] == ["sh", "<redacted>", "<redacted>", "<redacted>", "<redacted>"]
    assert m["argv"][-5:] == m["command"] and m["args_redacted"] is True
    assert _report(out)["command"] == m["command"]


def test_the_shims_own_memory_is_never_an_object(tmp_path, progs):
    """malloc/free of 64 KiB blocks: the shim records each one, so its code and record
    buffers take many samples; none is an object, all are counted."""
    out = tmp_path / "p"
    proc = run_numaprof("record", "--freq", "4000", "-o", out, "--", progs["mallocbench"],
                        "65536", "400000")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(run_numaprof("report", out, "--format", "json", check=True).stdout)
    for o in doc["objects"]:
        where = f"{o['name']} {o.get('site', '')}"
        assert "shim." not in where and "libnumaprof_shim" not in where, o
    own = [f for f in doc["findings"] if "numaprof's own work" in f]
    assert own and int(own[0].split()[0]) > 0, doc["findings"]
