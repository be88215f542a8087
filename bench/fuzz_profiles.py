"""The profile-reader fuzzer (tests/profile_fuzz.py), run for longer than `make test` does.

    .venv/bin/python bench/fuzz_profiles.py [--cases 3000] [--seed 1] [--timeout 60]
                                            [--rss-mib 1024] [--keep DIR] [-v] [--sweep]

Each case is a seed profile from tests/data/fuzz-seed/ with one to three mutations, run
through `report` (text, json, html), `suggest` (text, json), `topology --profile` or
`report --diff` in a forked child with a timeout.  Prints the tallies per outcome, the peak
RSS of a case, the slowest case, and each failure (case number, mutations, command, the
line numaprof printed).  Exit status 1 when any case failed.  --keep DIR keeps the failing
cases' directories there to replay them by hand.  --sweep instead sets every column of
every seed, all rows at once, to each extreme value of its width (0, the largest, the
sign bit), through `report` and `suggest --format json` (about a thousand runs).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    ap.add_argument("--rss-mib", type=int, default=1024, help="peak RSS bound per case")
    ap.add_argument("--keep", type=Path, default=None, help="keep failing cases in DIR")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    ap.add_argument("--sweep", action="store_true", help="extreme values per column instead")
    args = ap.parse_args()

    import profile_fuzz

    def progress(i, muts, argv, o):
        if args.verbose or o.kind not in profile_fuzz.PASS:
            print(f"{i:5d} {o.kind:8s} {o.seconds:6.2f}s {o.rss / 2**20:6.0f}MiB "
                  f"{' '.join(argv[:1] + argv[2:])} | {'; '.join(muts)}"
                  + (f" | {o.detail}" if o.detail else "")
                  + (f" | {o.stderr.strip()[:200]}" if args.verbose and o.kind == "refused" else ""),
                  flush=True)

    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        base_ctx = None
        base = args.keep
    else:
        base_ctx = tempfile.TemporaryDirectory(prefix="numaprof-fuzz-")
        base = Path(base_ctx.name)
    try:
        if args.sweep:
            res = profile_fuzz.sweep(base, timeout=args.timeout, rss_limit=args.rss_mib << 20,
                                     progress=progress)
            args.cases = sum(res.tallies.values())
        else:
            res = profile_fuzz.run(args.cases, args.seed, base, timeout=args.timeout,
                                   rss_limit=args.rss_mib << 20, keep=args.keep is not None,
                                   progress=progress)
    finally:
        if base_ctx is not None:
            base_ctx.cleanup()
    what = "sweep" if args.sweep else f"seed {args.seed}"
    print(f"\n{args.cases} cases, {what}, {res.seconds:.0f} s "
          f"({res.seconds / max(args.cases, 1):.2f} s per case, slowest {res.slowest:.1f} s), "
          f"peak RSS of a case {res.peak_rss / 2**20:.0f} MiB (bound {args.rss_mib} MiB)")
    for kind, n in sorted(res.tallies.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:9s} {n}")
    return 1 if res.failures else 0


if __name__ == "__main__":
    sys.exit(main())
