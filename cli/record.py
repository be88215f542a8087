"""`numaprof record`: run a program under the collector and write a profile directory."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import click

from numaprof import __version__, defaults, paths
from numaprof.analyzer.format import FORMAT, VERSION
from numaprof.cli.options import DEFAULT_PROFILE
from numaprof.errors import NumaprofError
from numaprof.syspaths import is_system_path

COLLECTOR_FAILED = 125  # numaprof-collect could not start the run, or the profile could not be written
ENV_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "NUMAPROF_", "SLURM_", "OMPI_")


@dataclass(frozen=True)
class RecordConfig:
    command: tuple[str, ...]
    output: Path
    output_given: bool
    backend: str
    freq: int | None
    alloc_threshold: int
    pid: int | None
    duration: float | None


RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")


def expand_output(template: str, environ=os.environ) -> str:
    """Expands %r (MPI rank), %h (host name), %p (pid) and %% in an -o path.

    Under mpirun or srun every rank runs its own `numaprof record -o prof.%r`, so each
    writes its own profile.
    """
    out, i = [], 0
    while i < len(template):
        ch = template[i]
        if ch == "%" and i + 1 < len(template):
            key = template[i + 1]
            if key == "r":
                rank = next((environ[v] for v in RANK_VARIABLES if v in environ), None)
                if rank is None:
                    raise NumaprofError(
                        "-o uses %r but no MPI rank is set (" + ", ".join(RANK_VARIABLES) + ")")
                out.append(rank)
            elif key == "h":
                out.append(os.uname().nodename)
            elif key == "p":
                out.append(str(os.getpid()))
            elif key == "%":
                out.append("%")
            else:
                raise NumaprofError(f"unknown %{key} in -o {template} (use %r, %h, %p or %%)")
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise NumaprofError(f"cannot write {path}: {e.strerror}") from e


def _discard(out: Path, old: Path | None) -> None:
    """Removes a profile that could not be finished and restores the previous one."""
    shutil.rmtree(out, ignore_errors=True)
    if old is not None:
        old.rename(out)


def _disk_full(e: OSError) -> bool:
    return e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _prepare_output(cfg: RecordConfig) -> Path | None:
    """Creates the profile directory; an existing profile is kept as <dir>.old, as perf does.

    Returns the path of the kept old profile (to restore it if the run cannot start).
    """
    out = cfg.output
    old = None
    if out.exists() or out.is_symlink():
        if not (out / "manifest.json").exists() or not out.is_dir():
            raise NumaprofError(
                f"{out} exists and is not a numaprof profile; remove it or choose another -o"
            )
        old = out.with_name(out.name + ".old")
        try:
            if old.exists():
                shutil.rmtree(old)
            out.rename(old)
        except OSError as e:
            raise NumaprofError(f"cannot keep the previous profile as {old}: {e.strerror}") from e
    try:
        out.mkdir(mode=0o700, parents=False)
    except OSError as e:
        if old is not None:
            old.rename(out)
        raise NumaprofError(f"cannot create {out}: {e.strerror}") from e
    return old


def _manifest(cfg: RecordConfig, argv: list[str]) -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "numaprof_version": __version__,
        "complete": False,
        "incomplete_reason": "recording in progress",
        "command": list(cfg.command),
        "argv": argv,
        "cwd": os.getcwd(),
        "host": socket.gethostname(),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "start_time": _utc_now(),
        "end_time": None,
        "exit_status": None,
        "backend": None,
        "backend_reason": {},
        "sampling": {"freq": cfg.freq, "alloc_threshold": cfg.alloc_threshold},
        "counts": {},
        "attach": {"pid": cfg.pid, "duration": cfg.duration} if cfg.pid else None,
    }


def _collector_argv(cfg: RecordConfig) -> list[str]:
    argv = [str(paths.collector()), "-o", str(cfg.output), "--backend", cfg.backend,
            "--alloc-threshold", str(cfg.alloc_threshold)]
    shim = paths.shim()
    if shim.exists():
        argv += ["--shim", str(shim)]
    if cfg.freq:
        argv += ["--freq", str(cfg.freq)]
    if cfg.pid:
        argv += ["-p", str(cfg.pid), "--duration", str(cfg.duration or 10)]
    else:
        argv += ["--", *cfg.command]
    return argv


def _run_collector(argv: list[str]) -> tuple[int, str]:
    """Runs numaprof-collect, forwarding SIGINT/SIGTERM to it (it forwards to the program).

    Returns its exit status and the line it wrote if it failed (through --error-fd, so
    that the user sees one line: the collector's reason with what record did about it).
    """
    rfd, wfd = os.pipe()
    argv = [argv[0], "--error-fd", str(wfd), *argv[1:]]
    try:
        proc = subprocess.Popen(argv, stdin=None, stdout=None, stderr=None, pass_fds=(wfd,))
    except OSError as e:
        os.close(rfd)
        raise NumaprofError(f"cannot run the collector {argv[0]}: {e.strerror}",
                            COLLECTOR_FAILED) from e
    finally:
        os.close(wfd)

    def forward(signum, _frame):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                rc = proc.wait()
                break
            except KeyboardInterrupt:
                continue
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    with os.fdopen(rfd, "rb") as f:  # the collector has exited: its write end is closed
        said = f.read(4096).decode(errors="replace").strip()
    return rc, said.removeprefix("numaprof: ").splitlines()[0] if said else ""


def _finish(cfg: RecordConfig, manifest: dict, rc: int) -> dict:
    collector_json = cfg.output / "collector.json"
    info: dict = {}
    try:
        info = json.loads(collector_json.read_text())
    except (OSError, ValueError):
        info = {}
    manifest["end_time"] = _utc_now()
    manifest["collector"] = info
    manifest["backend"] = info.get("backend")
    manifest["backend_reason"] = info.get("backend_reason", {})
    manifest["sampling"].update(
        {k: info[k] for k in ("freq", "event", "fault_event") if k in info}
    )
    manifest["counts"] = info.get("counts", {})
    status = info.get("exit_status", rc if rc >= 0 else 128 - rc)
    manifest["exit_status"] = status
    reason = None
    if not info:
        reason = "the collector stopped without writing collector.json"
    elif info.get("interrupted"):
        reason = f"interrupted by {info['interrupted']}"
    elif info.get("signal"):
        reason = f"the program was killed by signal {info['signal']}"
    manifest["complete"] = reason is None
    manifest["incomplete_reason"] = reason
    return manifest


class _Prefetch:
    """What `record` needs after the exit, read while the program runs.

    The command's executable is known before it starts: a thread at the lowest priority
    (nice 19, so that it takes only cpu time the program leaves idle) reads its DWARF file
    table, hashes its sources and the executable, and imports what the end of `record`
    imports (numpy for the mappings table).  After the exit `_hash_sources` redoes
    whatever changed since (a `stat` per file tells).  A failure here only means that the
    work is done after the exit, as without the thread.
    """

    def __init__(self, cfg: RecordConfig):
        from numaprof.recommender.sources import HashCache

        self.cache = HashCache()
        exe = shutil.which(cfg.command[0]) if cfg.command else None
        self._thread = threading.Thread(target=self._run, args=(exe,), name="numaprof-prefetch",
                                        daemon=True)
        self._thread.start()

    def _run(self, exe: str | None) -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except OSError:
            pass
        try:
            import numaprof.analyzer.profile  # noqa: F401  (numpy: 0.1 s of imports)
            from numaprof.recommender.sources import hash_sources

            if exe:
                real = os.path.realpath(exe)
                hash_sources([real], self.cache)
                self.cache.digest(real)
        except Exception:  # noqa: BLE001 - the same work is done after the exit
            pass

    def join(self):
        self._thread.join()
        return self.cache


def _hash_sources(cfg: RecordConfig, cache=None) -> None:
    """Stores the hashes of the user's source files (sources.json) for `suggest --apply`.

    The executables are the program and the user's own shared objects seen mapped in the
    run; system files are never patched, so they are left out.
    """
    from numaprof.analyzer.profile import read_table
    from numaprof.recommender.sources import write_sources_json

    executables: list[str] = []
    try:
        paths_seen = read_table(cfg.output, "mappings")["path"]
    except Exception:  # a run that wrote no mappings: only the command itself
        paths_seen = []
    if cfg.command:
        exe = shutil.which(cfg.command[0])
        if exe:
            executables.append(os.path.realpath(exe))
    ours = os.path.realpath(paths.libexec_dir()) + os.sep  # the shim is not the user's code
    profile_dir = os.path.realpath(cfg.output) + os.sep  # nor the shim's own files
    for p in dict.fromkeys(str(x) for x in paths_seen):
        if (p.startswith("/") and not is_system_path(p) and os.path.isfile(p)
                and not os.path.realpath(p).startswith((ours, profile_dir))):
            executables.append(os.path.realpath(p))
    executables = list(dict.fromkeys(executables))
    try:
        sources = write_sources_json(cfg.output, executables, cache)
    except OSError as e:
        if _disk_full(e):
            raise NumaprofError(f"cannot write the profile {cfg.output}: {e.strerror}") from e
        print(f"numaprof: warning: cannot hash the sources ({e.strerror}); "
              "suggest --apply will refuse to patch", file=sys.stderr)
        return
    _archive(cfg.output, executables, sources, cache)


ARCHIVE_LIMIT = 256 << 20  # bytes of executables and sources copied into one profile


def _archive(out: Path, executables: list[str], sources: dict[str, str], cache=None) -> None:
    """Copies the user's executables and sources into <profile>/archive (content-addressed),
    so that report names objects right after a rebuild or a patch (like perf archive)."""
    from numaprof.recommender.sources import HashCache

    cache = cache or HashCache()

    base = out / "archive"
    doc: dict = {"binaries": {}, "sources": {}, "skipped": []}
    used = 0
    items = [("sources", p, h) for p, h in sources.items()]
    items += [("binaries", p, None) for p in executables]
    for group, path, digest in items:
        try:
            size = os.path.getsize(path)
            if used + size > ARCHIVE_LIMIT:
                doc["skipped"].append(path)
                continue
            digest = digest or cache.digest(path)
            base.mkdir(mode=0o700, exist_ok=True)
            target = base / digest
            if not target.exists():
                shutil.copyfile(path, target)
                target.chmod(0o600)
            used += size
            doc[group][path] = digest
        except OSError as e:
            if _disk_full(e):
                raise NumaprofError(f"cannot write the profile {out}: {e.strerror}") from e
            doc["skipped"].append(path)
    try:
        _write_json_atomic(out / "archive.json", doc)
    except NumaprofError as e:
        if isinstance(e.__cause__, OSError) and _disk_full(e.__cause__):
            raise
        print(f"numaprof: warning: no archive of the binaries: {e}", file=sys.stderr)


def _summary(cfg: RecordConfig, manifest: dict) -> str:
    counts = manifest.get("counts", {})
    n = counts.get("samples", 0)
    with_addr = counts.get("with_address", 0)
    spin = (manifest.get("collector") or {}).get("rules", {}).get("spin", 0)
    busy = n - spin  # busy-waiting threads access no memory (rule spin)
    cov = f", {100.0 * with_addr / busy:.0f}% with a data address" if busy > 0 else ""
    if spin:
        cov += f", {spin} spin-waiting"
    lost = counts.get("lost", 0)
    where = f"{cfg.output}/"
    nxt = "numaprof report" if not cfg.output_given else f"numaprof report {cfg.output}"
    state = "" if manifest["complete"] else f" [incomplete: {manifest['incomplete_reason']}]"
    return (f"numaprof: profile in {where} ({n} samples{cov}, {lost} lost, "
            f"backend {manifest.get('backend')}){state}; next: {nxt}")


def run_record(cfg: RecordConfig, argv: list[str]) -> int:
    """Records `cfg.command` (or attaches to cfg.pid); returns the program's exit status."""
    collector_argv = _collector_argv(cfg)  # fails early if the collector is not built
    old = _prepare_output(cfg)
    manifest_path = cfg.output / "manifest.json"
    manifest = _manifest(cfg, argv)
    try:
        _write_json_atomic(manifest_path, manifest)
    except NumaprofError:
        _discard(cfg.output, old)
        raise
    prefetch = _Prefetch(cfg)
    rc, said = _run_collector(collector_argv)
    cache = prefetch.join()
    if rc >= 0 and not (cfg.output / "collector.json").exists():
        # The run never started, or the collector could not write its results (a full
        # disk).  Leave no half-written profile; the previous one comes back.
        _discard(cfg.output, old)
        why = said or f"numaprof-collect stopped with status {rc} without writing its results"
        if rc == COLLECTOR_FAILED:  # the command did not run
            raise NumaprofError(why, COLLECTOR_FAILED)
        kept = f"; the previous profile is back in {cfg.output}" if old is not None else ""
        raise NumaprofError(f"{why} (the program's exit status was {rc}; nothing was "
                            f"kept{kept})", COLLECTOR_FAILED)
    if said:  # the command ran and the profile is there: the collector's line stands
        print(f"numaprof: {said}", file=sys.stderr)
    manifest = _finish(cfg, manifest, rc)
    try:
        if manifest["collector"].get("write_error"):
            raise NumaprofError(f"cannot write the profile {cfg.output}: "
                                f"{manifest['collector']['write_error']}")
        _hash_sources(cfg, cache)
        _write_json_atomic(manifest_path, manifest)
    except NumaprofError as e:
        _discard(cfg.output, old)
        kept = f"; the previous profile is back in {cfg.output}" if old is not None else ""
        raise NumaprofError(f"{e} (the program's exit status was {manifest['exit_status']}; "
                            f"nothing was kept{kept})", COLLECTOR_FAILED) from e
    if manifest["counts"] or manifest["collector"]:
        print(_summary(cfg, manifest), file=sys.stderr)
    status = manifest["exit_status"]
    return int(status) if status is not None else rc


@click.command(context_settings={"ignore_unknown_options": True,
                                 "allow_interspersed_args": False})
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help=f"Profile directory (default ./{DEFAULT_PROFILE}; an existing one is kept "
              "as .old).  %r expands to the MPI rank, %h to the host, %p to the pid.")
