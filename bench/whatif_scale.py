"""Benchmark (not a pass/fail test): the recommender's what-if on a large machine — every
candidate policy for 1000 hot objects on a 16-node target (the 4s-snc4 preset), 32
threads, timed in-process.  Target (issue: scale): <= 10 s on the 2-core development VM.

    .venv/bin/python bench/whatif_scale.py [--objects 1000] [--target 4s-snc4] [--reps 3]

The objects are synthetic analyses (tests/synth_analysis.py): a mix of regular,
irregular, dynamic and random arrays of 1-64 MiB, master- or parallel-initialised, 2000
sampled accesses each.  The machine is shared: read the spread.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import synth_analysis as sa  # noqa: E402

from numaprof.recommender import suggest  # noqa: E402
from numaprof.recommender.targets import preset_topology  # noqa: E402

KINDS = (sa.access_regular, sa.access_reversed, sa.access_dynamic, sa.access_random)
PATTERNS = ("regular", "irregular", "irregular", "random")


def build(n_objects: int, threads: int):
    rng = np.random.default_rng(7)
    objs = []
    for i in range(n_objects):
        k = i % len(KINDS)
        pages = int(rng.integers(256, 16384))
        acc = KINDS[k](pages, threads, n=2000, rng=np.random.default_rng(i))
        objs.append(sa.obj(f"a{i}", PATTERNS[k], acc, serial=bool(i % 3 == 0), n_threads=threads,
                           share=1.0 / n_objects))
    return sa.analysis(objs, sa.threads(threads))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--target", default="4s-snc4")
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    a = build(args.objects, args.threads)
    target = preset_topology(args.target, threads=args.threads)
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        s = suggest(a, target, min_share=0.0)
        times.append(time.perf_counter() - t0)
    policies = {alt.policy for o in s.objects for alt in o.alternatives}
    print(f"{date.today()} {platform.node()} ({platform.machine()}): what-if of {len(s.objects)} "
          f"objects x {len(policies)} policies on {target.n_nodes} nodes ({args.target}), "
          f"{args.threads} threads: median {statistics.median(times):.2f} s "
          f"(range {min(times):.2f}-{max(times):.2f}, {args.reps} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
