"""What recording one page fault in 17 costs the first-touch answers (not a pass/fail test).

    .venv/bin/python bench/fault_period.py [--period N]

Records every example and corpus program (2 OpenMP threads, -O2) twice, with
`--fault-period 1` (every fault) and with the given period (default: the collector's),
and prints per program the fault records of each and, for its largest heap and static
objects, first-touched pages, threads, the top thread's share and the serial verdict of
both (docs/analyzer.md, "first_touch").  Objects listed in one report only (no samples in
the other run) are named apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import fidelity  # noqa: E402


def programs() -> list[tuple[str, list[str]]]:
    ex = ROOT / "examples"
    subprocess.run(["make", "-s", "-C", str(ex)], check=True, capture_output=True)
    fidelity.build_corpus()
    out = [("serial_init", [str(ex / "serial_init"), "64", "20"]), ("numa_aware", [str(ex / "numa_aware"), "64", "20"]),
           ("gather", [str(ex / "gather"), "32", "30"]), ("spmv", [str(ex / "spmv"), "10"]),
           ("cxx_arrays", [str(ex / "cxx_arrays")]), ("fortran_arrays", [str(ex / "fortran_arrays"), "20"])]
    out += [(r.name, [str(r.binary("O2")), *r.args]) for r in fidelity.corpus_runs()]
    return out


def record(argv: list[str], out: Path, period: int | None) -> tuple[dict, int, int]:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    extra = ["--fault-period", str(period)] if period else []
    np_ = fidelity.numaprof_argv()
    subprocess.run([*np_, "record", *extra, "-o", str(out), "--", *argv], env=env, capture_output=True, check=True)
    doc = json.loads(subprocess.run([*np_, "report", str(out), "--format", "json"], capture_output=True,
                                    text=True, check=True).stdout)
    col = json.loads((out / "collector.json").read_text())
    objs = {o["name"]: o for o in doc["objects"] if o["kind"] in ("heap", "static") and o["first_touch"]["pages"]}
    return objs, col["counts"]["faults"], col["fault_period"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--period", type=int, default=None, help="the period to compare with 1 (default: the collector's)")
    args = ap.parse_args()
    tmp_root = ROOT / "build" / "bench" / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    differ = 0
    with tempfile.TemporaryDirectory(dir=tmp_root) as tmp:
        for name, argv in programs():
            exact, n1, _ = record(argv, Path(tmp) / f"{name}.1", 1)
            part, n2, period = record(argv, Path(tmp) / f"{name}.p", args.period)
            print(f"{name}: fault records {n1} at period 1, {n2} at period {period}")
            both = sorted(set(exact) & set(part), key=lambda n: -exact[n]["first_touch"]["pages"])
            for n in both[:6]:
                a, b = exact[n]["first_touch"], part[n]["first_touch"]
                same = (a["threads"], a["serial"], a["nodes"]) == (b["threads"], b["serial"], b["nodes"])
                differ += not same
                print(f"  {n[:28]:28} pages {a['pages']:7} {b['pages']:7}  threads {a['threads']} {b['threads']}  "
                      f"top share {a['master_fraction']:.2f} {b['master_fraction']:.2f}  serial "
                      f"{a['serial']!s:5} {b['serial']!s:5}  {'same' if same else 'DIFFERENT'}")
            for label, only in (("period 1", set(exact) - set(part)), (f"period {period}", set(part) - set(exact))):
                if only:
                    print(f"  listed at {label} only: " + ", ".join(sorted(only)[:8]))
    print(f"objects whose threads, nodes or serial verdict differ: {differ}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
