"""Fidelity on realistic programs: how much of what numaprof records a user can read as
"their arrays, by the names they wrote, with a pattern".

    .venv/bin/python bench/fidelity.py [--opt O2|O3|all] [--program NAME ...] [--freq HZ]
                                       [--json] [--keep DIR]

Builds the corpus (tests/progs/corpus, each program at -O2 and -O3), records every run of
it with `numaprof record` at its default settings (only --freq changes them) with 2
OpenMP threads, reads `numaprof report --format json` and prints, per run:

- coverage: `profile.address_coverage`, the share of the samples not spin-waiting that
  carry a data address;
- named: the share of the samples with a data address (on the program's data: less the
  samples of numaprof's own work, of the OpenMP runtime's and the system libraries'
  work on their own state, and of the compiler's literal constants, which the report
  counts apart and puts in no object) that fall on an object whose name
  is a source name (see `is_named`): a variable, a member (`g->energy`, `Mesh::m_pos`,
  `lv[l].u`), a static symbol, or a type and member (`struct grid.energy`); not a
  mapping or stack placeholder (`[stack]`, `[heap]`, `stack@0x…`, `anon@0x…`,
  `heap@0x…`, `libfoo.so@0x…`), nor an allocation site (`func@file:line`);
- unknown: the share of those samples that have no pattern: on an
  object whose pattern is `unknown`, or on no object at all (`profile.outside_objects`);
- per expected array (the `numaprof-corpus: array` lines of the program's header): the
  objects whose name ends in that name (`is_named` names only; `lv->u` and `u` both end
  in `u`), their samples, pattern and kind, against the pattern expected by construction.

The address rules that lost samples (`profile.rules`, docs/profile-format.md) and the
unnamed objects with the most samples are printed under each run.  The numaprof used is
the one installed next to the interpreter running this script (the worktree's .venv),
so that an edited checkout is measured.  Targets (issue 13): coverage >= 0.90, named >=
0.90, unknown <= 0.10.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "progs" / "corpus"
BUILD = ROOT / "build" / "corpus"
OPTS = ("O2", "O3")
THREADS = 2
TARGETS = {"coverage": 0.90, "named": 0.90, "unknown": 0.10}
SOURCE_SUFFIXES = (".c", ".cpp", ".f90")
LOST_RULES = ("no_mem", "clobbered", "vsib", "segment", "undecodable", "unreadable", "kernel")

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PART = rf"{_IDENT}(?:<[^@()]*>)?(?:\[[^\]@]*\]|\([^()@]*\))*"
# a source name: identifiers joined by C/C++/Fortran member or scope operators, with
# optional indexes and template arguments, optionally after a type keyword
# the first identifier may be dereferenced, as assigned through an out-parameter:
# `(*A)->list_of_vals = new double[n]`, `*x = new double[n]`
_HEAD = rf"(?:\(\*+{_IDENT}\)|\*+{_IDENT}|{_PART})"
_NAMED = re.compile(rf"^(?:(?:struct|class|union|type)\s+)?{_HEAD}(?:(?:::|->|\.|%){_PART})*$")
_SPLIT = re.compile(r"::|->|\.|%")
# `block (part)`: the part a variable, or a type (`mem (struct knode)`: the records of
# that type carved out of the block)
_OPERATION = re.compile(r" [-+*/] ")
_BLOCK_PART = re.compile(r"^(\S+) \(((?:(?:struct|class|union|type)\s+)?\S+)\)$")
_DECL = re.compile(r"numaprof-corpus:\s*(run|array)\s+(\S+)((?:\s+\S+=\S+)*)\s*$")


def is_named(name: str) -> bool:
    """Whether an object's name is a source name (a variable, member, symbol or type
    member) rather than a placeholder for memory numaprof could not name (`[stack]`,
    `stack@0x…`, `anon@0x…`, `heap@0x…`), an allocation site (`main@app.c:12`) or a
    function's spill slots (`(spills) f`: no variable holds them).
    A pointer variable's own stack slot, `p (pointer)`, is named, and so are the frame
    slots holding copies of an array's elements, `a (copy)`, or values computed from
    them, `a (temp)`, or from two source names, `b * h2inv (temp)`; so is a part of a named
    block, `w.work (t)` (an array carved out of one allocation, or one block of a
    library's member, `Poisson::A (newValues)`), when both names are source names."""
    name = name.removesuffix(" (pointer)").removesuffix(" (copy)").removesuffix(" (temp)")
    terms = _OPERATION.split(name)
    if len(terms) == 2:  # a value computed from two (`b * h2inv (temp)`): both are names
        return all(is_named(t) for t in terms)
    part = _BLOCK_PART.match(name)
    if part:
        return bool(_NAMED.match(part.group(1)) and _NAMED.match(part.group(2)))
    return bool(_NAMED.match(name))


def leaf(name: str) -> str:
    """The last component of a source name, indexes and template arguments dropped:
    `lv[l].u` -> `u`, `Mesh::m_pos` -> `m_pos`, `struct grid.energy` -> `energy`,
    Fortran's `lv(2)%u` -> `u`; a block's part is its part: `w.work (t)` -> `t`."""
    part = _BLOCK_PART.match(name)
    if part and part.group(2) not in ("pointer", "copy", "temp"):  # a pointer's own slot, a
        # slot holding copies of an array's elements or values computed from them: not the array
        name = part.group(2)
    last = _SPLIT.split(name.split()[-1])[-1]
    return re.sub(r"<.*>|\[.*\]|\(.*\)", "", last)


@dataclass(frozen=True)
class Expected:
    """One hot array of a corpus program and its known answer."""
    name: str
    pattern: str
    private: bool = False


@dataclass(frozen=True)
class Run:
    """One way of running a corpus program (a program may have several, e.g. cg)."""
    name: str
    program: str  # binary stem: build/corpus/<program>-<opt>
    source: Path
    args: tuple[str, ...] = ()
    first_touch: str | None = None  # serial | parallel, for every shared array
    arrays: tuple[Expected, ...] = ()

    def binary(self, opt: str, build: Path = BUILD) -> Path:
        return build / f"{self.program}-{opt}"


def parse_source(path: Path) -> list[Run]:
    """The runs declared in a corpus program's header (`numaprof-corpus: run NAME
    [args=A,B] [first_touch=serial|parallel]`, `numaprof-corpus: array NAME
    pattern=P [private=yes]`)."""
    runs: list[dict] = []
    arrays: list[Expected] = []
    for line in path.read_text().splitlines():
        m = _DECL.search(line)
        if not m:
            continue
        what, name, rest = m.group(1), m.group(2), m.group(3)
        kv = dict(item.split("=", 1) for item in rest.split())
        if what == "run":
            runs.append({"name": name, "args": tuple(a for a in kv.get("args", "").split(",") if a),
                         "first_touch": kv.get("first_touch")})
        else:
            if kv.get("pattern") not in ("regular", "irregular", "random"):
                raise ValueError(f"{path}: array {name}: pattern must be regular, irregular or random")
            arrays.append(Expected(name, kv["pattern"], kv.get("private", "no") == "yes"))
    return [Run(r["name"], path.stem, path, r["args"], r["first_touch"], tuple(arrays)) for r in runs]


def corpus_runs(corpus: Path = CORPUS) -> list[Run]:
    """Every run of every program of the corpus, in file name order."""
    runs: list[Run] = []
    for src in sorted(corpus.iterdir()):
        if src.suffix in SOURCE_SUFFIXES:
            runs.extend(parse_source(src))
    return runs


def build_corpus(build: Path = BUILD) -> None:
    """Builds every corpus program at -O2 and -O3 into ``build``."""
    subprocess.run(["make", "-s", "-C", str(CORPUS), f"OUT={build}", "-j2"], check=True)


def numaprof_argv() -> list[str]:
    """The numaprof installed next to this interpreter (the worktree's .venv)."""
    exe = Path(sys.executable).parent / "numaprof"
    if exe.exists():
        return [str(exe)]
    venv = ROOT / ".venv" / "bin" / "numaprof"
    if venv.exists():
        return [str(venv)]
    return [sys.executable, "-m", "numaprof.cli.main"]


def record(run: Run, opt: str, out: Path, freq: int | None = None, build: Path = BUILD) -> dict:
    """Records one run with the default settings (2 OpenMP threads; ``freq`` if given)
    into ``out`` and returns its `report --format json` document."""
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS)}
    if "numaprof.cli.main" in " ".join(numaprof_argv()):
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    argv = [*numaprof_argv(), "record", "-o", str(out)]
    if freq:
        argv += ["--freq", str(freq)]
    argv += ["--", str(run.binary(opt, build)), *run.args]
    rec = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if rec.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {rec.returncode}:\n{rec.stdout}{rec.stderr}")
    rep = subprocess.run([*numaprof_argv(), "report", str(out), "--format", "json"], env=env,
                         capture_output=True, text=True, timeout=600)
    if rep.returncode != 0:
        raise RuntimeError(f"numaprof report {out} exited {rep.returncode}:\n{rep.stderr}")
    return json.loads(rep.stdout)


