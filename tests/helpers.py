"""Helpers shared by the test modules: how to run numaprof from the tests, and how to
build the small programs they compile."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DATA = ROOT / "tests" / "data"  # stored profiles, sysroots and other fixtures
PROGS = ROOT / "tests" / "progs"  # test programs


def numaprof_argv() -> list[str]:
    """The numaprof command: the installed entry point, else the module from this checkout."""
    exe = Path(sys.executable).parent / "numaprof"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "numaprof.cli.main"]


def run_numaprof(*args, cwd=None, env=None, timeout=600, check=False):
    e = dict(os.environ)
    if env:
        e.update(env)
    if "numaprof.cli.main" in " ".join(numaprof_argv()):
        e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    proc = subprocess.run([*numaprof_argv(), *map(str, args)], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"numaprof {' '.join(map(str, args))} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc




def compile_openmp(source: Path, exe: Path, *extra: str) -> Path:
    """``gcc -O2 -g -fopenmp -o exe source extra...``: a test program built as users build
    theirs; returns ``exe``."""
    subprocess.run(["gcc", "-O2", "-g", "-fopenmp", "-o", str(exe), str(source), *extra], check=True)
    return exe


def recorded_report(work: Path, name: str, *args: str, flags: tuple[str, ...] = ()) -> dict:
    """tests/progs/<name>.c built (compile_openmp, with ``flags``), recorded into
    work/p.data with 2 threads and ``args``: its `report --format json`."""
    import json

    exe = compile_openmp(PROGS / f"{name}.c", work / name, *flags)
    run_numaprof("record", "-o", work / "p.data", "--", exe, *args, env={"OMP_NUM_THREADS": "2"}, check=True)
    return json.loads(run_numaprof("report", work / "p.data", "--format", "json", check=True).stdout)


def build_program(tmp_path: Path, name: str, src: str, compiler: str, flags: list[str],
                  tools: tuple[str, ...] = ()) -> Path:
    """Writes ``src`` to ``tmp_path / name`` and compiles it to ``tmp_path / stem``;
    skips the test when the compiler or one of ``tools`` (objdump...) is not installed."""
    import pytest

    for tool in (compiler, *tools):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    source = tmp_path / name
    source.write_text(src)
    exe = tmp_path / name.split(".")[0]
    # in tmp_path: gfortran writes a module's .mod file where it runs
    subprocess.run([compiler, *flags, "-o", str(exe), str(source)], check=True, capture_output=True,
                   cwd=tmp_path)
    return exe


def write_source(tmp_path: Path, text: str, name: str = "t.c") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def line_of(text: str, needle: str) -> int:
    """The 1-based number of the first line of ``text`` containing ``needle``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def outputs_before_after(tmp_path: Path, original: str, patched: str, flags=(),
                         args=()) -> list[str]:
    """A C source and its patched version, each built with gcc -O2 -fopenmp -Wall -Werror
    (and ``flags``) and run with ``args``: their two outputs."""
    outs = []
    for name, text in (("before.c", original), ("after.c", patched)):
        exe = build_program(tmp_path, name, text, "gcc",
                            ["-O2", "-fopenmp", "-Wall", "-Werror", *flags])
        outs.append(subprocess.run([str(exe), *args], capture_output=True, text=True,
                                   check=True).stdout)
    return outs


def fill_disk(disk: Path, leave: int) -> Path:
    """Fills the file system holding ``disk`` but for ``leave`` bytes, with the file
    ``disk/filler`` (written unbuffered: a buffered file would fail again at its close,
    flushing what the full disk refused); returns the filler."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while os.write(fd, b"\0" * 65536):
            pass
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def objects_table(rows, pid: int = 7) -> dict:
    """An objects table (docs/profile-format.md) from (addr, size, stack, t0, t1, period)
    rows, optionally followed by instances and extent (short-lived summaries): heap
    blocks of one process, as the analyzer reads them."""
    import numpy as np

    cols = list(zip(*rows, strict=True))
    n = len(rows)
    t = {
        "pid": np.full(n, pid, dtype=np.uint32), "addr": np.array(cols[0], dtype=np.uint64),
        "size": np.array(cols[1], dtype=np.uint64), "stack": np.array(cols[2], dtype=np.uint32),
        "time": np.array(cols[3], dtype=np.uint64), "free_time": np.array(cols[4], dtype=np.uint64),
        "sample_period": np.array(cols[5], dtype=np.uint32), "kind": np.ones(n, dtype=np.uint8),
        "holder": [""] * n,
    }
    if n and len(rows[0]) > 6:
        t.update(instances=np.array(cols[6], dtype=np.uint32), extent=np.array(cols[7], dtype=np.uint64),
                 lifetime=np.full(n, 1000, dtype=np.uint64))
    return t


def serially_touched_object(name: str, site: str, kind: str, sites: list[str], size: int = 1 << 20):
    """An analysed object (ObjectResult) first touched by one thread at ``sites``
    (``func@file:line``), regular, for the patch tests."""
    import numpy as np

    from numaprof.analyzer.model import FirstTouch, ObjectResult

    ft = FirstTouch(threads=1, nodes=[0], master_fraction=1.0, master_tid=1, sites=sites,
                    pages=10, serial=True)
    return ObjectResult(name=name, site=site, kind=kind, address=0, size=size, samples=9,
                        share=0.3, pattern="regular", pattern_confidence=0.9, reads=0.5,
                        writes=0.5, rmw=0.0, first_touch=ft, pages_by_node=[256],
                        traffic=np.zeros((1, 1)), local_fraction=1.0, load_per_node=[1.0],
                        imbalance=1.0)
