"""What one timer sample costs the sampled thread on this machine (not a pass/fail test).

    .venv/bin/python bench/sample_cost.py [--reps 3] [--freq 1009 4001] [--loops 1500000000]

bench/busy.c (one thread, no memory traffic) runs plain, under numaprof-collect (the
collector without the CLI, so that Python's start-up does not count) and under `perf
record` with the same events (cpu-clock at the same rate, user registers), interleaved.
The program reports its own cpu time (getrusage), so only what sampling adds to the
sampled thread is measured: the timer interrupt, the sample written to the ring buffer,
and on a virtual machine the exits to the host that arming the timer costs.  Reported
per rate: the median cpu time, the added share, the samples and the added microseconds
per sample, numaprof beside perf.  The difference between the two is the collector's
share; the rest is the kernel's (and the hypervisor's), the floor any tool sampling this
way pays.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBEXEC = ROOT / "build" / "dev" / "libexec"
PERF_REGS = "ip,sp,bp,ax,bx,cx,dx,si,di"


def cpu_of(stderr: str) -> float:
    return float(next(ln.split()[1] for ln in stderr.splitlines() if ln.startswith("busy-cpu ")))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--freq", type=int, nargs="+", default=[1009, 4001])
    ap.add_argument("--loops", default="1500000000")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sample-cost-", dir=ROOT / "build"))
    exe = work / "busy"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(ROOT / "bench" / "busy.c")], check=True)
    perf = shutil.which("perf")
    runs: dict[str, list[float]] = {"plain": []}
    samples: dict[str, list[int]] = {}
    for _ in range(args.reps):
        runs["plain"].append(cpu_of(subprocess.run([str(exe), args.loops], capture_output=True,
                                                   text=True, check=True).stderr))
        for f in args.freq:
            out = work / f"c{f}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            p = subprocess.run([str(LIBEXEC / "numaprof-collect"), "-o", str(out), "--freq", str(f),
                                "--", str(exe), args.loops], capture_output=True, text=True, check=True)
            runs.setdefault(f"numaprof {f} Hz", []).append(cpu_of(p.stderr))
            counts = json.loads((out / "collector.json").read_text())["counts"]
            samples.setdefault(f"numaprof {f} Hz", []).append(int(counts["samples"]))
            if perf:
                data = work / f"perf{f}.data"
                p = subprocess.run([perf, "record", "-q", "-o", str(data), "-e", "cpu-clock", "-F", str(f),
                                    f"--user-regs={PERF_REGS}", "--", str(exe), args.loops],
                                   capture_output=True, text=True)
                if p.returncode == 0:
                    runs.setdefault(f"perf {f} Hz", []).append(cpu_of(p.stderr))
                    rep = subprocess.run([perf, "report", "-i", str(data), "--stdio", "-n", "-q",
                                          "--sort", "comm"], capture_output=True, text=True)
                    n = [int(w) for w in rep.stdout.split() if w.isdigit()]
                    samples.setdefault(f"perf {f} Hz", []).append(n[0] if n else 0)
    base = statistics.median(runs["plain"])
    print(f"busy loop {args.loops}, {args.reps} interleaved repetitions; cpu time of the sampled thread")
    print(f"  {'plain':<18} {base:7.3f} s  [{min(runs['plain']):.3f}-{max(runs['plain']):.3f}]")
    for label, ts in runs.items():
        if label == "plain":
            continue
        med, n = statistics.median(ts), statistics.median(samples.get(label) or [0])
        per = (med - base) / n * 1e6 if n else float("nan")
        print(f"  {label:<18} {med:7.3f} s  [{min(ts):.3f}-{max(ts):.3f}]  +{(med / base - 1) * 100:5.1f} %"
              f"  {n:.0f} samples  {per:6.1f} us/sample")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
