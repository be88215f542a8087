"""`numaprof record`'s work: run a program under the collector and write a profile directory.

Nothing here imports click: `numaprof record` with ordinary options is parsed by
`parse_args` and run from here without the CLI's other modules (cli/main.py), since
every millisecond before the collector starts is a millisecond of the user's run
(docs/record.md, "What recording costs").  cli/record.py is the click command, for
--help, errors and the rarer options; a test checks that both read the same argv alike.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import threading
import time
from collections import namedtuple
from pathlib import Path

from numaprof import __version__, defaults, paths
from numaprof.analyzer.format import FORMAT, VERSION, not_accesses
from numaprof.cli.supervise import (
    COLLECTOR_FAILED,
    STOP_SIGNALS,
    process_alive,
    run_collector,
    signal_name,
)
from numaprof.defaults import DEFAULT_PROFILE
from numaprof.errors import NumaprofError, UsageError
from numaprof.syspaths import is_system_path

ENV_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "NUMAPROF_", "SLURM_", "OMPI_")


#: What one `numaprof record` does, parsed once (frozen; `_replace` derives another).  A
#: namedtuple: typing's NamedTuple or a dataclass would be 2-7 ms of imports before the
#: program starts.  Fields:
#:   command (tuple of str), output (Path), output_given, backend, freq (int or None: the
#:   collector's default), alloc_threshold, pid and duration (with -p), redact_args;
#:   fault_period: 0 for the collector's default (17, or 1 where THP is "always");
#:   rotate_on: with -p, a signal that ends this recording early (a slice's end);
#:   alloc_dir: with -p, the allocation shim's directory of a command numaprof record started
#:     to record in slices (cli/slices.py): its allocations are known, no heap is read;
#:   release_fd: with -p, a pipe the process waits on before its exec, written once attached;
#:   children: with -p, the processes it started before too (a launched command).
RecordConfig = namedtuple(
    "RecordConfig",
    ["command", "output", "output_given", "backend", "freq", "alloc_threshold", "pid",
     "duration", "redact_args", "fault_period", "rotate_on", "alloc_dir", "release_fd",
     "children"],
    defaults=[False, 0, 0, None, None, False])


#: Sampling backends, in the order `auto` tries the hardware ones.
BACKENDS = ("auto", "pebs", "ibs", "soft")
#: record's integer options: option -> (RecordConfig field or setting, least, most).  The
#: click command (cli/record.py) declares its ranges from here, and `parse_args` checks them.
INT_OPTIONS = {
    "--freq": ("freq", 10, 100000),
    "--alloc-threshold": ("alloc_threshold", 1, None),
    "--small-sample": ("small_sample", 0, 0x7FFFFFFF),
    "--short-lived": ("short_lived", 0, (1 << 63) - 1),
    "--fault-period": ("fault_period", 1, 1 << 20),
}


def make_config(command: tuple[str, ...], output: str | None = None, backend: str = "auto",
                freq: int | None = None, alloc_threshold: int | None = None,
                small_sample: int | None = None, short_lived: int | None = None,
                fault_period: int | None = None, pid: int | None = None,
                duration: float | None = None, redact_args: bool = False) -> RecordConfig:
    """The RecordConfig of record's option values, however they were parsed.

    --small-sample and --short-lived are the allocation shim's settings: they reach it, in
    the program, through the environment the collector passes on.
    """
    if small_sample is not None:
        os.environ["NUMAPROF_SMALL_SAMPLE"] = str(small_sample)
    if short_lived is not None:
        os.environ["NUMAPROF_SHORT_LIVED"] = str(short_lived)
    return RecordConfig(
        command=tuple(command),
        output=Path(expand_output(str(output))) if output else Path(DEFAULT_PROFILE),
        output_given=output is not None,
        backend=backend,
        freq=freq,
        alloc_threshold=defaults.ALLOC_THRESHOLD if alloc_threshold is None else alloc_threshold,
        pid=pid,
        duration=duration,
        redact_args=redact_args,
        fault_period=fault_period or 0,
    )


def parse_args(args: list[str]) -> dict | None:
    """record's arguments (after `record`) as make_config's keywords, for the ordinary
    ways of launching a command; None for anything else (-h, -p, --switch-output, an
    unknown option, a value out of range, no command), which the click command parses and
    explains.  Reads what click reads: options up to the first other word or `--`."""
    values: dict = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name == "--redact-args" and not eq:
            values["redact_args"] = True
            i += 1
            continue
        if name not in ("-o", "--output", "--backend", *INT_OPTIONS):
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        if value.startswith("-") or not value:
            return None
        if name in ("-o", "--output"):
            values["output"] = value
        elif name == "--backend":
            if value not in BACKENDS:
                return None
            values["backend"] = value
        else:
            field, least, most = INT_OPTIONS[name]
            if not (value.isascii() and value.isdigit()):
                return None
            number = int(value)
            if number < least or (most is not None and number > most):
                return None
            values[field] = number
    command = args[i:]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return None
    values["command"] = tuple(command)
    return values


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
                    raise UsageError(
                        "-o uses %r but no MPI rank is set (" + ", ".join(RANK_VARIABLES) + ")")
                out.append(rank)
            elif key == "h":
                out.append(os.uname().nodename)
            elif key == "p":
                out.append(str(os.getpid()))
            elif key == "%":
                out.append("%")
            else:
                raise UsageError(f"unknown %{key} in -o {template} (use %r, %h, %p or %%)")
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _utc_now() -> str:
    ns = time.time_ns()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns // 1000 % 10**6:06d}Z"


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


def _discard(out: Path, old: Path | None) -> str:
    """Removes a profile that could not be finished and restores the previous one.

    Returns what became of the previous profile, as the end of a sentence ("" if there
    was none), for the one line that reports the failure.
    """
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    if old is None:
        return ""
    try:
        old.rename(out)
    except OSError as e:
        return f"; the previous profile stays in {old} ({e.strerror})"
    return f"; the previous profile is back in {out}"


def _disk_full(e: OSError) -> bool:
    return e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


REDACTED = "<redacted>"


def redact_command(command: tuple[str, ...], argv: list[str]) -> tuple[list[str], list[str]]:
    """The command and numaprof's own argv with the command's arguments replaced by
    REDACTED, one for one (the program name stays): what --redact-args keeps."""
    cmd = [*command[:1], *[REDACTED] * (len(command) - 1)]
    n = len(command)
    if n and argv[len(argv) - n:] == list(command):
        return cmd, [*argv[:len(argv) - n], *cmd]
    return cmd, [*argv[:1], "record", "--redact-args", "--", *cmd]


def _manifest(cfg: RecordConfig, argv: list[str]) -> dict:
    try:
        cwd = os.getcwd()
    except OSError:  # removed from under us: the program runs there all the same
        cwd = None
    command = list(cfg.command)
    if cfg.redact_args:
        command, argv = redact_command(cfg.command, argv)
    return {
        "format": FORMAT,
        "version": VERSION,
        "numaprof_version": __version__,
        "complete": False,
        # what stays if numaprof record itself is killed (kill -9) before the end
        "incomplete_reason": "recording in progress, or numaprof record was killed",
        "command": command,
        "argv": argv,
        "args_redacted": cfg.redact_args,
        "cwd": cwd,
        "host": os.uname().nodename,
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "start_time": _utc_now(),
        "end_time": None,
        "exit_status": None,
        "backend": None,
        "backend_reason": {},
        "sampling": {"freq": cfg.freq, "alloc_threshold": cfg.alloc_threshold,
                     "small_sample": _shim_setting("NUMAPROF_SMALL_SAMPLE", defaults.SMALL_SAMPLE,
                                                   0x7FFFFFFF),
                     "short_lived": _shim_setting("NUMAPROF_SHORT_LIVED", defaults.SHORT_LIVED,
                                                  (1 << 63) - 1),
                     # None: the collector's default (its collector.json says which)
                     "fault_period": cfg.fault_period or None},
        "counts": {},
        # a slice of a launched command: its allocations from the shim, since its start
        "attach": ({"pid": cfg.pid, "duration": cfg.duration}
                   | ({"allocations": "shim"} if cfg.alloc_dir is not None else {})) if cfg.pid else None,
    }


def _shim_setting(name: str, default: int, limit: int) -> int | None:
    """A setting of the allocation shim (NUMAPROF_SMALL_SAMPLE: bytes, 0 off;
    NUMAPROF_SHORT_LIVED: ns, 0 every block recorded) as it will read it from the
    environment (at most `limit`); None if the value there is not one it accepts."""
    text = os.environ.get(name, "")
    if not text:
        return default
    return int(text) if text.isdigit() and int(text) <= limit else None


def _collector_argv(cfg: RecordConfig) -> list[str]:
    # --rotate: the collector makes the profile directory, keeping a previous profile as
    # <dir>.old and touching nothing numaprof did not write (collector/src/outdir.c)
    argv = [str(paths.collector()), "-o", str(cfg.output), "--rotate", "--backend", cfg.backend,
            "--alloc-threshold", str(cfg.alloc_threshold)]
    shim = paths.shim()
    if shim.exists():
        argv += ["--shim", str(shim)]
    if cfg.freq:
        argv += ["--freq", str(cfg.freq)]
    if cfg.fault_period:
        argv += ["--fault-period", str(cfg.fault_period)]
    if cfg.pid:
        # rotate_on without a duration: until that signal (or Ctrl-C, or the process's end)
        until_stopped = cfg.rotate_on and not cfg.duration
        argv += ["-p", str(cfg.pid), "--duration", "0" if until_stopped else str(cfg.duration or 10)]
        if cfg.alloc_dir is not None:
            argv += ["--alloc-dir", str(cfg.alloc_dir)]
        if cfg.release_fd is not None:
            argv += ["--release-fd", str(cfg.release_fd)]
        if cfg.children:
            argv += ["--children"]
    else:
        argv += ["--", *cfg.command]
    return argv


def _finish(cfg: RecordConfig, manifest: dict, rc: int) -> dict:
    collector_json = cfg.output / "collector.json"
    info: dict = {}
    try:
        info = json.loads(collector_json.read_text())
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict):
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
    elif info.get("interrupted") and not (cfg.rotate_on and info["interrupted"] == "SIGUSR2"):
        # (a slice ended by SIGUSR2 under --switch-output is whole: the next one follows)
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
    table and hashes its sources and the executable.  After the exit `_hash_sources` redoes
    whatever changed since (a `stat` per file tells).  A failure here only means that the
    work is done after the exit, as without the thread.
    """

    def __init__(self, cfg: RecordConfig):
        self.cache = None  # made by the thread: its imports (hashlib, ssl) are not on the way to the exec
        self._command = cfg.command[0] if cfg.command else None
        self._thread = None

    def start(self) -> None:
        """Called once the collector runs: before that, the thread's imports (7-10 ms of
        OpenSSL's start in hashlib, holding the interpreter lock) would delay the exec."""
        thread = threading.Thread(target=self._run, args=(self._command,), name="numaprof-prefetch",
                                  daemon=True)
        # the stopping signals and SIGCHLD are for the main thread, which waits for them
        # (cli/supervise.py): the thread starts with them blocked
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, (*STOP_SIGNALS, signal.SIGCHLD))
        try:
            thread.start()
            self._thread = thread
        except RuntimeError:  # no thread: the work is done after the exit
            pass
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _run(self, command: str | None) -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except OSError:
            pass
        try:
            import shutil

            from numaprof.recommender.sources import HashCache, hash_sources

            self.cache = HashCache()
            exe = shutil.which(command) if command else None
            if exe:
                real = os.path.realpath(exe)
                hash_sources([real], self.cache)
                self.cache.digest(real)
        except Exception:  # noqa: BLE001 - the same work is done after the exit
            pass

    def join(self):
        if self._thread is not None:
            self._thread.join()
        return self.cache


