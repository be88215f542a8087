"""Benchmarks (not pass/fail tests): recording overhead as a ratio measured
side by side with interleaved repetitions, and profile bytes per sample.

    .venv/bin/python bench/run.py [--reps 5] [--only alloc] [--parts] [--baseline DIR] [--no-perf]

Workloads: a memory-bound OpenMP kernel, the allocation-heavy bench/alloc_heavy, a short
(< 0.5 s) program and `true` (the fixed cost, reported as recorded minus plain).  Each
repetition runs the workload plain, then under `numaprof record` (default settings), then
under `perf record` with the same events at the same rate (cpu-clock, user registers,
data addresses: the software backend's mechanism), so all see the same machine load.  Reported per workload: the wall times (median and
range), the overhead as the median of the per-repetition ratios recorded/plain (and the
ratio of the best times), the collector's own cpu time (collector.json) and the time the
record command spends after the program has ended (conversion of the shim's data,
manifest, source hashes).  With --parts each repetition also runs the workload under the
collector alone (no CLI) and with only the allocation shim preloaded, to tell the costs
apart.  With --baseline DIR (the libexec directory of another build: collector and shim)
each repetition also records with that build, to compare two versions under the same
load.  The machine is shared: use several repetitions and read the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBEXEC = ROOT / "build" / "dev" / "libexec"
BENCH_TMP = ROOT / "build" / "bench" / "tmp"


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
        # the overhead issue's two lengths of a memory-bound OpenMP kernel: ~10 s and ~2 s here
        "memory-bound ~10 s (numa_aware 64 MiB x 3300)": [str(ROOT / "examples" / "numa_aware"), "64", "3300"],
        "memory-bound ~2 s (numa_aware 64 MiB x 660)": [str(ROOT / "examples" / "numa_aware"), "64", "660"],
        "allocation-heavy (alloc_heavy)": [str(alloc), "60000000"],
        "short (serial_init 16 MiB x 40, < 0.5 s)": [str(ROOT / "examples" / "serial_init"), "16", "40"],
        "fixed cost (true)": [shutil.which("true") or "/bin/true"],
    }


# the same mechanism as numaprof's software backend: a cpu-clock timer sample with the user
# registers and the data address (perf record's -d), at numaprof's rate
PERF_REGS = "ax,bx,cx,dx,si,di,bp,sp,ip,r8,r9,r10,r11,r12,r13,r14,r15"


def perf_argv(out: Path, freq: int) -> list[str] | None:
    perf = shutil.which("perf")
    if perf is None:
        return None
    argv = [perf, "record", "-q", "-e", "cpu-clock", "-F", str(freq), f"--user-regs={PERF_REGS}",
            "-d", "-o", str(out), "--"]
    r = subprocess.run([*argv, "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return argv if r.returncode == 0 else None


def timed(argv: list[str], env: dict) -> tuple[float, int, int]:
    """Wall seconds, and the CLOCK_MONOTONIC ns at the start and at the end."""
    start = time.monotonic_ns()
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - t0, start, time.monotonic_ns()


def profile_bytes(d: Path) -> tuple[int, int]:
    total = sum(p.stat().st_size for p in d.iterdir() if p.name.startswith("samples."))
    n = json.loads((d / "manifest.json").read_text())["counts"]["samples"]
    return total, n


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} [{min(xs):.3f}-{max(xs):.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="", help="run only the workloads whose label has this")
    ap.add_argument("--parts", action="store_true",
                    help="also time the collector without the CLI and the shim alone")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="libexec directory of another build, recorded with as 'baseline'")
    ap.add_argument("--no-perf", action="store_true", help="do not time perf record beside")
    args = ap.parse_args()
    from numaprof import defaults

    print(f"{date.today()} {platform.node()}, {os.cpu_count()} cpus, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; numaprof at its default "
          f"{defaults.FREQ} Hz, perf record with the same events and rate")
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
    shim = LIBEXEC / "libnumaprof_shim.so"
    for label, argv in build().items():
        if args.only not in label:
            continue
        runs: dict[str, list[float]] = {"plain": [], "record": []}
        if args.parts:
            runs.update({"collector": [], "shim only": []})
        if args.baseline:
            runs["baseline"] = []
        collector_cpu, before, after = [], [], []
        # profiles go where a user's would (beside the checkout), not to /tmp: on the
        # development VM /tmp's inode group, churned by the test suite, took 30 ms to
        # create a profile's 85 files, 1-2 ms elsewhere on the same disk
        BENCH_TMP.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=BENCH_TMP) as tmp:
            out = Path(tmp) / "p"
            part = Path(tmp) / "part"
            perf = None if args.no_perf else perf_argv(Path(tmp) / "perf.data", defaults.FREQ)
            if perf is not None:
                runs["perf"] = []
            for _ in range(args.reps):  # interleaved: plain, recorded, plain, recorded, ...
                runs["plain"].append(timed(argv, env)[0])
                for d in (out, out.with_name(out.name + ".old")):  # not timed
                    shutil.rmtree(d, ignore_errors=True)
                wall, start, end = timed([*numaprof(), "record", "-o", str(out), "--", *argv], env)
                runs["record"].append(wall)
                col = json.loads((out / "collector.json").read_text())
                collector_cpu.append(col["collector_cpu_ns"] / 1e9)
                before.append((col["start_ns"] - start) / 1e9)
                after.append((end - col["end_ns"]) / 1e9)
                if perf is not None:
                    runs["perf"].append(timed([*perf, *argv], env)[0])
                if args.baseline:
                    shutil.rmtree(part, ignore_errors=True)
                    runs["baseline"].append(timed(
                        [*numaprof(), "record", "-o", str(part), "--", *argv],
                        {**env, "NUMAPROF_LIBEXEC": str(args.baseline.resolve())})[0])
                if args.parts:
                    shutil.rmtree(part, ignore_errors=True)
                    part.mkdir()
                    runs["collector"].append(timed(
                        [str(LIBEXEC / "numaprof-collect"), "-o", str(part), "--shim", str(shim),
                         "--", *argv], env)[0])
                    shutil.rmtree(part, ignore_errors=True)
                    part.mkdir()
                    runs["shim only"].append(timed(
                        argv, {**env, "LD_PRELOAD": str(shim), "NUMAPROF_DIR": str(part)})[0])
            size, n = profile_bytes(out)
        plain = runs["plain"]
        print(f"{label}, {args.reps} interleaved repetitions:")
        for name, ts in runs.items():
            line = f"  {name:10s} wall {spread(ts)} s"
            if name != "plain" and label.startswith("fixed cost"):
                extra = [t - p for t, p in zip(ts, plain, strict=True)]
                line += f"; minus plain: median {spread(extra)} s"
            elif name != "plain":
                ratios = [t / p for t, p in zip(ts, plain, strict=True)]
                line += (f"; ratio to plain: median {spread(ratios)}, best/best "
                         f"{min(ts) / min(plain):.3f}")
            print(line)
        print(f"  collector cpu {spread(collector_cpu)} s; record before the program started "
              f"{spread(before)} s, after it ended {spread(after)} s; samples {n}, sample table "
              f"{size / max(n, 1):.1f} bytes/sample")
        if args.parts:
            parts(runs, before, after)


def parts(runs: dict[str, list[float]], before: list[float], after: list[float]) -> None:
    """Where record's extra time goes, as medians over the repetitions (each part from its
    own repetition's plain run): the CLI and collector before the program's first
    instruction, the time after its exit, the run itself under sampling (the rest), and,
    measured apart, the shim alone and the collector without the CLI."""
    plain = runs["plain"]
    extra = statistics.median(t - p for t, p in zip(runs["record"], plain, strict=True))
    rows = [("before the program (launcher, collector set-up)", statistics.median(before)),
            ("after the program (collector's end, CLI's finish)", statistics.median(after))]
    rows.append(("during the run (sampling, shim, page faults)", extra - rows[0][1] - rows[1][1]))
    for name in ("shim only", "collector"):
        if name in runs:
            rows.append((f"  apart: {name} minus plain", statistics.median(
                t - p for t, p in zip(runs[name], plain, strict=True))))
    print(f"  parts of record's extra {extra * 1000:.1f} ms:")
    for name, t in rows:
        share = f"{100 * t / extra:5.1f} %" if extra > 0 else "    -"
        print(f"    {name:52s} {t * 1000:8.1f} ms  {share}")


if __name__ == "__main__":
    main()
