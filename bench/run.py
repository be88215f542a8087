"""Benchmarks of SPEC §7 (not pass/fail tests): recording overhead as a ratio measured
side by side with interleaved repetitions (best of N), and profile bytes per sample.

    .venv/bin/python bench/run.py [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def numaprof() -> list[str]:
    exe = Path(sys.executable).parent / "numaprof"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "numaprof.cli.main"]


def build() -> dict[str, list[str]]:
    subprocess.run(["make", "-s", "-C", str(ROOT / "examples")], check=True)
    alloc = ROOT / "build" / "bench" / "alloc_heavy"
    alloc.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-O2", "-fopenmp", "-o", str(alloc), str(ROOT / "bench" /
                    "alloc_heavy.c")], check=True)
    return {
        "memory-bound (numa_aware 64 MiB x 1200)": [str(ROOT / "examples" / "numa_aware"), "64", "1200"],
        "allocation-heavy (alloc_heavy)": [str(alloc), "60000000"],
    }


def timed(argv: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - t0


def profile_bytes(d: Path) -> tuple[int, int]:
    total = sum(p.stat().st_size for p in d.iterdir() if p.name.startswith("samples."))
    n = json.loads((d / "manifest.json").read_text())["counts"]["samples"]
    return total, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
    for label, argv in build().items():
        plain, recorded = [], []
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "p"
            for _ in range(args.reps):  # interleaved: plain, recorded, plain, recorded, ...
                plain.append(timed(argv, env))
                recorded.append(timed([*numaprof(), "record", "-o", str(out), "--", *argv],
                                      env))
            size, n = profile_bytes(out)
        ratio = min(recorded) / min(plain)
        print(f"{label}: plain best {min(plain):.3f} s, recorded best {min(recorded):.3f} s, "
              f"overhead ratio {ratio:.3f}; samples {n}, sample table {size / max(n, 1):.1f} "
              "bytes/sample")


if __name__ == "__main__":
    main()