class _HeapSnapshot:
    """Attach mode: the running program's heap split into its allocations
    (analyzer/attach.py), read by a thread while the collector starts sampling."""

    def __init__(self, cfg: RecordConfig):
        self.result = None
        self._args = (cfg.pid, cfg.alloc_threshold)
        self._thread = None

    def start(self) -> None:
        """Called once the collector runs (no thread may run while it is forked)."""
        thread = threading.Thread(target=self._run, args=self._args, name="numaprof-heap",
                                  daemon=True)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, (*STOP_SIGNALS, signal.SIGCHLD))
        try:
            thread.start()
            self._thread = thread
        except RuntimeError:
            self._run(*self._args)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _run(self, pid: int, threshold: int) -> None:
        from numaprof.analyzer.attach import snapshot

        self.result = snapshot(pid, threshold)

    def join(self):
        if self._thread is not None:
            self._thread.join()
        return self.result


def _heap_at_end(cfg: RecordConfig):
    """Attach mode, when sampling stopped: the program's heap read again (what it
    allocated and released while it was recorded), or None when it has ended."""
    from numaprof.analyzer.attach import snapshot

    if not process_alive(cfg.pid):
        return None
    return snapshot(cfg.pid, cfg.alloc_threshold)


def _add_heap_objects(cfg: RecordConfig, manifest: dict, snap, end=None) -> None:
    """Adds the allocations found in the attached program's heap (when numaprof attached,
    and ``end``: when it stopped) to the objects table, and says in the manifest what was
    found; a heap that could not be split is one warning line, also kept in the manifest
    (the report shows it)."""
    from numaprof.analyzer.attach import across, write_objects

    if snap is None:
        return
    objects = across(snap, end)
    manifest["attach"] = {**(manifest.get("attach") or {}), "heap": snap.info}
    if snap.warning:
        print(f"numaprof: warning: {snap.warning}", file=sys.stderr)
        manifest["warnings"] = [*(manifest.get("warnings") or []), snap.warning]
    try:
        write_objects(cfg.output, cfg.pid, objects)
    except OSError as e:
        raise NumaprofError(f"cannot write the profile {cfg.output}: {e.strerror}") from e


