"""Record labelled training data for the access-pattern classifier and fit it (docs/classifier.md).

    python -m numaprof.cli.train record --out DIR     # record, analyse, write DIR/features.csv
    python -m numaprof.cli.train fit --data DIR        # train, evaluate held-out, export JSON
    python -m numaprof.cli.train evaluate --data DIR   # the shipped model on another recording
    python -m numaprof.cli.train lab-record --out DIR # the same kernels in NUMA lab guests

``record`` runs the Figure 15 kernels of examples/patterns.c (regular / irregular / random / hashed
× static / dynamic × read / write / rw × array sizes × OMP_NUM_THREADS 1, 2, 3) built at
-O2, plus -O0 and -O3 builds and the other examples (spmv, gather, serial_init,
numa_aware, fortran_arrays), under ``numaprof record --freq 4000``; analyses every
profile and keeps one row per array whose label is known by construction (the examples'
header comments).  The split is fixed by construction: *train* = patterns at -O2, 2
threads, 64, 128 and 160 MiB (and 512 MiB for the structured kinds); everything else is
*held-out* (other sizes, other -O levels, other thread counts, other programs).
``lab-record`` records the -O2 kernels (8 MiB) in `numaprof lab` guests, one boot per
topology (2 nodes / 2 threads: train; 4 nodes / 4 and 3 threads: held-out), and analyses
the profiles on the host; its rows carry ``where`` = lab2 | lab4 | lab4t3.  ``fit`` trains a seeded random forest on the train rows, prints the held-out
accuracy and confusion matrix, and writes the model as plain JSON (tree arrays) that
:mod:`numaprof.analyzer.classifier` evaluates with numpy.  docs/classifier.md explains
the choices.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from numaprof.analyzer import classifier
from numaprof.errors import NumaprofError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DEFAULT_TABLE = "features.csv"
SEED = 20260

KINDS = ("regular", "irregular", "random", "hashed")
SCHEDULES = ("static", "dynamic")
OPS = ("read", "write", "rw")
TRAIN_SIZES = (64, 128, 160)  # MiB per array, -O2, 2 threads: the training runs
HELDOUT_SIZES = (80, 192)  # MiB, -O2, 2 threads
LARGE_SIZE = 512  # MiB, -O2, 2 threads, structured kinds only (training)
OPT_SIZE = 96  # MiB for the -O0 / -O3 builds
FREQ = 4000  # samples/s per thread: twice record's default, so that a sweep shows several samples
# The few-sample tier: the same kernels at a rate that leaves each array 30-200 samples,
# what a short run or a small array gets at record's default.  All of it is held out: it
# measures the model where samples are scarce (docs/classifier.md, "Few samples").  By
# kind: a random sweep's samples pile up (a miss per element), so it takes a lower rate
# to leave it as few samples as a sweep of the same array gets at a higher one.
FEW_FREQ = {"regular": 300, "irregular": 300, "random": 50, "hashed": 50}
FEW_SIZES = (64, 80, 128)  # MiB, -O2, 2 threads
SERIAL_LABEL = "unknown"  # one thread: no parallel structure (see docs/classifier.md)


@dataclass
class Run:
    program: str  # path of the executable
    args: list[str]
    threads: int
    opt: str  # O0 | O2 | O3
    split: str  # train | heldout
    labels: dict[str, str] = field(default_factory=dict)  # object name → label
    kernel: str = ""  # short description for the table
    prog: str = "patterns"  # the example's name
    kind: str = "heap"  # kind of the labelled objects (a static pointer `c` is not the array `c`)
    freq: int = 0  # samples/s per thread; 0: the table's rate (record --freq)

    @property
    def name(self) -> str:
        rate = f"-f{self.freq}" if self.freq else ""
        return f"{self.prog}-{self.opt}-t{self.threads}{rate}-{'-'.join(self.args)}"


def patterns_labels(kind: str, schedule: str, op: str) -> dict[str, str]:
    """Labels by construction (examples/patterns.c header) of the arrays the timed loops
    touch; an array only initialised (a and b under `write`, c under `read`, page unless
    the kind is random) has no pattern to learn and is left out."""
    touched = {"read": {"a", "b"}, "write": {"c"}, "rw": {"a", "b", "c"}}[op]
    if kind == "hashed":  # random accesses, the index computed in registers: page untouched
        return {obj: "random" for obj in sorted(touched)}
    if kind == "random":
        touched = touched | {"page"}
    out = {}
    for obj in sorted(touched):
        if schedule == "dynamic":
            out[obj] = "random" if kind == "random" and obj != "page" else "irregular"
        elif obj == "page":
            out[obj] = "regular"
        elif kind == "random":
            out[obj] = "random"
        elif obj == "b":
            out[obj] = "regular"  # the add phase always walks upwards
        else:
            out[obj] = kind
    return out


# The other examples, labelled by their header comments: (program, args, kind, labels)
EXAMPLE_RUNS = [
    ("spmv", ["10"], "static", {"values": "regular", "colidx": "regular", "x": "random", "y": "regular",
                      "rowptr": "regular"}),
    ("gather", ["32", "30"], "heap", {"lookup": "random", "idx": "regular", "hist": "regular"}),
    ("serial_init", ["64", "40"], "heap", {"a": "regular", "b": "regular", "c": "regular"}),
    ("numa_aware", ["64", "40"], "heap", {"x": "regular", "y": "regular", "z": "regular"}),
    ("fortran_arrays", ["20"], "static", {"u": "regular", "v": "regular", "w": "random", "idx": "regular"}),
]


def iterations(kind: str, mib: int) -> int:
    # about the same run time (≈ 1 s with 2 threads) whatever the size; a random sweep
    # costs a cache miss per element
    return max(4, 640 // mib) if kind in ("random", "hashed") else max(4, 1280 // mib)


def plan(bins: dict[str, Path], quick: bool = False, tiers: tuple[str, ...] = ("full",)) -> list[Run]:
    """Every run of the data set, in a fixed order: the ``full`` tier at the table's rate
    (the shipped table), the ``few`` tier (held out) at FEW_FREQ."""
    runs: list[Run] = []

    def kernels(opt, sizes, threads, split, kinds=KINDS, freq=0):
        for mib in sizes:
            for kind in kinds:
                for sched in SCHEDULES:
                    for op in OPS:
                        labels = patterns_labels(kind, sched, op)
                        if threads == 1:
                            labels = {k: SERIAL_LABEL for k in labels}
                        runs.append(Run(str(bins[opt]), [kind, sched, op, str(mib), str(iterations(kind, mib))],
                                        threads, opt, split, labels, f"{kind} {sched} {op}", freq=freq))

    if "full" in tiers:
        kernels("O2", TRAIN_SIZES, 2, "train")
        # large arrays: a sweep outlasts a window, so windows see one phase (small spans)
        kernels("O2", (LARGE_SIZE,), 2, "train", kinds=("regular", "irregular"))
        if not quick:
            kernels("O2", HELDOUT_SIZES, 2, "heldout")
            kernels("O0", (OPT_SIZE,), 2, "heldout")
            kernels("O3", (OPT_SIZE,), 2, "heldout")
            kernels("O2", (OPT_SIZE,), 3, "heldout")  # 3 threads on 2 cores: another thread count
            kernels("O2", (OPT_SIZE,), 1, "heldout")  # one thread: serial only → unknown
        for prog, args, kind, labels in EXAMPLE_RUNS:
            for threads in (2,) if quick else (2, 3):
                runs.append(Run(str(EXAMPLES / prog), args, threads, "O2", "heldout", labels, prog, prog, kind))
    if "few" in tiers:
        for kind in KINDS:
            kernels("O2", FEW_SIZES, 2, "heldout", kinds=(kind,), freq=FEW_FREQ[kind])
    return runs


def build(out: Path) -> dict[str, Path]:
    """The examples (make, -O2) and -O0 / -O3 builds of patterns.c under out/bin."""
    subprocess.run(["make", "-s", "-C", str(EXAMPLES)], check=True, stdout=subprocess.DEVNULL)
    bins = {"O2": EXAMPLES / "patterns"}
    (out / "bin").mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC", "gcc")
    for opt in ("O0", "O3"):
        exe = out / "bin" / f"patterns-{opt}"
        subprocess.run([cc, f"-{opt}", "-g", "-fopenmp", "-o", str(exe), str(EXAMPLES / "patterns.c")],
                       check=True)
        bins[opt] = exe
    return bins


def record_one(run: Run, tmp: Path, freq: int = 0) -> list[dict]:
    """Record and analyse one run (at its own rate, else ``freq``); one row per labelled
    object found."""
    freq = run.freq or freq
    prof = tmp / "prof.data"
    env = dict(os.environ, OMP_NUM_THREADS=str(run.threads),
               PYTHONPATH=_pythonpath() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    opts = ["--freq", str(freq)] if freq else []
    cmd = [sys.executable, "-m", "numaprof.cli.main", "record", "-o", str(prof), *opts, "--", run.program, *run.args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=str(tmp))
    if proc.returncode != 0:
        print(f"  {run.name}: record failed ({proc.returncode}): {proc.stderr.strip()[-300:]}", file=sys.stderr)
        return []
    rows = profile_rows(run, prof, freq)
    shutil.rmtree(prof, ignore_errors=True)
    shutil.rmtree(str(prof) + ".old", ignore_errors=True)
    return rows


def profile_rows(run: Run, prof: Path, freq: int = 0, where: str = "host") -> list[dict]:
    """Analyse one recorded profile of ``run``: one row per labelled object found."""
    from numaprof.analyzer import analyze

    res = analyze(prof)
    rows = []
    for o in res.objects:
        if o.name not in run.labels or o.kind != run.kind:
            continue
        name = run.name if where == "host" else f"{where}-{run.name}"
        row = {"run": name, "program": run.prog, "kernel": run.kernel,
               "args": " ".join(run.args), "opt": run.opt, "threads_requested": run.threads,
               "freq": freq or "", "split": run.split, "object": o.name, "label": run.labels[o.name],
               "analyzer_pattern": o.pattern, "where": where}
        row.update({k: float(v) for k, v in o.features.items()})
        rows.append(row)
    return rows


# ---- the NUMA lab: the Figure 15 kernels recorded in `numaprof lab` guests ------------------

# hashed is left out: its loops open with the hash, where TCG puts every sample, so no
# array gets a data address (measured: 6 runs on the 2-node guest, 0 rows; --kind hashed)
LAB_KINDS = ("regular", "irregular", "random")
LAB_MIB = 8  # per array: small, the guest runs ~20x slower (docs/lab.md "Limits")
LAB_MIN_SAMPLES = 30  # a row the analyzer calls unknown is kept only with this many samples
# (where, lab options, threads, split): the 2-node rows train, the 4-node rows are held out
LAB_TOPOLOGIES = (
    ("lab2", ["--preset", "2s"], 2, "train"),
    ("lab4", ["--preset", "4s"], 4, "heldout"),
    ("lab4t3", ["--preset", "4s"], 3, "heldout"),  # 3 threads on 4 nodes: one node idle
)
LAB_OMP = {"OMP_PROC_BIND": "spread", "OMP_PLACES": "cores"}
LAB_TIMEOUT = 1200  # seconds per guest, boot included


def lab_iterations(kind: str, quick: bool = False) -> int:
    # ~5-10 s per recording in the guest at 8 MiB (a random sweep costs a miss per element)
    n = 8 if kind in ("random", "hashed") else 16
    return max(2, n // 2) if quick else n


def lab_plan(program: str, threads: int, split: str, quick: bool = False,
             kinds: tuple[str, ...] = LAB_KINDS) -> list[Run]:
    runs = []
    for kind in kinds:
        for sched in SCHEDULES:
            for op in OPS:
                args = [kind, sched, op, str(LAB_MIB), str(lab_iterations(kind, quick))]
                runs.append(Run(program, args, threads, "O2", split, patterns_labels(kind, sched, op),
                                f"{kind} {sched} {op}"))
    return runs


def enough_samples(row: dict) -> bool:
    """A lab row is kept when the analyzer gave it a pattern or it has LAB_MIN_SAMPLES
    samples: under TCG a loop's samples all go to its first access (docs/lab.md)."""
    return row["analyzer_pattern"] != "unknown" or row["samples"] >= LAB_MIN_SAMPLES