@dataclass
class Found:
    """What the report says about one expected array."""
    name: str
    expected_pattern: str
    private: bool
    objects: list[dict] = field(default_factory=list)  # {name, kind, samples, share, pattern, threads}

    @property
    def samples(self) -> int:
        return sum(o["samples"] for o in self.objects)

    @property
    def pattern(self) -> str | None:
        """The pattern of the object with the most samples, None when not found."""
        return max(self.objects, key=lambda o: o["samples"])["pattern"] if self.objects else None


@dataclass
class Fidelity:
    run: str
    opt: str
    samples: int
    with_address: int
    coverage: float
    named: float
    unknown: float
    outside: int
    lost_rules: dict[str, int]
    arrays: list[Found]
    unnamed_top: list[dict]  # the unnamed objects with most samples

    def meets(self, metric: str) -> bool:
        value = getattr(self, metric)
        return value <= TARGETS[metric] if metric == "unknown" else value >= TARGETS[metric]


def matching(report: dict, name: str) -> list[dict]:
    """The report's objects with a source name ending in ``name``."""
    return [o for o in report["objects"] if is_named(o["name"]) and leaf(o["name"]) == name]


def measure(report: dict, run: Run, opt: str) -> Fidelity:
    """The fidelity numbers of one `report --format json` document (definitions in this
    module's docstring)."""
    prof = report["profile"]
    # the samples on the program's data: not numaprof's own, the OpenMP runtime's work on
    # its own state (barrier counters), a system library's on its own (libm's tables) nor
    # the compiler's literal constants, which are no object (`profile.numaprof_own`,
    # `profile.runtime_samples`, `profile.library_samples`, `profile.constant_samples`)
    addressed = (int(prof["with_address"]) - int(prof.get("numaprof_own", 0)) - int(prof.get("runtime_samples", 0))
                 - int(prof.get("library_samples", 0)) - int(prof.get("constant_samples", 0)))
    objs = report["objects"]
    named = sum(o["samples"] for o in objs if is_named(o["name"]))
    unknown = sum(o["samples"] for o in objs if o["pattern"] == "unknown") + int(prof["outside_objects"])
    arrays = []
    for e in run.arrays:
        found = [{k: o[k] for k in ("name", "kind", "samples", "share", "pattern", "threads")}
                 | {"thread_private": o.get("thread_private")} for o in matching(report, e.name)]
        arrays.append(Found(e.name, e.pattern, e.private, sorted(found, key=lambda o: -o["samples"])))
    unnamed = sorted((o for o in objs if not is_named(o["name"])), key=lambda o: -o["samples"])[:3]
    return Fidelity(
        run=run.name, opt=opt, samples=int(prof["samples"]), with_address=addressed,
        coverage=float(prof["address_coverage"]),
        named=named / addressed if addressed else 0.0,
        unknown=unknown / addressed if addressed else 1.0,
        outside=int(prof["outside_objects"]),
        lost_rules={r: int(c) for r, c in (prof.get("rules") or {}).items() if r in LOST_RULES and c},
        arrays=arrays,
        unnamed_top=[{k: o[k] for k in ("name", "kind", "size", "samples", "pattern")} for o in unnamed],
    )


