"""The realistic-program corpus (tests/progs/corpus, issue 13): every run of every program
recorded once per session with numaprof's default settings, 2 OpenMP threads, -O2 (the
bench, bench/fidelity.py, also measures -O3); the known right answer of each program (the
`numaprof-corpus:` lines of its header comment) and the fidelity targets are asserted.

The measures (address coverage, named share, unknown share, which objects carry an
expected array's name) are bench/fidelity.py's, so that the bench and these tests agree.

Assertions that today's numaprof fails are marked xfail(strict=True) with what is missing,
as measured at -O2 in three recordings on the 2-core development VM: when a change makes
one pass, the test fails until its mark is removed.  A name or pattern that comes out
right in some recordings only is a non-strict xfail, with the counts measured.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
from helpers import ROOT


def _load_fidelity():
    spec = importlib.util.spec_from_file_location("numaprof_bench_fidelity", ROOT / "bench" / "fidelity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


fidelity = _load_fidelity()
RUNS = {r.name: r for r in fidelity.corpus_runs()}
OPT = "O2"

# Why an expected array is not found under its name (measured at -O2).
NOT_FOUND: dict[tuple[str, str], str] = {}
# Found under its name (a shared array: as one object) in some recordings only.
FLAKY_NAMED = {
    ("adi", "cp"): "found in 4 of 5 recordings, with 1-2 samples (sweep_y's copy): at -O2 the "
                   "forward sweep keeps cp(i - 1) in a register and the back substitution's "
                   "samples land on the dp loads after the cp ones",
}
# Found under its name, but not as the one object of that name (the name test only: the
# pattern test takes the object with most samples); non-strict, as the extra objects
# have a few samples each.
WRONG: dict[tuple[str, str], str] = {}
# Found, the object with most samples having another pattern.
WRONG_PATTERN: dict[tuple[str, str], str] = {}
# Found, the object with most samples having the expected pattern in some recordings only.
FLAKY_PATTERN = {
    ("adi", "cp"): "unknown with the 1-2 samples most recordings give it (see FLAKY_NAMED); "
                   "random, as built, in a recording that gave it 49 (2026-11-28)",
    ("fft", "tw"): "random in 8 of 10 recordings, irregular in the others (201-217 samples; "
                   "8 KiB, two pages, read all over by both threads)",
    ("heat_dt", "k"): "random in 11 of 12 recordings, irregular in one (64-101 samples: 12 KiB "
                      "gathered by one load of the stencil's body)",
    # On an AMD EPYC VM (2026-11-29; the recordings above were made on another machine) the
    # timer's samples go even more to the accesses that stall, and these small arrays read
    # in order get fewer than a pattern needs (30): the report says "needs +N samples".
    ("cg-serial", "rowptr"): "unknown with 11-27 samples in 5 of 5 recordings on the AMD VM "
                             "(val's and x's loads stall; rowptr's are prefetched)",
    ("cg-parallel", "rowptr"): "unknown with 6-19 samples in 5 of 5 recordings on the AMD VM",
    ("heat_dt", "perm"): "26-37 samples on the AMD VM: irregular in 2, unknown in 1 of 3 recordings "
                         "(random in 1 of 2 with 86-90 samples, at 2400 steps)",
    ("workspace", "col"): "9-16 samples in 3 of 3 recordings on the AMD VM, unknown (the gather of "
                          "t beside it takes 82 %)",
    ("workspace", "b"): "25-43 samples on the AMD VM: regular in 2 of 3 recordings, unknown in one",
    # CI's first run at 4001 Hz (2026-12-01, another machine) gave f 4077 samples and
    # `irregular` (0.655); here (AMD VM, 2026-12-02) it is regular (0.952) in 17 of 17
    # default recordings (1721-2926 samples, 3 of them beside two busy loops) and in 3 of
    # 3 of 80 steps (4144-4979 samples), the ranges of its threads apart (overlap 0).
    # A coarser small-block sample (`--small-sample 4194304`, 1 of 2 recordings) merged a
    # coarse level's f with the blocks around it into one instance (overlap 0.39, still
    # regular at 0.877): the likely cause, unconfirmed.
    ("multigrid", "f"): "irregular (0.655, 4077 samples) in 1 CI run; regular in 17 of 17 "
                        "default recordings on the AMD VM",
}
TARGET_MISSES: dict[tuple[str, str], str] = {}
# Targets met in some recordings only (non-strict).
FLAKY_TARGETS: dict[tuple[str, str], str] = {}


def _xfail(reason: str | None, strict: bool = True) -> list:
    return [pytest.mark.xfail(strict=strict, reason=reason)] if reason else []


def _array_params(only_private: bool = False, pattern: bool = False) -> list:
    params = []
    for run in RUNS.values():
        for e in run.arrays:
            if only_private and not e.private:
                continue
            key = (run.name, e.name)
            if pattern:
                marks = _xfail(NOT_FOUND.get(key) or WRONG_PATTERN.get(key))
                if key in FLAKY_PATTERN:
                    marks = _xfail(FLAKY_PATTERN[key], strict=False)
            else:
                marks = _xfail(NOT_FOUND.get(key))
                if key in WRONG and not only_private:
                    # the extra objects have a few samples each: absent in some recordings
                    marks = _xfail(WRONG[key], strict=False)
                if key in FLAKY_NAMED:
                    marks = _xfail(FLAKY_NAMED[key], strict=False)
            params.append(pytest.param(run.name, e, id=f"{run.name}-{e.name}", marks=marks))
    return params


@pytest.fixture(scope="session")
def corpus_report(tmp_path_factory):
    fidelity.build_corpus()
    base = tmp_path_factory.mktemp("corpus")
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            cache[name] = fidelity.record(RUNS[name], OPT, base / f"{name}.data")
        return cache[name]

    return get


# --------------------------------------------------------------- the corpus itself

def test_corpus_declares_its_answers():
    """Every program declares its runs and hot arrays; a header the parser misses would
    make the tests below vacuous."""
    programs = {r.program for r in RUNS.values()}
    assert programs == {"adi", "bucket_sort", "cg", "fft", "heat_dt", "mesh", "multigrid", "rows", "table_lookup",
                        "workspace"}
    assert {"cg-serial", "cg-parallel"} <= RUNS.keys()
    for run in RUNS.values():
        assert len(run.arrays) >= 2, run.name
        assert all(e.pattern in ("regular", "irregular", "random") for e in run.arrays)
    assert {e.name for r in RUNS.values() for e in r.arrays if e.private} == {"hist", "work", "cp", "dp"}


@pytest.mark.parametrize("name, named", [
    ("u", True), ("g->energy", True), ("grids[].energy", True), ("lv(2)%u", True), ("lv[l].u", True), ("Mesh::m_pos", True),
    ("grid::field", True), ("struct grid.energy", True), ("fields%w", True), ("this->m_pos", True),
    ("[stack]", False), ("[heap]", False), ("stack@0x7f0217b64000", False),
    ("anon@0x5558a5d93000", False), ("heap@0x1000", False), ("main@cg.c:96", False),
    ("Mesh::allocate(unsigned long, int)@mesh.cpp:75", False),
    ("libc.so.6@0x7f00ccf3b000", False), ("shim.123.bin@0x7f00", False), ("", False),
    ("w.work (t)", True), ("Poisson::A (newValues)", True), ("p (pointer)", True),
    ("mem (struct knode)", True), ("heap@0x1000 (struct knode)", False), ("mem (struct knode x)", False),
    ("heap@0x1000 (t)", False), ("main@cg.c:96 (x)", False),
    ("(spills) CalcHourglassControlForElems", False), ("(spills) main._omp_fn.0", False),
    ("(*A)->list_of_vals", True), ("*xexact", True), ("(*)->x", False), ("(x", False),
    ("miniFE::CSRMatrix<double, int, int>::packed_coefs", True), ("p->coefs", True),
    ("b * h2inv (temp)", True), ("n - k (temp)", True), ("b * (spills) f (temp)", False),
    ("anon@0x1000 + k (temp)", False),
])
def test_named_definition(name, named):
    assert fidelity.is_named(name) is named


@pytest.mark.parametrize("name, last", [
    ("u", "u"), ("g->energy", "energy"), ("lv[l].u", "u"), ("Mesh::m_pos", "m_pos"),
    ("struct grid.energy", "energy"), ("fields%w", "w"), ("g[i][j]", "g"), ("lv(2)%u", "u"),
    ("w.work (t)", "t"), ("Poisson::A (newValues)", "newValues"), ("p (pointer)", ""),
])
def test_leaf(name, last):
    assert fidelity.leaf(name) == last


def test_measure_on_a_hand_built_report():
    """The three shares from a report document, computed by hand."""
    run = fidelity.Run("t", "t", ROOT / "t.c", arrays=(fidelity.Expected("a", "random"),))
    report = {"profile": {"samples": 120, "with_address": 100, "address_coverage": 0.9,
                          "outside_objects": 5, "rules": {"no_mem": 9, "skid": 100}},
              "objects": [
                  {"name": "g->a", "kind": "heap", "size": 800, "samples": 60, "share": 0.6, "pattern": "random", "threads": 2},
                  {"name": "[stack]", "kind": "stack", "size": 4096, "samples": 25, "share": 0.25, "pattern": "unknown", "threads": 1},
                  {"name": "main@t.c:3", "kind": "heap", "size": 80, "samples": 10, "share": 0.1, "pattern": "regular", "threads": 2},
              ]}
    f = fidelity.measure(report, run, "O2")
    assert (f.coverage, f.named, f.unknown) == (0.9, 0.6, 0.3)  # unknown: 25 + 5 outside
    assert f.lost_rules == {"no_mem": 9}
    assert [o["name"] for o in f.arrays[0].objects] == ["g->a"] and f.arrays[0].pattern == "random"
    assert not f.meets("named") and f.meets("coverage") and not f.meets("unknown")
    # numaprof's own, the OpenMP runtime's and the system libraries' samples on their own
    # data are no data of the program's
    report["profile"] |= {"numaprof_own": 4, "runtime_samples": 6, "library_samples": 10}
    f = fidelity.measure(report, run, "O2")
    assert (f.named, f.unknown) == (0.75, 0.375)  # 60 / 80, (25 + 5) / 80
    # nor are the compiler's literal constants
    report["profile"] |= {"constant_samples": 20}
    f = fidelity.measure(report, run, "O2")
    assert (f.named, f.unknown) == (1.0, 0.5)  # 60 / 60, (25 + 5) / 60


# ------------------------------------------------------------ recorded, -O2, defaults

@pytest.mark.e2e
@pytest.mark.parametrize("run, metric", [
    pytest.param(r, m, id=f"{r}-{m}", marks=_xfail(TARGET_MISSES.get((r, m)))
                 or _xfail(FLAKY_TARGETS.get((r, m)), strict=False))
    for r in RUNS for m in ("coverage", "named", "unknown")
])
def test_target(corpus_report, run, metric):
    """coverage >= 0.90, named >= 0.90, unknown <= 0.10 (definitions: bench/fidelity.py)."""
    f = fidelity.measure(corpus_report(run), RUNS[run], OPT)
    assert f.meets(metric), (f"{metric} {getattr(f, metric):.3f}; lost rules {f.lost_rules}; "
                             f"unnamed {f.unnamed_top}")


@pytest.mark.e2e
@pytest.mark.parametrize("run, expected", _array_params())
def test_array_named(corpus_report, run, expected):
    """The array is found under the name its source gives it (a member's name may carry
    its owner: `g->energy`, `Mesh::m_pos`); a shared array is exactly one object."""
    report = corpus_report(run)
    found = fidelity.matching(report, expected.name)
    names = [(o["name"], o["samples"]) for o in report["objects"][:12]]
    assert found, f"{expected.name} not found; objects: {names}"
    if not expected.private:
        # the array is its elements: a grid's row pointers (`lv->u[]` beside `lv->u[][]`,
        # allocated and read apart from the rows) are another array of the same leaf
        data = [o for o in found if _depth(o["name"]) == max(_depth(x["name"]) for x in found)]
        assert len(data) == 1, f"{len(data)} objects named {expected.name}: {found}"


def _depth(name: str) -> int:
    return name.count("[]")


@pytest.mark.e2e
@pytest.mark.parametrize("run, expected", _array_params(pattern=True))
def test_array_pattern(corpus_report, run, expected):
    """The array's pattern is the one it has by construction (its program's header)."""
    found = fidelity.matching(corpus_report(run), expected.name)
    assert found, f"{expected.name} not found"
    top = max(found, key=lambda o: o["samples"])
    assert top["pattern"] == expected.pattern, (top["name"], top["samples"], top["pattern"],
                                                top["pattern_confidence"])


@pytest.mark.e2e
@pytest.mark.parametrize("run, expected", _array_params(only_private=True))
def test_array_thread_private(corpus_report, run, expected):
    """A thread-private array (a local of a parallel region) is reported as such: a
    stack object, or one marked `thread_private`."""
    found = fidelity.matching(corpus_report(run), expected.name)
    assert found, f"{expected.name} not found"
    for o in found:
        assert o["kind"] == "stack" or o.get("thread_private") is True, o


@pytest.mark.e2e
@pytest.mark.parametrize("run", [r for r in RUNS if RUNS[r].first_touch])
def test_first_touch(corpus_report, run):
    """cg's serial variant places every page from the master thread; the parallel one
    from both threads."""
    report = corpus_report(run)
    for e in RUNS[run].arrays:
        found = fidelity.matching(report, e.name)
        assert len(found) == 1, e.name
        ft = found[0]["first_touch"]
        if RUNS[run].first_touch == "serial":
            assert ft["serial"] and ft["master_fraction"] >= 0.9, (e.name, ft)
        else:
            assert ft["threads"] >= 2 and ft["master_fraction"] < 0.9, (e.name, ft)
