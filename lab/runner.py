"""Boots a throw-away virtme-ng guest with a LabTopology and runs one command in it.

The guest sees the host's filesystem read-only (virtme-ng exports / over 9p or virtio-fs);
the current directory and a private status directory are shared read-write (--rwdir).
The command runs through a small shell script kept in that status directory: it restores
the caller's environment (virtme-ng passes almost none), changes to the current
directory, runs the command and writes its exit status to a file, which is what we
return; virtme-ng's own exit status is only trusted when that file is missing.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from numaprof.errors import NumaprofError, UsageError
from numaprof.lab.topology import LabTopology

TIMEOUT_EXIT = 124  # as timeout(1)
INTERRUPT_EXIT = 130
GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Host session variables that mean nothing (or something wrong) inside the guest.
_ENV_SKIP = {
    "PWD", "OLDPWD", "SHLVL", "_", "TERM", "PATH", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS",
    "SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY", "DISPLAY",
    "WAYLAND_DISPLAY", "XAUTHORITY", "TMUX", "TMUX_PANE", "STY", "WINDOWID",
    # Overrides of CPU detection name the host's cpu, not the guest's: OPENBLAS_CORETYPE=
    # Haswell made numpy's OpenBLAS run AVX2 code on the AVX-less guest cpu (SIGILL).
    "OPENBLAS_CORETYPE", "GOTOBLAS_CORETYPE", "MKL_DEBUG_CPU_TYPE", "MKL_ENABLE_INSTRUCTIONS",
    "NVPL_BLAS_DEBUG_CPU_TYPE",
}
# vng gives a TCG guest QEMU's "max" cpu, which includes AVX/AVX2; QEMU 7.2's TCG
# (Debian 12) mis-executes some AVX2 code: numpy's argsort returned unsorted indices and
# crashed numaprof report in the guest.  Hide those features; programs then take their
# SSE paths.
GUEST_CPU = "max,avx=off,avx2=off,fma=off,f16c=off"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SETUP = "`make setup` installs it"


@dataclass(frozen=True)
class LabConfig:
    """Everything `numaprof lab` needs, parsed from the command line."""

    topology: LabTopology
    command: tuple[str, ...]
    cwd: Path
    timeout: float | None = None  # seconds, None = no limit
    kernel: Path | None = None  # None = NUMAPROF_LAB_KERNEL or the newest /boot/vmlinuz-*
    numa_balancing: bool = False  # the kernel's automatic page migration (AutoNUMA)
    thp: str = "host"  # transparent huge pages: host (as this machine's), or a THP_MODES mode
    # boot again when the guest stops making progress while the command runs (it then
    # runs twice: only for commands that may, as --verify's recording in a scratch copy)
    rerun_stalled: bool = False


@dataclass(frozen=True)
class LabTools:
    vng: Path
    qemu: Path
    kernel: Path


def _version_key(path: Path) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path.name)]


def find_kernel(explicit: Path | None = None, boot: Path = Path("/boot")) -> Path:
    """The kernel image to boot: explicit, $NUMAPROF_LAB_KERNEL, or the newest in /boot."""
    env = os.environ.get("NUMAPROF_LAB_KERNEL")
    if explicit is None and env:
        explicit = Path(env)
    if explicit is not None:
        if not explicit.is_file():
            raise NumaprofError(f"kernel image {explicit} does not exist")
        kernel = explicit
    else:
        images = sorted(boot.glob("vmlinuz-*"), key=_version_key)
        if not images:
            raise NumaprofError(
                f"no kernel image (vmlinuz-*) in {boot}: the lab boots the distribution "
                f"kernel; install the Debian package linux-image-amd64 ({_SETUP})"
            )
        kernel = images[-1]
    if not os.access(kernel, os.R_OK):
        raise NumaprofError(
            f"kernel image {kernel} is not readable by you (some distributions install it "
            f"0600): run 'sudo chmod 0644 {kernel}' or set NUMAPROF_LAB_KERNEL"
        )
    version = kernel.name.removeprefix("vmlinuz-")
    if explicit is None and not Path("/lib/modules", version).is_dir():
        raise NumaprofError(
            f"the modules of kernel {version} are missing (/lib/modules/{version}): "
            f"reinstall the Debian package linux-image-amd64 ({_SETUP})"
        )
    return kernel


def find_vng() -> Path:
    """virtme-ng's `vng`, next to this Python (the venv) first, then on PATH."""
    here = Path(sys.executable).parent / "vng"
    if here.is_file() and os.access(here, os.X_OK):
        return here
    found = shutil.which("vng")
    if found:
        return Path(found)
    raise NumaprofError(
        "virtme-ng is not installed (no 'vng' next to this Python or on PATH): "
        f"pip install virtme-ng==1.42 ({_SETUP})"
    )