def cmd_lab_guest(args) -> int:
    """Inside a lab guest: record every run of plan.json in this one Python process (an
    import of numpy costs about a minute under TCG, so one `numaprof record` per run would
    cost more than the runs)."""
    from numaprof.cli.recording import RecordConfig, run_record

    plan_doc = json.loads(Path(args.plan).read_text())
    for item in plan_doc["runs"]:
        t = time.monotonic()
        os.environ.update(item["env"])
        cfg = RecordConfig(command=tuple(item["command"]), output=Path(item["name"] + ".data"),
                           output_given=True, backend="auto", freq=plan_doc["freq"], alloc_threshold=65536,
                           pid=None, duration=None)
        try:
            rc = run_record(cfg, ["numaprof", "record", "--", *item["command"]])
        except NumaprofError as e:
            print(f"numaprof: {e}", file=sys.stderr)
            rc = e.exit_code
        Path(item["name"] + ".rc").write_text(f"{rc}\n")
        print(f"guest: {item['name']}: rc {rc} ({time.monotonic() - t:.1f} s)", flush=True)
    return 0


def cmd_lab_record(args) -> int:
    if not (EXAMPLES / "patterns.c").exists():
        raise NumaprofError(f"{EXAMPLES} not found: run the training from a source checkout "
                            "(PYTHONPATH=<checkout> python -m numaprof.cli.train ...)")
    from numaprof.lab.runner import find_tools

    find_tools()  # one clear line if QEMU, a kernel or virtme-ng is missing
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["make", "-s", "-C", str(EXAMPLES), "patterns"], check=True, stdout=subprocess.DEVNULL)
    program = str(EXAMPLES / "patterns")
    env = dict(os.environ, PYTHONPATH=_pythonpath() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows: list[dict] = []
    dropped = absent = 0  # labelled arrays with too few samples / with none (TCG, docs/lab.md)
    t0 = time.monotonic()
    topologies = [t for t in LAB_TOPOLOGIES if not args.only or t[0] in args.only]
    for where, lab_args, threads, split in topologies:
        work = out / f"{where}-work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        runs = lab_plan(program, threads, split, args.quick, tuple(args.kind or LAB_KINDS))
        names = [f"r{i:02d}" for i in range(len(runs))]
        doc = {"freq": args.freq, "runs": [
            {"name": n, "command": [r.program, *r.args],
             "env": dict(LAB_OMP, OMP_NUM_THREADS=str(r.threads))} for n, r in zip(names, runs, strict=True)]}
        (work / "plan.json").write_text(json.dumps(doc, indent=1))
        t = time.monotonic()
        cmd = [sys.executable, "-m", "numaprof.cli.main", "lab", *lab_args, "--timeout", str(LAB_TIMEOUT),
               "--", sys.executable, "-m", "numaprof.cli.train", "lab-guest", "plan.json"]
        print(f"{where}: {len(runs)} recordings in one guest ({' '.join(lab_args)}, {threads} threads)",
              flush=True)
        proc = subprocess.run(cmd, cwd=str(work), env=env, text=True)
        guest_s = time.monotonic() - t
        print(f"{where}: guest exited {proc.returncode} after {guest_s:.0f} s", flush=True)
        if not any(work.glob("r*.rc")):
            raise NumaprofError(f"the {where} guest recorded nothing (numaprof lab exited {proc.returncode})")
        n_rows = 0
        for name, run in zip(names, runs, strict=True):
            prof = work / f"{name}.data"
            rc_file = work / f"{name}.rc"
            if not rc_file.exists() or rc_file.read_text().strip() != "0" or not prof.is_dir():
                print(f"  {where} {run.name}: not recorded in the guest", file=sys.stderr)
                continue
            got = profile_rows(run, prof, args.freq, where)
            absent += len(run.labels) - len(got)
            keep = [r for r in got if enough_samples(r)]
            dropped += len(got) - len(keep)
            for r in got:
                if r not in keep:
                    print(f"  {where} {run.name} {r['object']}: dropped ({int(r['samples'])} samples, "
                          f"analyzer says unknown)")
            rows += keep
            n_rows += len(keep)
        print(f"{where}: {n_rows} rows ({time.monotonic() - t:.0f} s with the host analysis)", flush=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    path = out / DEFAULT_TABLE
    write_table(path, rows)
    print(f"{len(rows)} rows, {dropped} labelled arrays dropped for want of samples and {absent} "
          "never sampled, "
          f"in {time.monotonic() - t0:.0f} s -> {path}")
    return 0


def write_table(path: Path, rows: list[dict]) -> None:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, restval="")
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})