def _mark(f: Fidelity, metric: str) -> str:
    return "" if f.meets(metric) else " *"


def render(results: list[Fidelity]) -> str:
    """The text table: one line per run and level, then the arrays of each."""
    lines = [f"{'run':<14}{'opt':<5}{'samples':>8}{'coverage':>11}{'named':>9}{'unknown':>10}  "
             f"arrays as expected (name / pattern)"]
    for f in results:
        ok_name = sum(1 for a in f.arrays if a.objects)
        ok_pat = sum(1 for a in f.arrays if a.pattern == a.expected_pattern)
        lines.append(f"{f.run:<14}{f.opt:<5}{f.samples:>8}{f.coverage:>9.2f}{_mark(f, 'coverage'):2}"
                     f"{f.named:>7.2f}{_mark(f, 'named'):2}{f.unknown:>8.2f}{_mark(f, 'unknown'):2}"
                     f"  {ok_name}/{len(f.arrays)} / {ok_pat}/{len(f.arrays)}")
    lines.append("(* misses the target: coverage >= 0.90, named >= 0.90, unknown <= 0.10)")
    for f in results:
        lines.append("")
        lines.append(f"{f.run} -{f.opt}: {f.with_address} of {f.samples} samples with an address; "
                     f"outside any object {f.outside}; address lost by rule: "
                     + (", ".join(f"{r} {c}" for r, c in sorted(f.lost_rules.items(), key=lambda kv: -kv[1]))
                        or "none"))
        lines.append(f"  {'array':<10}{'expected':<11}{'found as':<34}{'kind':<8}{'samples':>8}"
                     f"{'share':>7}  pattern")
        for a in f.arrays:
            exp = a.expected_pattern + (" (private)" if a.private else "")
            if not a.objects:
                lines.append(f"  {a.name:<10}{a.expected_pattern:<11}{'-- not found --':<34}")
                continue
            for k, o in enumerate(a.objects):
                verdict = "ok" if o["pattern"] == a.expected_pattern else "WRONG"
                lines.append(f"  {a.name if k == 0 else '':<10}{(exp if k == 0 else ''):<11}"
                             f"{o['name'][:33]:<34}{o['kind']:<8}{o['samples']:>8}{o['share']:>7.2f}"
                             f"  {o['pattern']} ({verdict})")
        for o in f.unnamed_top:
            lines.append(f"  unnamed: {o['name']} ({o['kind']}, {o['size']} bytes): {o['samples']} samples, "
                         f"{o['pattern']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opt", choices=[*OPTS, "all"], default="all", help="optimisation level(s)")
    ap.add_argument("--program", action="append", default=[],
                    help="only this run or program (repeatable), e.g. cg-serial, fft")
    ap.add_argument("--freq", type=int, default=None, help="sampling rate (default: numaprof's)")
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON")
    ap.add_argument("--keep", type=Path, default=None, help="keep the profiles in this directory")
    args = ap.parse_args(argv)

    runs = corpus_runs()
    if args.program:
        unknown = [p for p in args.program if not any(p in (r.name, r.program) for r in runs)]
        if unknown:
            names = sorted({r.name for r in runs} | {r.program for r in runs})
            ap.error(f"no corpus run {', '.join(unknown)}; choose from {', '.join(names)}")
        runs = [r for r in runs if r.name in args.program or r.program in args.program]
    opts = OPTS if args.opt == "all" else (args.opt,)
    build_corpus()
    results = []
    with tempfile.TemporaryDirectory(prefix="numaprof-fidelity-") as tmp:
        base = args.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        for opt in opts:
            for run in runs:
                out = base / f"{run.name}-{opt}.data"
                report = record(run, opt, out, args.freq)
                results.append(measure(report, run, opt))
                if not args.json:
                    print(f"recorded {run.name} -{opt}", file=sys.stderr)
    if args.json:
        print(json.dumps([asdict(f) | {"arrays": [asdict(a) | {"pattern": a.pattern} for a in f.arrays]}
                          for f in results], indent=1))
    else:
        print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
