"""End-to-end: the shipped pattern model on fresh recordings of the examples, whose
right answers are known by construction (their header comments).  Small runs, a few
seconds each; no timing assertions."""

from __future__ import annotations

import pytest
from helpers import EXAMPLES, run_numaprof

from numaprof.analyzer import analyze

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def record(examples_built, tmp_path_factory):
    base = tmp_path_factory.mktemp("classifier")
    cache = {}

    def get(program: str, *args: str, freq: int | None = None):
        key = (program, args, freq)
        if key not in cache:
            out = base / f"{program}-{len(cache)}.data"
            opts = ["--freq", str(freq)] if freq else []
            run_numaprof("record", "-o", out, *opts, "--", EXAMPLES / program, *args,
                         env={"OMP_NUM_THREADS": "2"}, check=True)
            # by name, the largest object first (a static pointer `a` is not the array `a`)
            objs = sorted((o for o in analyze(out).objects if o.kind in ("heap", "static")),
                          key=lambda o: o.size)
            cache[key] = {o.name: o for o in objs}
        return cache[key]

    return get


def decided(objs, name):
    assert name in objs, f"{name!r} not found; objects: {sorted(objs)}"
    o = objs[name]
    assert o.pattern != "unknown", (name, o.samples, o.features)
    return o


# 8000 samples/s per thread: short runs that still give every array enough samples
FREQ = 8000


def test_spmv(record):
    objs = record("spmv", "100", freq=FREQ)
    for name in ("values", "colidx"):
        assert decided(objs, name).pattern == "regular", (name, objs[name].features)
    assert decided(objs, "x").pattern == "random", objs["x"].features
    y = decided(objs, "y")
    assert y.pattern == "regular", y.features
    assert y.writes >= 0.5, (y.reads, y.writes)


def test_reversed_partition_is_irregular(record):
    objs = record("patterns", "irregular", "static", "rw", "64", "80", freq=FREQ)
    assert decided(objs, "c").pattern == "irregular", objs["c"].features
    # the add phase always walks upwards: b keeps its blocks
    assert decided(objs, "b").pattern == "regular", objs["b"].features
    # a opens both loops (read backwards in the copy, forwards in the add): the sampler
    # must charge it its own loads (the decoder's retired-access rule), not b's or c's
    assert decided(objs, "a").pattern == "irregular", (objs["a"].samples, objs["a"].features)


def test_dynamic_schedule_is_irregular(record):
    objs = record("patterns", "regular", "dynamic", "read", "128", "40", freq=FREQ)
    for name in ("a", "b"):
        assert decided(objs, name).pattern == "irregular", (name, objs[name].features)
    objs = record("patterns", "regular", "dynamic", "write", "128", "40", freq=FREQ)
    assert decided(objs, "c").pattern == "irregular", objs["c"].features


def test_static_schedule_is_regular(record):
    # the same kernel with a static schedule: the model must tell the two apart
    objs = record("patterns", "regular", "static", "read", "128", "40", freq=FREQ)
    for name in ("a", "b"):
        assert decided(objs, name).pattern == "regular", (name, objs[name].features)


def test_fortran_arrays(record):
    objs = record("fortran_arrays", "200", freq=FREQ)
    assert decided(objs, "u").pattern == "regular", objs["u"].features
    assert decided(objs, "v").pattern == "regular", objs["v"].features
    assert decided(objs, "w").pattern == "random", objs["w"].features
    assert decided(objs, "idx").pattern == "regular", objs["idx"].features


def test_one_thread_is_unknown(examples_built, tmp_path):
    out = tmp_path / "one.data"
    run_numaprof("record", "-o", out, "--", EXAMPLES / "patterns", "regular", "static", "rw", "32", "80",
                 env={"OMP_NUM_THREADS": "1"}, check=True)
    objs = [o for o in analyze(out).objects if o.kind == "heap" and o.samples >= 30]
    assert objs
    for o in objs:
        assert (o.pattern, o.pattern_confidence) == ("unknown", 0.0), (o.name, o.features)
        assert all(not p.parallel for p in o.phases)
