"""The fixed cost of `numaprof record -- true` for several installations side by side
(not a pass/fail test).

    .venv/bin/python bench/fixed_cost.py [--reps 20] [--dir PARENT] [NUMAPROF ...]

Each NUMAPROF is a `numaprof` executable (a venv's bin/numaprof: a wheel of this tree, one
of an older tree, the editable checkout); default: this interpreter's.  Each repetition runs
`true` plain, then `record -o DIR -- true` under every NUMAPROF in turn (interleaved, so all
see the same load), and `numaprof-collect` alone (the collector without the CLI).
Reported: median and range of the wall time minus plain `true`'s median.  Every installation
writes its profiles under one fresh directory (in PARENT, default the system's temporary
directory), rotated as a user's are (.old).  The file system matters: a profile is some 90
files, and on an ext4 without a journal each file created after many were deleted scans
the recently deleted inodes (fs/ext4/ialloc.c, recently_deleted): run it on /dev/shm too.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBEXEC = ROOT / "build" / "dev" / "libexec"


def _wall(argv: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd,
                   check=False)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--dir", type=Path, default=None, help="where the profiles are written")
    ap.add_argument("numaprof", nargs="*", type=Path)
    args = ap.parse_args()
    clis = [c.absolute() for c in args.numaprof] or [Path(sys.executable).parent / "numaprof"]
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="numaprof-fixed-", dir=args.dir) as tmp:
        base = Path(tmp)
        runs: dict[str, list[float]] = {"true": [], "numaprof-collect": []}
        runs.update({str(c): [] for c in clis})
        for _ in range(args.reps):
            runs["true"].append(_wall([true], base))
            for i, cli in enumerate(clis):
                runs[str(cli)].append(_wall([str(cli), "record", "-o", f"p{i}", "--", true], base))
            out = base / "collect"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            runs["numaprof-collect"].append(_wall(
                [str(LIBEXEC / "numaprof-collect"), "-o", str(out), "--shim",
                 str(LIBEXEC / "libnumaprof_shim.so"), "--", true], base))
    plain = statistics.median(runs.pop("true"))
    print(f"plain true: {plain * 1000:.1f} ms (median of {args.reps}); profiles in "
          f"{args.dir or tempfile.gettempdir()}")
    for name, times in runs.items():
        extra = [(t - plain) * 1000 for t in times]
        print(f"{name}: +{statistics.median(extra):.1f} ms [{min(extra):.1f}-{max(extra):.1f}]")


if __name__ == "__main__":
    main()
