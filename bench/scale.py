"""Benchmark (not a pass/fail test): numaprof at scale, every measurement of the scale
issue in one run, headed by the date and the machine.

    .venv/bin/python bench/scale.py [--quick] [--billion] [--keep DIR]

1. profile bytes per minute of `bench/alloc_heavy` (a 10-second run, or 3 with --quick),
   and bytes per sample;
2. `report --format json` time and peak RSS at 10 M and 100 M samples (1 billion with
   --billion, where the disk holds its 35 GB: bench/report_scale.py), the profiles of
   tests/profgen.py, the larger ones the 10 M one played again;
3. what the sub-sample of a large profile costs the patterns (bench/stream_accuracy.py);
4. lost samples of a 256-thread program beside perf record (bench/threads_scale.py);
5. `report` and `suggest` over 64 rank profiles (bench/ranks_scale.py);
6. the what-if of 1000 objects on a 16-node target (bench/whatif_scale.py).

Each part is its own script, run here in a fresh process; their output is printed as it
comes.  The machine is shared: read the spreads the parts print.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

from run import build, numaprof  # noqa: E402  (bench/run.py)


def part(title: str, argv: list[str]) -> None:
    print(f"\n## {title}\n$ {' '.join(Path(a).name if a == sys.executable else a for a in argv)}", flush=True)
    t0 = time.monotonic()
    rc = subprocess.run(argv).returncode
    print(f"({time.monotonic() - t0:.0f} s{'' if rc == 0 else f', exit {rc}'})", flush=True)


def profile_rate(seconds: float, tmp: Path) -> None:
    """Profile bytes per minute of alloc_heavy recorded for about ``seconds``."""
    alloc = build()["allocation-heavy (alloc_heavy)"][0]
    rounds = int(25_000_000 * seconds)  # about 2.5 s per 60 M rounds here
    out = tmp / "alloc.data"
    print(f"\n## profile size: alloc_heavy {rounds} (about {seconds:g} s)", flush=True)
    t0 = time.monotonic()
    subprocess.run([*numaprof(), "record", "-o", str(out), "--", alloc, str(rounds)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    sizes = {p.name: p.stat().st_size for p in out.iterdir() if p.is_file()}
    total = sum(sizes.values())
    m = json.loads((out / "manifest.json").read_text())
    n = int(m["counts"]["samples"])
    samples_bytes = sum(v for k, v in sizes.items() if k.startswith("samples."))
    tables: dict[str, int] = {}
    for k, v in sizes.items():
        tables[k.split(".")[0]] = tables.get(k.split(".")[0], 0) + v
    print(f"{wall:.1f} s recorded: {total / 1e6:.1f} MB ({total / 1e6 / wall * 60:.0f} MB per minute); "
          f"{n} samples, {total / max(n, 1):.0f} bytes each in all, {samples_bytes / max(n, 1):.0f} in the "
          f"samples table; by table: "
          + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sorted(tables.items(), key=lambda kv: -kv[1])[:5]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter runs, fewer repetitions")
    ap.add_argument("--billion", action="store_true", help="also report on 1 billion samples")
    ap.add_argument("--keep", type=Path, default=None, help="keep the large profiles here")
    args = ap.parse_args()
    print(f"# numaprof at scale, {time.strftime('%Y-%m-%d')}, {platform.node()}: "
          f"{os.cpu_count()} cpus, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
          f"{platform.system()} {platform.release()}")
    tmp = Path(tempfile.mkdtemp(prefix="numaprof-scale-"))
    keep = args.keep or tmp
    py = sys.executable
    reps = "1" if args.quick else "3"
    try:
        profile_rate(3.0 if args.quick else 10.0, tmp)
        base = keep / "p10m"
        part("report on 10 M samples", [py, str(HERE / "report_scale.py"), "--keep", str(base), "--reps", reps])
        sizes = [(100, "p100m")] + ([(1000, "p1b")] if args.billion else [])
        for times, name in sizes:
            path = keep / name
            if not (path / "manifest.json").exists():
                import profgen

                shutil.copytree(base, path)
                profgen.repeat_samples(path, times // 10)
            part(f"report on {times} M samples", [py, str(HERE / "report_scale.py"), "--keep", str(path),
                                                  "--reps", "1"])
            if args.keep is None:
                shutil.rmtree(path, ignore_errors=True)
        part("patterns from a sub-sample", [py, str(HERE / "stream_accuracy.py")])
        part("256 threads", [py, str(HERE / "threads_scale.py"), "--reps", reps])
        part("64 ranks", [py, str(HERE / "ranks_scale.py"), "--reps", "1" if args.quick else "2"])
        part("what-if, 1000 objects x 16 nodes", [py, str(HERE / "whatif_scale.py")])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
