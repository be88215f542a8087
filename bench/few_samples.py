"""How right is the pattern of an array that has few samples?  (Not a pass/fail test.)

    .venv/bin/python bench/few_samples.py [--k 4,8,16] [--seeds 3] [--min 5] PROFILE...

Each profile, recorded at a high rate (e.g. `bench/fidelity.py --freq 4001 --keep DIR`),
is analysed whole: its objects with at least 100 samples and a pattern are the
reference.  Copies that keep each sample with probability 1/k (a recording at 1/k of
the rate, give or take the spread of a thinned Poisson stream) are analysed with the
analyzer's minimum of samples for a pattern lowered to ``--min`` (and of parallel
samples to ``--par``), and each reference object's answer in the copy is compared with
its reference pattern, binned by the object's samples in the copy.  The table gives,
per reference pattern and bin: objects, answered right, answered wrong (and as what),
still unknown.  Read the other way (by the answer), it tells how often an answer given
on that many samples would be the whole recording's.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

BINS = [(5, 9), (10, 14), (15, 19), (20, 24), (25, 29), (30, 49), (50, 99), (100, None)]
REFERENCE_MIN = 100  # samples of a reference object


def thin(src: Path, dst: Path, k: int, rng: np.random.Generator) -> None:
    """A copy of profile ``src`` keeping each sample with probability 1/k."""
    shutil.copytree(src, dst, symlinks=True)
    n = len(np.memmap(dst / "samples.time.col", dtype="<u8", mode="r", offset=16))
    keep = rng.random(n) < 1.0 / k
    for col in sorted(dst.glob("samples.*.col")):
        head = col.read_bytes()[:16]
        values = np.fromfile(col, dtype=head[8:].rstrip(b"\0").decode(), offset=16)
        with open(col, "wb") as f:
            f.write(head)
            values[:n][keep[:len(values)]].tofile(f)
    manifest = json.loads((dst / "manifest.json").read_text())
    counts = manifest.setdefault("counts", {})
    kept = int(keep.sum())
    for key in ("with_address", "unresolved"):
        if key in counts:
            counts[key] = min(kept, round(int(counts[key]) / k))
    counts["samples"] = kept
    (dst / "manifest.json").write_text(json.dumps(manifest, indent=1))


def patterns(path: Path, minimum: tuple[int, int] | None) -> dict[tuple, tuple[str, int]]:
    """{(name, site): (pattern, samples)} of the analysis of ``path``, with the minimum
    samples (object, parallel) of classifier.fallback lowered to ``minimum``."""
    from numaprof.analyzer import analyze, classifier

    saved = classifier.MIN_SAMPLES, classifier.MIN_PARALLEL_SAMPLES
    if minimum is not None:
        classifier.MIN_SAMPLES, classifier.MIN_PARALLEL_SAMPLES = minimum
    try:
        result = analyze(path)
    finally:
        classifier.MIN_SAMPLES, classifier.MIN_PARALLEL_SAMPLES = saved
    return {(o.name, o.site): (o.pattern, o.samples) for o in result.objects}


def _bin(n: int):
    return next((b for b in BINS if b[0] <= n and (b[1] is None or n <= b[1])), None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="4,8,16", help="thinning factors")
    ap.add_argument("--seeds", type=int, default=3, help="thinned copies per factor")
    ap.add_argument("--min", type=int, default=5, help="samples an object needs for a pattern")
    ap.add_argument("--par", type=int, default=3, help="samples in parallel windows it needs")
    ap.add_argument("profiles", nargs="+", type=Path)
    args = ap.parse_args()
    counts: dict = collections.defaultdict(collections.Counter)
    wrong: dict = collections.defaultdict(collections.Counter)
    tmp = Path(tempfile.mkdtemp(prefix="numaprof-few-"))
    try:
        for prof in args.profiles:
            ref = {key: pat for key, (pat, n) in patterns(prof, None).items()
                   if pat != "unknown" and n >= REFERENCE_MIN}
            for k in (int(x) for x in args.k.split(",")):
                for seed in range(args.seeds):
                    copy = tmp / f"{prof.name}-{k}-{seed}"
                    thin(prof, copy, k, np.random.default_rng(seed))
                    got = patterns(copy, (args.min, args.par))
                    shutil.rmtree(copy)
                    for key, want in ref.items():
                        if key not in got or _bin(got[key][1]) is None:
                            continue
                        pat, n = got[key]
                        c = counts[(want, _bin(n))]
                        c["objects"] += 1
                        c["unknown" if pat == "unknown" else "right" if pat == want else "wrong"] += 1
                        if pat not in ("unknown", want):
                            wrong[(want, _bin(n))][pat] += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"minimum samples {args.min} (parallel {args.par}); thinned 1/{args.k}, {args.seeds} seeds each; "
          f"{len(args.profiles)} profiles")
    print("| reference | samples | objects | right | wrong (as) | unknown |")
    print("|---|---|---|---|---|---|")
    for want in ("regular", "irregular", "random"):
        for b in BINS:
            c = counts.get((want, b))
            if c:
                as_ = ", ".join(f"{p} {m}" for p, m in wrong[(want, b)].most_common())
                span = f"{b[0]}-{b[1]}" if b[1] is not None else f"{b[0]}+"
                print(f"| {want} | {span} | {c['objects']} | {c['right']} | {c['wrong']}"
                      f"{f' ({as_})' if as_ else ''} | {c['unknown']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