def _pythonpath() -> str:
    # the directory from which `numaprof` imports this checkout (or the installed package)
    import numaprof

    return str(Path(numaprof.__file__).resolve().parent.parent)


def cmd_record(args) -> int:
    if not (EXAMPLES / "patterns.c").exists():
        raise NumaprofError(f"{EXAMPLES} not found: run the training from a source checkout "
                            "(PYTHONPATH=<checkout> python -m numaprof.cli.train ...)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bins = build(out)
    runs = plan(bins, quick=args.quick, tiers=tuple(args.tier or ("full",)))
    rows: list[dict] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="numaprof-train-") as td:
        for i, run in enumerate(runs):
            t = time.monotonic()
            got = record_one(run, Path(td), args.freq)
            rows += got
            print(f"[{i + 1}/{len(runs)}] {run.name}: {len(got)} rows ({time.monotonic() - t:.1f} s)",
                  flush=True)
    path = out / DEFAULT_TABLE
    write_table(path, rows)
    shutil.rmtree(out / "bin", ignore_errors=True)
    print(f"{len(rows)} rows from {len(runs)} runs in {time.monotonic() - t0:.0f} s -> {path}")
    return 0


def load_table(path: str | Path) -> list[dict]:
    """Rows of a feature table (a CSV, or a directory holding features.csv); feature
    columns as floats."""
    p = Path(path)
    if p.is_dir():
        p = p / DEFAULT_TABLE
    try:
        with open(p, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise NumaprofError(f"feature table {p}: {e.strerror}") from e
    text = {"run", "program", "kernel", "args", "opt", "freq", "split", "object", "label", "analyzer_pattern",
            "where"}
    for r in rows:
        for k, v in list(r.items()):
            if k not in text:
                r[k] = float(v) if v not in ("", None) else float("nan")
    return rows


def matrix(rows: list[dict]) -> np.ndarray:
    return np.array([classifier.feature_vector(r) for r in rows], dtype=np.float64)


def fit(rows: list[dict]):
    """The random forest fitted on the train rows the model answers (others: fallback)."""
    from sklearn.ensemble import RandomForestClassifier

    train = [r for r in rows if r["split"] == "train" and classifier.fallback(r) is None]
    X = matrix(train)
    y = np.array([r["label"] for r in train])
    model = RandomForestClassifier(n_estimators=classifier.N_TREES, max_depth=4, min_samples_leaf=3,
                                   max_features="sqrt", random_state=SEED, n_jobs=1)
    model.fit(X, y)
    return model, len(train)


def evaluate(rows: list[dict], predict) -> dict:
    """Accuracy and confusion matrix of ``predict(rows) -> labels`` on rows whose label the
    model answers, plus the rows the fallback answers ("unknown")."""
    labels = list(classifier.CLASSES)
    modelled = [r for r in rows if classifier.fallback(r) is None and r["label"] in labels]
    fallback = [r for r in rows if classifier.fallback(r) is not None]
    pred = predict(modelled) if modelled else []
    cm = np.zeros((len(labels), len(labels)), dtype=int)
    for r, p in zip(modelled, pred, strict=True):
        cm[labels.index(r["label"]), labels.index(p)] += 1
    acc = float(np.trace(cm) / cm.sum()) if cm.sum() else float("nan")
    wrong = [(r["run"], r["object"], r["label"], p) for r, p in zip(modelled, pred, strict=True) if r["label"] != p]
    return {"accuracy": acc, "confusion": cm, "labels": labels, "n": len(modelled),
            "fallback": len(fallback),
            "fallback_correct": sum(1 for r in fallback if r["label"] == "unknown"), "wrong": wrong}


def print_eval(title: str, ev: dict) -> None:
    print(f"{title}: accuracy {ev['accuracy']:.3f} on {ev['n']} rows the model answers; "
          f"{ev['fallback']} rows answered 'unknown' by the fallback "
          f"({ev['fallback_correct']} of them labelled unknown by construction)")
    w = max(len(x) for x in ev["labels"])
    print("  " + " " * (w + 2) + "  ".join(f"{x[:9]:>9}" for x in ev["labels"]) + "   (rows: true, columns: predicted)")
    for lab, row in zip(ev["labels"], ev["confusion"], strict=True):
        print(f"  {lab:>{w}}  " + "  ".join(f"{v:>9d}" for v in row))
    for run, obj, lab, p in ev["wrong"]:
        print(f"  wrong: {run} {obj}: {lab} predicted {p}")


def cmd_fit(args) -> int:
    t0 = time.monotonic()
    rows = load_table(args.data)
    model, n_train = fit(rows)
    exported = classifier.export_forest(model, n_train=n_train, seed=SEED)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(exported, separators=(",", ":")) + "\n")
    clf = classifier.PatternModel(exported)

    def predict_labels(rs):
        return list(clf.predict(matrix(rs)))

    heldout = [r for r in rows if r["split"] == "heldout"]
    train = [r for r in rows if r["split"] == "train"]
    print(f"trained on {n_train} rows ({len(classifier.FEATURES)} features, {classifier.N_TREES} trees, "
          f"seed {SEED}) -> {out}")
    print_eval("train", evaluate(train, predict_labels))
    print_eval("held-out", evaluate(heldout, predict_labels))
    by_source: dict[str, list[dict]] = {}
    for r in heldout:
        by_source.setdefault(r.get("where") or "host", []).append(r)
    if len(by_source) > 1:  # the lab rows (docs/classifier.md) apart from this host's
        for where, rs in sorted(by_source.items()):
            print_eval(f"held-out, {where} rows", evaluate(rs, predict_labels))
    groups: dict[str, list[dict]] = {}
    for r in heldout:
        g = r["program"] if r["program"] != "patterns" else f"patterns -{r['opt']} {int(r['threads_requested'])} threads"
        where = r.get("where") or "host"
        groups.setdefault(g if where == "host" else f"{where} {g}", []).append(r)
    for g, rs in sorted(groups.items()):
        ev = evaluate(rs, predict_labels)
        print(f"  held-out {g}: {ev['n'] - len(ev['wrong'])}/{ev['n']} right, {ev['fallback']} unknown")
    imp = sorted(zip(model.feature_importances_, classifier.FEATURES, strict=True), reverse=True)
    print("feature importances: " + ", ".join(f"{n} {v:.2f}" for v, n in imp[:8]))
    print(f"fit took {time.monotonic() - t0:.1f} s")
    return 0


