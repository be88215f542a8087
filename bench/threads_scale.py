"""Benchmark (not a pass/fail test): recording a program of many threads — samples lost by
`numaprof record` against `perf record` with the same events at the same rate.

    .venv/bin/python bench/threads_scale.py [--threads 256] [--reps 3]

The program is examples/gather (a random gather, every thread busy) with OMP_NUM_THREADS
threads on this machine's cpus.  numaprof's lost samples are the manifest's
`counts.lost` (the kernel's PERF_RECORD_LOST counts, read from its rings, and the
samples its decoder dropped), against `counts.samples`; perf's are the LOST and SAMPLE
events of `perf report --stats`.  perf records cpu-clock with the user registers and the
data address (`-d`), the software backend's mechanism, at numaprof's default rate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import numaprof, perf_argv  # noqa: E402  (bench/run.py: the same perf command)

from numaprof import defaults  # noqa: E402


def perf_counts(data: Path) -> tuple[int, int]:
    """(samples, lost samples) of a perf.data: the SAMPLE records, and the `lost` fields of
    its PERF_RECORD_LOST and PERF_RECORD_LOST_SAMPLES records (`perf report -D`)."""
    out = subprocess.run(["perf", "report", "-D", "-i", str(data)], capture_output=True,
                         text=True, check=True).stdout
    samples = len(re.findall(r" PERF_RECORD_SAMPLE\(", out))
    lost = sum(int(m.group(1)) for m in re.finditer(r" PERF_RECORD_LOST(?:_SAMPLES)?[^\n]*?lost (\d+)", out))
    return samples, lost


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=150, help="gather iterations (64 MiB)")
    args = ap.parse_args()
    subprocess.run(["make", "-s", "-C", str(ROOT / "examples")], check=True)
    prog = [str(ROOT / "examples" / "gather"), "64", str(args.iters)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    tmp = Path(tempfile.mkdtemp(prefix="numaprof-threads-"))
    rows = {"numaprof": [], "perf": []}
    try:
        perf = perf_argv(tmp / "perf.data", defaults.FREQ)
        for _ in range(args.reps):
            d = tmp / "p.data"
            shutil.rmtree(d, ignore_errors=True)
            subprocess.run([*numaprof(), "record", "-o", str(d), "--", *prog], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            counts = json.loads((d / "manifest.json").read_text())["counts"]
            rows["numaprof"].append((counts["samples"], counts["lost"]))
            if perf is not None:
                subprocess.run([*perf, *prog], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=True)
                rows["perf"].append(perf_counts(tmp / "perf.data"))
        for tool, got in rows.items():
            if not got:
                print(f"{tool}: not run (perf record does not work here)")
                continue
            rate = [lost / max(samples + lost, 1) for samples, lost in got]
            print(f"{tool} ({args.threads} threads, {args.reps} runs): samples "
                  f"{statistics.median(s for s, _ in got):.0f} median, lost "
                  f"{statistics.median(x for _, x in got):.0f} median "
                  f"({100 * statistics.median(rate):.2f} % [{100 * min(rate):.2f}-"
                  f"{100 * max(rate):.2f}])")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