@click.option("--backend", type=click.Choice(["auto", "pebs", "ibs", "soft"]), default="auto",
              show_default=True, help="Sampling backend.")
@click.option("--freq", type=click.IntRange(min=10, max=100000), default=None,
              help=f"Samples per second per thread (default {defaults.FREQ}).")
@click.option("--alloc-threshold", type=click.IntRange(min=1), default=defaults.ALLOC_THRESHOLD,
              show_default=True,
              help="Track heap allocations of at least this many bytes with their call stack.")
@click.option("-p", "--pid", type=click.IntRange(min=1), default=None,
              help="Attach to a running process instead of starting one.")
@click.option("--duration", type=click.FloatRange(min=0.1), default=None,
              help="With -p: seconds to record (default 10).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(output, backend, freq, alloc_threshold, pid, duration, command):
    """Run COMMAND with memory-access sampling and write a profile.

    Samples every thread and child process of COMMAND (software register sampling where
    there is no PMU), tracks its heap and static arrays and first touches, and returns
    COMMAND's exit status.  Then run `numaprof report` and `numaprof suggest`.

    \b
      numaprof record ./app args...
      numaprof record -o prof --freq 4000 -- ./app
    """
    if command and command[0] == "--":
        command = command[1:]
    if not command and not pid:
        raise click.UsageError("give a command to run (numaprof record ./app) or -p PID")
    cfg = RecordConfig(
        command=tuple(command),
        output=Path(expand_output(str(output))) if output else Path(DEFAULT_PROFILE),
        output_given=output is not None,
        backend=backend,
        freq=freq,
        alloc_threshold=alloc_threshold,
        pid=pid,
        duration=duration,
    )
    rc = run_record(cfg, ["numaprof", *sys.argv[1:]])
    sys.exit(rc)
