"""Benchmark of docs/analyzer.md ("Large profiles") (not a pass/fail test): how often the
pattern of an object changes when a large profile is analysed from a sub-sample.

    .venv/bin/python bench/stream_accuracy.py [--arrays 6] [--samples 60000] [--budgets 400000,100000,25000]
    .venv/bin/python bench/stream_accuracy.py --profiles DIR... [--fractions 0.5,0.25,0.1]

A synthetic profile (tests/profgen.py) holds ``4 x arrays`` arrays of 2-32 MiB with known
access shapes (static regular, reversed partition, dynamic schedule, random gathers),
``samples`` per loop phase each.  It is analysed whole, then with each budget (the rows
the analysis keeps, analyzer/stream.py): the table gives, per budget, the samples the
large arrays kept, and the share of arrays whose pattern equals the whole analysis's
and the expected one.

With ``--profiles`` (recordings of real programs, e.g. `bench/fidelity.py --keep DIR`),
each profile is analysed whole and with budgets that are fractions of its samples: the
table gives, per fraction, the objects of at least 1 % of the samples whose pattern
equals the whole analysis's.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

EXPECTED = {"regular": "regular", "reversed": "irregular", "dynamic": "irregular", "random": "random"}
PHASES = {"regular": ["serial_init", "regular", "regular"],
          "reversed": ["parallel_init", "regular", "reversed"],
          "dynamic": ["parallel_init", "dynamic", "dynamic"],
          "random": ["parallel_init", "random", "random"]}


def main() -> int:
    import profgen

    from numaprof.analyzer import analyze

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arrays", type=int, default=6, help="arrays of each shape")
    ap.add_argument("--samples", type=int, default=60_000, help="samples per loop phase of an array")
    ap.add_argument("--budgets", default="400000,100000,25000")
    ap.add_argument("--profiles", nargs="+", type=Path, default=None, help="recorded profiles")
    ap.add_argument("--fractions", default="0.5,0.25,0.1", help="with --profiles: budgets as fractions")
    args = ap.parse_args()
    if args.profiles:
        return recorded(args.profiles, [float(f) for f in args.fractions.split(",")])
    arrays, truth = [], {}
    for k in range(args.arrays):
        for kind, phases in PHASES.items():
            name = f"{kind}{k}"
            size = (2 << 20) << (k % 5)  # 2..32 MiB
            arrays.append(profgen.Array(name, size, phases, samples=args.samples))
            truth[name] = EXPECTED[kind]
    tmp = Path(tempfile.mkdtemp(prefix="numaprof-stream-"))
    try:
        run = profgen.synth_run(tmp / "p", arrays, seed=11)
        print(f"{time.strftime('%Y-%m-%d')}: {len(arrays)} arrays, {run.samples} samples")
        t0 = time.monotonic()
        whole = _patterns(analyze(tmp / "p"), run)
        print(f"whole: {time.monotonic() - t0:.1f} s, expected pattern "
              f"{_share(whole, truth):.2f}")
        print("| budget | kept per large array | same as whole | expected | time |")
        print("|---|---|---|---|---|")
        for budget in (int(b) for b in args.budgets.split(",")):
            t0 = time.monotonic()
            a = analyze(tmp / "p", budget=budget)
            dt = time.monotonic() - t0
            part = _patterns(a, run)
            kept = sorted(len(o.access.page) for o in a.objects if o.kind == "heap")
            print(f"| {budget} | {kept[len(kept) // 2]} | {_share(part, whole):.2f} | "
                  f"{_share(part, truth):.2f} | {dt:.1f} s |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def recorded(profiles: list[Path], fractions: list[float]) -> int:
    from numaprof.analyzer import analyze

    print(f"{time.strftime('%Y-%m-%d')}: objects of >= 1 % of the samples whose pattern is the "
          "whole analysis's, by the budget's fraction of the samples")
    print("| profile | samples | objects | " + " | ".join(f"{f:g}" for f in fractions) + " |")
    print("|---|---|---|" + "---|" * len(fractions))
    same_all = [0] * len(fractions)
    total = 0
    for path in profiles:
        whole = analyze(path)
        want = {(o.name, o.site): o.pattern for o in whole.objects if o.share >= 0.01}
        row = []
        for j, f in enumerate(fractions):
            part = analyze(path, budget=max(int(whole.profile.samples * f), 1))
            got = {(o.name, o.site): o.pattern for o in part.objects}
            same = sum(got.get(k) == v for k, v in want.items())
            same_all[j] += same
            row.append(f"{same}/{len(want)}")
        total += len(want)
        print(f"| {path.name} | {whole.profile.samples} | {len(want)} | " + " | ".join(row) + " |")
    print("| all | | " + str(total) + " | " + " | ".join(f"{s / max(total, 1):.2f}" for s in same_all) + " |")
    return 0


def _patterns(analysis, run) -> dict[str, str]:
    by_addr = {o.address: o.pattern for o in analysis.objects}
    return {a.name: by_addr.get(a.addr, "missing") for a in run.arrays}


def _share(got: dict[str, str], want: dict[str, str]) -> float:
    return sum(got[k] == want[k] for k in want) / max(len(want), 1)


if __name__ == "__main__":
    sys.exit(main())
