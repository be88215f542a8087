"""Builds tests/progs/hw_decode_harness.c against this checkout's collector/src/hw_*.c and
perf_sample.c, so the Python tests run the collector's own parser, decoder and classifier
(not a copy)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT

SRC = ROOT / "collector" / "src"


def build(out_dir: Path) -> Path:
    """Compiles the harness into `out_dir`; skips the test where gcc or libpfm4 is missing."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    exe = out_dir / "hw_decode_harness"
    srcs = [ROOT / "tests" / "progs" / "hw_decode_harness.c",
            *(SRC / f for f in ("hw_decode.c", "perf_sample.c", "hw_sysfs.c", "hw_attrs.c"))]
    r = subprocess.run(["gcc", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                        f"-I{ROOT / 'collector' / 'include'}", f"-I{SRC}", *map(str, srcs),
                        "-lpfm", "-o", str(exe)], capture_output=True, text=True)
    if r.returncode != 0 and "pfmlib" in r.stderr:
        pytest.skip("needs libpfm4-dev")
    assert r.returncode == 0, r.stderr
    return exe


def classify(exe: Path, values) -> list[tuple[int, int, int]]:
    """nmp_memsrc_classify() of each value: (class, hops, remote)."""
    text = "".join(f"{int(v):x}\n" for v in values)
    r = subprocess.run([str(exe), "classify"], input=text, capture_output=True, text=True,
                       check=True)
    return [tuple(map(int, ln.split())) for ln in r.stdout.splitlines()]