def _hash_sources(cfg: RecordConfig, cache=None) -> None:
    """Stores the hashes of the user's source files (sources.json) for `suggest --apply`.

    The executables are the program and the user's own shared objects seen mapped in the
    run; system files are never patched, so they are left out.
    """
    import shutil

    from numaprof.recommender.sources import write_sources_json

    executables: list[str] = []
    paths_seen = _mapped_paths(cfg.output)
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


#: The most bytes of mapped paths read back after the run (4096-byte paths: 16384 files).
MAPPED_PATHS_LIMIT = 64 << 20


def _mapped_paths(out: Path) -> list[str]:
    """The distinct paths of the mappings the collector saw: the strings of the
    `mappings.path` column, read from its string heap without the table reader (and
    numpy, a tenth of a second of imports after the program's exit); [] if none."""
    from numaprof.analyzer import profile_io

    try:
        data = profile_io.read_bytes(out / "mappings.path.heap", MAPPED_PATHS_LIMIT)
    except Exception:  # noqa: BLE001 - no mappings (a run cut short): only the command
        return []
    return list(dict.fromkeys(p.decode("utf-8", "surrogateescape")
                              for p in data.split(b"\0") if p))


ARCHIVE_LIMIT = 256 << 20  # bytes of executables and sources copied into one profile


