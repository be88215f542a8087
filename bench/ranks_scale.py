"""Benchmark (not a pass/fail test): a job of many ranks — `numaprof report prof.*` and
`numaprof suggest prof.*` over N per-rank profiles, wall time and peak RSS.

    .venv/bin/python bench/ranks_scale.py [--ranks 64] [--samples 100000] [--reps 2]

Each rank's profile is written by tests/profgen.py (two 64 MiB arrays, master-initialised
and read in blocks, and one read all over; every eighth rank reads the second in blocks
too, so that the job's answer has ranks that differ), `--samples` samples per rank.  Each
repetition runs the command in a fresh process and reads its peak RSS from wait4(2).
The machine is shared: read the spread of the repetitions.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_scale import measured  # noqa: E402
from run import numaprof  # noqa: E402


def make_ranks(base: Path, ranks: int, samples: int) -> list[Path]:
    import profgen

    a = profgen.Array
    per = samples // 4  # two loop phases of two arrays
    paths = []
    for r in range(ranks):
        second = ["serial_init", "regular", "regular"] if r % 8 == 7 else \
            ["serial_init", "random", "random"]
        path = base / f"prof.{r}"
        profgen.synth_run(path, [a("grid", 64 << 20, ["serial_init", "regular", "regular"], samples=per),
                                 a("table", 64 << 20, second, samples=per)], seed=r + 1, pid=4000 + r)
        paths.append(path)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--samples", type=int, default=100_000, help="per rank")
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="numaprof-ranks-"))
    try:
        t0 = time.monotonic()
        paths = make_ranks(tmp, args.ranks, args.samples)
        n = sum(((p / "samples.addr.col").stat().st_size - 16) // 8 for p in paths)
        print(f"{args.ranks} rank profiles, {n} samples in all, written in "
              f"{time.monotonic() - t0:.1f} s")
        for what, extra in (("report", ["--format", "json"]),
                            ("suggest", ["--target", "2s", "--format", "json"])):
            walls, rss = [], []
            for _ in range(args.reps):
                wall, peak, rc = measured([*numaprof(), what, *map(str, paths), *extra])
                if rc != 0:
                    print(f"{what} failed (exit {rc})")
                    return 1
                walls.append(wall)
                rss.append(peak)
            print(f"{what} over {args.ranks} ranks: wall median {statistics.median(walls):.1f} s "
                  f"[{min(walls):.1f}-{max(walls):.1f}], peak RSS max {max(rss) / 2**20:.0f} MiB",
                  flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
