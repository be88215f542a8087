"""Benchmark of docs/analyzer.md (cost) (not a pass/fail test): `numaprof report` on a large
synthetic profile — wall time and peak RSS of the report process.

    .venv/bin/python bench/report_scale.py [--samples 10000000] [--reps 3] [--keep DIR]

The profile is written by tests/profgen.py in the on-disk format a recording has (four
arrays of 128-256 MiB: master-initialised regular, reversed-partition irregular, dynamic
schedule, random; the samples split evenly between them, plus a few outside any object).
Each repetition runs `numaprof report --format json` in a fresh process and reads its
peak RSS from wait4(2).  The profile is written by a process of its own: Linux carries a
process's peak RSS over fork and exec (the kernel's exec keeps the larger of the old
and new high-water marks), so a report forked from the writer, which holds the samples
in memory, would report the writer's peak (1.60 GiB for 10 M, where the report itself
peaks at 0.97 GiB).  Targets: <= 10 s and <= 2 GiB on the 2-core development VM.
The machine is shared: read the spread of the repetitions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import numaprof  # noqa: E402  (bench/run.py)


def make_profile(path: Path, samples: int) -> None:
    import profgen

    # profgen writes 2.25 samples per requested one for these arrays (their phases): the
    # request is scaled so that the profile holds about `samples` (the count is printed)
    per = samples // 9
    a = profgen.Array
    profgen.synth_run(path, [
        a("reg", 256 << 20, ["serial_init", "regular", "regular"], samples=per),
        a("irr", 256 << 20, ["parallel_init", "regular", "reversed"], samples=per),
        a("dyn", 128 << 20, ["parallel_init", "dynamic", "dynamic"], samples=per),
        a("rnd", 128 << 20, ["parallel_init", "random", "random"], samples=per)],
        extra_samples=1000)


def measured(argv: list[str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS bytes, exit status) of one command, its output dropped."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        sys.stderr.write(proc.stderr.read().decode(errors="replace"))
    return wall, usage.ru_maxrss * 1024, rc


def run_report(path: Path) -> tuple[float, int, int]:
    """(wall seconds, peak RSS bytes, exit status) of one `report --format json`."""
    return measured([*numaprof(), "report", str(path), "--format", "json"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="write the profile here and keep it")
    ap.add_argument("--write-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_only:
        make_profile(args.keep, args.samples)
        return 0
    tmp = None
    if args.keep is None:
        tmp = Path(tempfile.mkdtemp(prefix="numaprof-bench-"))
        path = tmp / "big.data"
    else:
        path = args.keep
    try:
        if not (path / "manifest.json").exists():
            t0 = time.monotonic()
            subprocess.run([sys.executable, __file__, "--write-only", "--samples", str(args.samples),
                            "--keep", str(path)], check=True)
            print(f"profile written in {time.monotonic() - t0:.1f} s "
                  f"({sum(f.stat().st_size for f in path.iterdir()) / 2**20:.0f} MiB)")
        n = ((path / "samples.addr.col").stat().st_size - 16) // 8
        print(f"profile: {n} samples")
        walls, rss = [], []
        for k in range(args.reps):
            wall, peak, rc = run_report(path)
            if rc != 0:
                print(f"report failed (exit {rc})")
                return 1
            walls.append(wall)
            rss.append(peak)
            print(f"rep {k + 1}: {wall:.1f} s, peak RSS {peak / 2**30:.2f} GiB", flush=True)
        print(f"report --format json on {n} samples: wall median "
              f"{statistics.median(walls):.1f} s [{min(walls):.1f}-{max(walls):.1f}], peak RSS "
              f"max {max(rss) / 2**30:.2f} GiB (targets 10 s, 2 GiB)")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