def _archive(out: Path, executables: list[str], sources: dict[str, str], cache=None) -> None:
    """Copies the user's executables and sources into <profile>/archive (content-addressed),
    so that report names objects right after a rebuild or a patch (like perf archive)."""
    import shutil

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
    rules = (manifest.get("collector") or {}).get("rules", {})
    spin = rules.get("spin", 0)
    # busy-waiting threads (rule spin) and waits on a divide (rule divide) access no memory
    busy = n - not_accesses(rules)
    cov = f", {100.0 * with_addr / busy:.0f}% with a data address" if busy > 0 else ""
    if spin:
        cov += f", {spin} spin-waiting"
    lost = counts.get("lost", 0)
    where = f"{cfg.output}/"
    nxt = "numaprof report" if not cfg.output_given else f"numaprof report {cfg.output}"
    state = "" if manifest["complete"] else f" [incomplete: {manifest['incomplete_reason']}]"
    return (f"numaprof: profile in {where} ({n} samples{cov}, {lost} lost, "
            f"backend {manifest.get('backend')}){state}; next: {nxt}")


def run_record(cfg: RecordConfig, argv: list[str], launched: tuple[int, int, int] | None = None) -> int:
    """Records `cfg.command` (or attaches to cfg.pid); returns the program's exit status.

    `launched`: the collector the native launcher already started for this command
    (cli/supervise.run_collector), adopted instead of started here.
    """
    try:
        collector_argv = _collector_argv(cfg)  # fails early if the collector is not built
    except NumaprofError as e:
        if launched is None:
            raise NumaprofError(str(e), COLLECTOR_FAILED) from e
        collector_argv = []
    manifest_path = cfg.output / "manifest.json"
    manifest = _manifest(cfg, argv)
    prefetch = _Prefetch(cfg)
    heap = _HeapSnapshot(cfg) if cfg.pid and cfg.alloc_dir is None else None
    unwritten: list[NumaprofError] = []  # the manifest the program's start could not wait for

    def started(kept: bool | None, running: bool) -> None:
        if kept is None:
            return  # the collector made no profile: its one line says why
        try:
            _write_json_atomic(manifest_path, manifest)
        except NumaprofError as e:
            unwritten.append(e)
        if running:  # (a program already ended, as a launched `true` may: no time to use)
            prefetch.start()

    def collector_died(signum: int, pid: int) -> None:
        print(f"numaprof: numaprof-collect was killed by {signal_name(signum)} (out of "
              f"memory?): sampling stopped; the program (pid {pid}) goes on to its end, and "
              f"the partial profile stays in {cfg.output}/", file=sys.stderr)

    run = run_collector(collector_argv, collector_died,
                        also_relay=(cfg.rotate_on,) if cfg.rotate_on else (),
                        on_started=started, launched=launched,
                        on_spawned=heap.start if heap is not None else None)
    if run.kept is None:  # nothing made, nothing moved: the collector's line says why
        why = run.said or (f"numaprof-collect was killed by {signal_name(-run.status)}"
                           if run.status < 0 else
                           f"numaprof-collect stopped with status {run.status}")
        raise NumaprofError(why, COLLECTOR_FAILED)
    old = cfg.output.with_name(cfg.output.name + ".old") if run.kept else None
    if unwritten:
        rc = run.status if run.status >= 0 else 128 - run.status
        raise NumaprofError(f"{unwritten[0]} (the program's exit status was {rc}; nothing was "
                            f"kept{_discard(cfg.output, old)})", COLLECTOR_FAILED)
    cache = prefetch.join()
    end = _heap_at_end(cfg) if heap is not None else None
    if run.status < 0 and not (cfg.output / "collector.json").exists():
        return _after_collector_death(cfg, manifest, run, cache)
    rc = run.status if run.status >= 0 else 128 - run.status
    if not (cfg.output / "collector.json").exists():
        # The run never started, or the collector could not write its results (a full
        # disk).  Leave no half-written profile; the previous one comes back.
        kept = _discard(cfg.output, old)
        why = run.said or f"numaprof-collect stopped with status {rc} without writing its results"
        if rc == COLLECTOR_FAILED:  # the command did not run
            raise NumaprofError(f"{why}{kept}", COLLECTOR_FAILED)
        raise NumaprofError(f"{why} (the program's exit status was {rc}; nothing was "
                            f"kept{kept})", COLLECTOR_FAILED)
    manifest = _finish(cfg, manifest, rc)
    not_run = manifest["collector"].get("exec_error")
    if not_run:
        # the command could not be executed (a typo, no x bit): like a shell, one line and
        # its 127/126, and no profile of a run that never happened in place of the last one
        why = run.said or f"{cfg.command[0]}: {not_run}"
        raise NumaprofError(f"{why}{_discard(cfg.output, old)}", rc)
    if run.said:  # the command ran and the profile is there: the collector's line stands
        print(f"numaprof: {run.said}", file=sys.stderr)
    try:
        if manifest["collector"].get("write_error"):
            raise NumaprofError(f"cannot write the profile {cfg.output}: "
                                f"{manifest['collector']['write_error']}")
        if heap is not None:
            _add_heap_objects(cfg, manifest, heap.join(), end)
        _hash_sources(cfg, cache)
        _write_json_atomic(manifest_path, manifest)
    except NumaprofError as e:
        kept = _discard(cfg.output, old)
        raise NumaprofError(f"{e} (the program's exit status was {manifest['exit_status']}; "
                            f"nothing was kept{kept})", COLLECTOR_FAILED) from e
    if manifest["counts"] or manifest["collector"]:
        print(_summary(cfg, manifest), file=sys.stderr)
    status = manifest["exit_status"]
    return int(status) if isinstance(status, int) else rc