def cmd_evaluate(args) -> int:
    """The shipped (or --model) model on another recording: held-out and all rows."""
    rows = load_table(args.data)
    clf = classifier.PatternModel.load(args.model)

    def predict_labels(rs):
        return list(clf.predict(matrix(rs)))

    print(f"model {args.model} on {args.data} ({len(rows)} rows)")
    print_eval("held-out", evaluate([r for r in rows if r["split"] == "heldout"], predict_labels))
    print_eval("all rows", evaluate(rows, predict_labels))
    sources = sorted({r.get("where") or "host" for r in rows})
    if len(sources) > 1:
        for where in sources:
            print_eval(f"all {where} rows", evaluate([r for r in rows if (r.get("where") or "host") == where],
                                                    predict_labels))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m numaprof.cli.train", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record the labelled runs and write the feature table")
    r.add_argument("--out", required=True, help="directory for features.csv")
    r.add_argument("--quick", action="store_true", help="only the training runs and the examples")
    r.add_argument("--freq", type=int, default=FREQ, help=f"samples per second per thread (default {FREQ})")
    r.add_argument("--tier", action="append", choices=("full", "few"),
                   help="the runs to record (repeatable; default full): full at --freq, the shipped "
                        "table; few at 50-300 samples/s, held out, to measure the model on few samples")
    f = sub.add_parser("fit", help="train, evaluate on the held-out rows, export the model")
    f.add_argument("--data", default=str(ROOT / "tests" / "data" / "training"),
                   help="feature table (CSV or a directory with features.csv)")
    f.add_argument("--out", default=str(classifier.MODEL_PATH), help="model JSON to write")
    lr = sub.add_parser("lab-record", help="record the Figure 15 kernels in NUMA lab guests (2 and 4 nodes)")
    lr.add_argument("--out", required=True, help="directory for features.csv")
    lr.add_argument("--quick", action="store_true", help="half the iterations")
    lr.add_argument("--freq", type=int, default=FREQ, help=f"samples per second per thread (default {FREQ})")
    lr.add_argument("--only", action="append", choices=[t[0] for t in LAB_TOPOLOGIES],
                    help="record only this topology (repeatable)")
    lr.add_argument("--kind", action="append", choices=KINDS,
                    help="record only this kernel kind (repeatable; default all)")
    lr.add_argument("--keep", action="store_true", help="keep the guests' profiles in OUT/<where>-work")
    lg = sub.add_parser("lab-guest", help=argparse.SUPPRESS)
    lg.add_argument("plan")
    e = sub.add_parser("evaluate", help="the model's accuracy on another recording (no training)")
    e.add_argument("--data", required=True, help="feature table (CSV or a directory with features.csv)")
    e.add_argument("--model", default=str(classifier.MODEL_PATH), help="model JSON to evaluate")
    args = ap.parse_args(argv)
    try:
        return {"record": cmd_record, "fit": cmd_fit, "evaluate": cmd_evaluate, "lab-record": cmd_lab_record,
                "lab-guest": cmd_lab_guest}[args.cmd](args)
    except NumaprofError as e:
        print(f"numaprof: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
