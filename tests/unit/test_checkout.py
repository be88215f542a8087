"""The tests run the code of this checkout: Python edits are imported without a reinstall
and the native parts the CLI runs are the ones built from this tree (make build)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from helpers import ROOT, numaprof_argv


def _python_of_numaprof() -> str:
    """The interpreter the `numaprof` entry point runs under (its shebang)."""
    argv = numaprof_argv()
    if len(argv) > 1:  # no entry point: `python -m numaprof.cli.main`
        return argv[0]
    entry = Path(argv[0])
    if entry.read_bytes()[:4] == b"\x7fELF":  # the native launcher: the CLI it runs
        entry = entry.with_name("numaprof-cli")
    first = entry.read_text().splitlines()[0]
    assert first.startswith("#!"), first
    return first[2:].strip()


def test_a_new_python_file_in_the_checkout_is_imported_by_the_installed_command():
    name = f"_edit_probe_{uuid.uuid4().hex[:8]}"
    probe = ROOT / "analyzer" / f"{name}.py"
    probe.write_text("SEEN = 'this checkout'\n")
    try:
        code = (f"import numaprof.analyzer.{name} as m, numaprof.cli.main as c; "
                "print(m.SEEN); print(c.__file__)")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([_python_of_numaprof(), "-c", code], cwd="/", env=env,
                              capture_output=True, text=True, timeout=60)
    finally:
        probe.unlink()
    assert proc.returncode == 0, proc.stderr
    seen, cli_file = proc.stdout.split("\n")[:2]
    assert seen == "this checkout"
    assert Path(cli_file).resolve() == (ROOT / "cli" / "main.py").resolve()


def test_the_collector_the_cli_runs_is_built_from_this_tree_and_up_to_date():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMAPROF_LIBEXEC")}
    code = "from numaprof import paths; print(paths.collector()); print(paths.shim())"
    proc = subprocess.run([_python_of_numaprof(), "-c", code], cwd="/", env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    collector, shim = (Path(p) for p in proc.stdout.split())
    assert collector.resolve().is_relative_to(ROOT / "build"), collector
    # each binary against the checkout's files its objects were compiled from (the
    # compiler's dependency files in make build's tree), and against every C source
    # of its target, so that a file added since the last build counts too
    for binary, targets, srcdir in ((collector, ("numaprof-collect", "nmp_common"), "src"),
                                    (shim, ("numaprof_shim",), "shim")):
        deps = list((ROOT / "collector" / srcdir).glob("*.c"))
        for target in targets:
            objdir = ROOT / "build" / "cmake" / "collector" / "CMakeFiles" / f"{target}.dir"
            for dfile in objdir.rglob("*.o.d"):
                # (the dependency file of a source removed since is stale: skipped)
                deps += [Path(w) for w in dfile.read_text().replace("\\\n", " ").split()
                         if w.startswith(str(ROOT / "collector")) and Path(w).exists()]
        assert len(deps) > len(list((ROOT / "collector" / srcdir).glob("*.c"))), (
            f"no dependency files for {binary}: was it built by make build?")
        newest = max(deps, key=lambda p: p.stat().st_mtime)
        assert binary.stat().st_mtime >= newest.stat().st_mtime, (
            f"{binary} is older than {newest}: make test did not rebuild the C parts")


def test_the_launcher_is_built_from_this_tree_and_runs_its_collector():
    """The native `numaprof` (collector/launcher) is make build's, and starts the
    collector the CLI would (numaprof/paths.py): this tree's."""
    argv = numaprof_argv()
    if len(argv) > 1:
        return  # no entry point installed: the CLI starts the collector itself
    launcher = Path(argv[0])
    built = ROOT / "build" / "dev" / "bin" / "numaprof"
    assert launcher.read_bytes() == built.read_bytes(), f"{launcher} is not make build's {built}"
    source = ROOT / "collector" / "launcher" / "numaprof.c"
    assert built.stat().st_mtime >= source.stat().st_mtime, f"{built} is older than {source}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMAPROF_LIBEXEC")}
    env["NUMAPROF_LAUNCHER_DRY_RUN"] = "1"
    proc = subprocess.run([str(launcher), "record", "--", "true"], cwd="/", env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    collector = Path(proc.stdout.split("\n")[0])
    assert collector.resolve() == (ROOT / "build" / "dev" / "libexec" / "numaprof-collect").resolve()


def test_the_test_interpreter_imports_this_checkout():
    import numaprof.analyzer.core as core

    assert Path(core.__file__).resolve() == (ROOT / "analyzer" / "core.py").resolve()
    assert Path(sys.executable).exists()