def find_qemu() -> Path:
    found = shutil.which("qemu-system-x86_64")
    if not found:
        raise NumaprofError(
            "QEMU is not installed (no qemu-system-x86_64 on PATH): install the Debian "
            f"package qemu-system-x86 ({_SETUP})"
        )
    return Path(found)


def _is_static_elf(path: Path) -> bool:
    """True if the ELF file has no program interpreter (PT_INTERP), i.e. is static."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only (x86-64 host)
                return False
            phoff = int.from_bytes(head[32:40], "little")
            phentsize = int.from_bytes(head[54:56], "little")
            phnum = int.from_bytes(head[56:58], "little")
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    for k in range(phnum):
        if int.from_bytes(table[k * phentsize:k * phentsize + 4], "little") == 3:
            return False
    return True


def check_busybox() -> None:
    """virtme-ng builds an initramfs for a modular distribution kernel, with static busybox."""
    for name in ("busybox-static", "busybox.static", "busybox"):
        candidates = [shutil.which(name)] + [
            f"/{d}/{name}" for d in ("usr/local/bin", "usr/bin", "bin", "usr/sbin", "sbin")
        ]
        for c in candidates:
            if c and os.path.isfile(c) and _is_static_elf(Path(c)):
                return
    raise NumaprofError(
        "no statically linked busybox: virtme-ng needs one to boot the distribution kernel; "
        f"install the Debian package busybox-static ({_SETUP})"
    )


def find_tools(kernel: Path | None = None) -> LabTools:
    """Checks everything the lab needs on the host, failing with the package to install."""
    qemu = find_qemu()
    vng = find_vng()
    k = find_kernel(kernel)
    check_busybox()
    return LabTools(vng=vng, qemu=qemu, kernel=k)


def _mib(n: int) -> str:
    return f"{n >> 20}M"


def _cpu_list(r: range) -> str:
    return str(r.start) if len(r) == 1 else f"{r.start}-{r.stop - 1}"


def vng_topology_args(topo: LabTopology) -> list[str]:
    """--cpus, -m, --numa per node and --numa-distance for every ordered pair."""
    args = ["--cpus", str(topo.total_cpus), "-m", _mib(topo.total_mem)]
    for node in range(topo.nodes):
        args += ["--numa", f"{_mib(topo.mem_per_node)},cpus={_cpu_list(topo.cpus_of(node))}"]
    # Both directions of every pair: QEMU then takes the matrix as given (asymmetric or
    # not) instead of completing it.
    for i in range(topo.nodes):
        for j in range(topo.nodes):
            if i != j:
                args += ["--numa-distance", f"{i},{j}={topo.distances[i][j]}"]
    return args


def check_shareable(cwd: Path) -> None:
    """virtme-ng passes shared paths on the kernel command line: no blanks, no '='."""
    s = str(cwd)
    if s == "/":
        raise UsageError("refusing to share / read-write with the guest; cd to a directory")
    if re.search(r"[\s=,\"'\\]", s):
        raise UsageError(
            f"the current directory {s!r} contains a blank, quote, ',' or '=', which "
            "virtme-ng cannot share with the guest; run from another directory"
        )


def numaprof_bin_dir() -> Path | None:
    """The directory of the `numaprof` command of this installation (a venv's bin/), which
    need not be on the caller's PATH: `make setup` installs into .venv without activating it."""
    here = Path(sys.executable).parent
    return here if (here / "numaprof").is_file() else None


def guest_environment(environ: dict[str, str] | None = None,
                      numaprof_bin: Path | None = None) -> dict[str, str]:
    """The caller's environment for the guest, minus host-session variables.

    PATH is the directory of the numaprof that runs the lab (so that
    ``numaprof lab -- numaprof record ...`` runs this numaprof in the guest), then the
    caller's PATH, then the usual system directories.
    """
    environ = dict(os.environ if environ is None else environ)
    env = {k: v for k, v in environ.items() if k not in _ENV_SKIP and _ENV_NAME.match(k)}
    first = str(numaprof_bin) if numaprof_bin else ""
    env["PATH"] = ":".join(p for p in (first, environ.get("PATH", ""), GUEST_PATH) if p)
    return env


def guest_script(command: tuple[str, ...], cwd: Path, status_file: Path,
                 env: dict[str, str], started_file: Path | None = None,
                 heartbeat_file: Path | None = None) -> str:
    """The /bin/sh script the guest runs: environment, cd, a mark that the command is
    starting (``started_file``), a heartbeat while it runs (``heartbeat_file``, a counter
    rewritten every HEARTBEAT_PERIOD seconds), the command, its exit status to a file."""
    lines = ["# numaprof lab: run one command in the guest and record its exit status"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    lines += [f"cd {shlex.quote(str(cwd))} || exit 125"]
    if started_file is not None:
        lines += [f": > {shlex.quote(str(started_file))}"]
    if heartbeat_file is not None:
        beat = shlex.quote(str(heartbeat_file))
        lines += [f"(i=0; while :; do i=$((i + 1)); echo $i > {beat}; "
                  f"sleep {HEARTBEAT_PERIOD}; done) </dev/null >/dev/null 2>&1 &",
                  "numaprof_lab_beat=$!"]
    lines += [shlex.join(command), "status=$?"]
    if heartbeat_file is not None:
        lines += ['kill "$numaprof_lab_beat" 2>/dev/null']
    lines += [
        f"echo $status > {shlex.quote(str(status_file))}",
        "exit $status",
    ]
    return "\n".join(lines) + "\n"


THP_MODES = ("always", "madvise", "never")
THP_FILE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def host_thp(path: Path = THP_FILE) -> str | None:
    """This machine's transparent huge page mode (the bracketed word of
    ``always [madvise] never``), None when the kernel has no THP or the file says none."""
    try:
        m = re.search(r"\[(\w+)\]", path.read_text())
    except OSError:
        return None
    return m.group(1) if m and m.group(1) in THP_MODES else None


def build_vng_command(tools: LabTools, topo: LabTopology, cwd: Path, state_dir: Path,
                      script: Path, numa_balancing: bool = False,
                      thp: str | None = None) -> list[str]:
    """The full vng command line (TCG: KVM fails under QEMU on these machines).

    Automatic NUMA balancing is off unless asked for: it migrates pages toward the threads
    that use them, so a page would not stay where the policy under test put it.
    ``thp``: the guest kernel's transparent huge page mode (None: the kernel's default,
    which for the booted distribution kernel need not be this machine's).
    """
    return [
        str(tools.vng), "--disable-kvm", "--run", str(tools.kernel),
        *vng_topology_args(topo),
        f"--qemu-opts=-cpu {GUEST_CPU}",
        "--append", f"numa_balancing={'enable' if numa_balancing else 'disable'}",
        *(["--append", f"transparent_hugepage={thp}"] if thp else []),
        "--rwdir", str(cwd), "--rwdir", str(state_dir), "--cwd", str(cwd),
        "--exec", f"/bin/sh {script}",
    ]


def kill_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Stops `proc` (the leader of a session of its own: vng) and everything it started
    (QEMU, file servers): SIGTERM to the group, SIGKILL after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            # The leader is gone; make sure no QEMU child stays behind in the group.
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
        return


def _binary(stream):
    return getattr(stream, "buffer", stream)


def _pump(src, dst) -> None:
    """Copies a pipe to one of our output streams as data arrives (streaming)."""
    while True:
        chunk = os.read(src.fileno(), 65536)
        if not chunk:
            break
        try:
            dst.write(chunk)
            dst.flush()
        except (BrokenPipeError, ValueError):
            pass  # our reader went away: keep draining so the guest is not blocked
    src.close()


class _Terminated(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, _frame):
    raise _Terminated(signum)


#: Boots of the guest in all, when it stops or stalls before the command started (QEMU
#: under TCG sometimes aborts while booting: an assertion in its MSI-X emulation, seen in
#: CI) or, with LabConfig.rerun_stalled, stalls while the command runs.
BOOT_ATTEMPTS = 3
#: Seconds of the timeout a second boot needs at least.
MIN_BOOT_SECONDS = 60.0
#: Seconds from the boot to the script's first line before the boot counts as stalled
#: (a boot takes about 30 s under TCG).
BOOT_DEADLINE = 300.0
#: A TCG guest now and then stops making progress with QEMU busy (seen in CI: a guest ran
#: out a 900 s timeout that a rerun passed in 40 s).  The script's heartbeat, rewritten
#: every HEARTBEAT_PERIOD s, then stops too; after STALL_SECONDS without one the guest is
#: stalled.
HEARTBEAT_PERIOD = 5
STALL_SECONDS = 180.0
POLL_SECONDS = 2.0


@dataclass
class _Watch:
    """What the host sees of one boot: the guest's marks, read as they appear."""

    started_file: Path
    heartbeat_file: Path
    boot_deadline: float = BOOT_DEADLINE
    stall_seconds: float = STALL_SECONDS
    poll: float = POLL_SECONDS
    begun: float = 0.0
    started_at: float | None = None  # host monotonic time the start mark was first seen
    beat: str | None = None
    beat_at: float | None = None  # host monotonic time the heartbeat last changed

    def look(self, now: float) -> str | None:
        """None while the guest makes progress, else why it counts as stalled."""
        if self.started_at is None and self.started_file.exists():
            self.started_at = now
        try:
            beat = self.heartbeat_file.read_text()
        except OSError:
            beat = None
        if beat is not None and beat != self.beat:
            self.beat, self.beat_at = beat, now
        if self.started_at is None:
            if now - self.begun > self.boot_deadline:
                return f"the command had not started {self.boot_deadline:g} s after the boot began"
            return None
        last = self.beat_at if self.beat_at is not None else self.started_at
        if now - last > self.stall_seconds:
            return (f"the guest stopped making progress {last - self.started_at:.0f} s into "
                    f"the command (no heartbeat for {now - last:.0f} s)")
        return None

    def where(self, now: float) -> str:
        if self.started_at is None:
            return "the command had not started"
        return f"the command had run {now - self.started_at:.0f} s"


def run(config: LabConfig, tools: LabTools | None = None, *,
        watch: dict[str, float] | None = None) -> int:
    """Boots the guest, runs the command with its output streamed, returns its exit status.

    A guest that stops, or stalls, before the command started (no mark in the state
    directory) is booted again: nothing of the command ran, so nothing runs twice.  One
    that stalls while the command runs (its heartbeat stopped) is killed and, only with
    ``config.rerun_stalled``, booted again.  ``watch`` overrides _Watch's deadlines."""
    check_shareable(config.cwd)
    tools = tools or find_tools(config.kernel)
    state_dir = Path(tempfile.mkdtemp(prefix="numaprof-lab-"))
    try:
        check_shareable(state_dir)
        status_file, started_file = state_dir / "status", state_dir / "started"
        heartbeat_file = state_dir / "heartbeat"
        script = state_dir / "run.sh"
        script.write_text(guest_script(config.command, config.cwd, status_file,
                                       guest_environment(numaprof_bin=numaprof_bin_dir()),
                                       started_file, heartbeat_file))
        argv = build_vng_command(tools, config.topology, config.cwd, state_dir, script,
                                 config.numa_balancing,
                                 host_thp() if config.thp == "host" else config.thp)
        env = dict(os.environ)
        # vng runs virtme-run by name: it must be on PATH even when the venv is not active.
        env["PATH"] = f"{tools.vng.parent}:{env.get('PATH', '')}"
        deadline = None if config.timeout is None else time.monotonic() + config.timeout
        for attempt in range(BOOT_ATTEMPTS):
            for mark in (status_file, started_file, heartbeat_file):
                mark.unlink(missing_ok=True)
            left = None if deadline is None else max(deadline - time.monotonic(), 1.0)
            w = _Watch(started_file, heartbeat_file, **(watch or {}))
            rc, stalled = _boot(argv, config, env, left, w)
            try:
                return int(status_file.read_text().strip())
            except (OSError, ValueError):
                pass
            ran = started_file.exists()
            if stalled and ran and not config.rerun_stalled:
                raise NumaprofError(f"lab: {stalled}; the guest was killed (QEMU under TCG "
                                    "stalls now and then): run it again",
                                    exit_code=TIMEOUT_EXIT)
            left = None if deadline is None else deadline - time.monotonic()
            if ((ran and not stalled) or attempt + 1 == BOOT_ATTEMPTS
                    or (left is not None and left < MIN_BOOT_SECONDS)):
                break
            if stalled:
                print(f"numaprof lab: {stalled}: the guest was killed; booting it again"
                      + (" to run the command once more" if ran else ""),
                      file=sys.stderr, flush=True)
            else:
                print(f"numaprof lab: the guest stopped before the command started "
                      f"(virtme-ng exited with status {rc}; its messages are above): "
                      "booting it again", file=sys.stderr, flush=True)
        if stalled:
            raise NumaprofError(f"lab: {stalled}; the guest was killed after {attempt + 1} "
                                "boot(s)", exit_code=TIMEOUT_EXIT)
        raise NumaprofError(
            f"lab: the guest did not run the command to its end (virtme-ng exited with "
            f"status {rc}; its messages are above)",
            exit_code=rc if rc > 0 else 1,
        )
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def _boot(argv: list[str], config: LabConfig, env: dict[str, str], timeout: float | None,
          watch: _Watch) -> tuple[int, str | None]:
    """Runs the guest once (vng ``argv``) with its output streamed: its exit status, and
    why it was killed as stalled (None when it ended by itself)."""
    # QEMU opens its console files with O_TRUNC and once per channel: given a regular
    # file as stdout it would truncate it and write over itself, so it always gets
    # pipes, copied to ours.
    proc = subprocess.Popen(argv, cwd=config.cwd, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pumps = [threading.Thread(target=_pump, args=(pipe, _binary(out)), daemon=True)
             for pipe, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))]
    for t in pumps:
        t.start()
    # The guest runs in its own session (so that it can be killed as a whole): turn
    # SIGTERM / SIGHUP into killing it, or it would outlive us.
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, _raise_terminated)
    watch.begun = time.monotonic()
    end = None if timeout is None else watch.begun + timeout
    stalled = None
    try:
        while True:
            try:
                rc = proc.wait(timeout=watch.poll if end is None
                               else max(0.0, min(watch.poll, end - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if end is not None and now >= end:
                kill_group(proc)
                raise NumaprofError(
                    f"lab: the command did not finish within {config.timeout:g} s "
                    f"({watch.where(now)}); the guest was killed (TCG guests run programs "
                    "about 20x slower: raise --timeout)",
                    exit_code=TIMEOUT_EXIT,
                ) from None
            stalled = watch.look(now)
            if stalled:
                kill_group(proc)
                rc = proc.returncode if proc.returncode is not None else -1
                break
    except KeyboardInterrupt:
        kill_group(proc)
        raise NumaprofError("lab: interrupted; the guest was killed",
                            exit_code=INTERRUPT_EXIT) from None
    except _Terminated as t:
        kill_group(proc)
        raise NumaprofError(f"lab: terminated by signal {t.signum}; the guest was killed",
                            exit_code=128 + t.signum) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for t in pumps:
        t.join(timeout=10)
    return rc, stalled