def _after_collector_death(cfg: RecordConfig, manifest: dict, run, cache) -> int:
    """The collector was killed (out of memory, kill -9) before it wrote its results.

    What it had flushed stays as a partial profile, marked incomplete: the allocation
    shim's files are turned into the objects table, the sources hashed, the manifest
    written.  Returns the program's exit status (record waited for it), else 125.
    """
    why = f"numaprof-collect was killed by {signal_name(-run.status)}"
    import subprocess

    try:
        subprocess.run([str(paths.collector()), "--convert-shim", "-o", str(cfg.output)],
                       stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError:
        pass  # the objects table stays empty; the samples are there
    manifest = _finish(cfg, manifest, COLLECTOR_FAILED)
    manifest["complete"] = False
    manifest["incomplete_reason"] = why
    manifest["exit_status"] = run.program_status
    try:
        _hash_sources(cfg, cache)
        _write_json_atomic(cfg.output / "manifest.json", manifest)
    except NumaprofError as e:
        print(f"numaprof: {why}; the partial profile in {cfg.output}/ is not finished: {e}",
              file=sys.stderr)
        return run.program_status if run.program_status is not None else COLLECTOR_FAILED
    if run.program_status is None:
        print(f"numaprof: {why}; the partial profile is in {cfg.output}/ (incomplete); the "
              "program's exit status is unknown", file=sys.stderr)
        return COLLECTOR_FAILED
    return run.program_status
