"""End-to-end: many short parallel loops (tests/progs/short_loops.c).  libgomp's code on
its own barrier and loop counters, in a heap block it allocated, was an `anon@0x…` or
`[heap]` object of the program's with a pattern (NPB SP class W: 20 % of the samples).
It is counted apart (`profile.runtime_samples`), with a finding that says what it is and
what cuts it; the loops' arrays keep their samples."""

import json

import pytest
from helpers import PROGS, compile_openmp, recorded_report, run_numaprof

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return recorded_report(tmp_path_factory.mktemp("short_loops"), "short_loops", "2048", "400000")


def test_the_runtimes_own_state_is_counted_apart(report):
    prof = report["profile"]
    runtime = prof["runtime_samples"]
    assert runtime >= 0.02 * prof["with_address"], prof
    note = [f for f in report["findings"] if "OpenMP runtime's (libgomp" in f]
    assert len(note) == 1 and note[0].startswith(f"{runtime} samples"), report["findings"]
    objs = {o["name"]: o for o in report["objects"]}
    for name in ("a", "b"):
        assert objs[name]["kind"] == "heap", objs[name]
    # what is left of the heap and anonymous mappings is not the runtime's barrier word
    rest = sum(o["samples"] for o in report["objects"] if o["kind"] == "mapping" and not o["read_only"])
    assert rest <= 0.02 * prof["with_address"], [(o["name"], o["samples"]) for o in report["objects"]]
    # (the C library's work on its own data, a sample now and then, is counted apart too,
    # and so are the loads of the literal 0.5, which the samples of the store after its
    # multiply are charged to)
    assert sum(o["samples"] for o in report["objects"]) + prof["outside_objects"] + runtime \
        + prof["numaprof_own"] + prof["library_samples"] + prof["constant_samples"] == prof["with_address"]


def test_the_other_array_of_a_sampled_allocation_line_stays_apart(tmp_path):
    """`double *a = malloc(..), *b = malloc(..)` on one line: with small blocks sampled
    about once per 16 KiB, one of the two 16 KiB arrays is recorded as its allocation
    site's; the other, named by the code that reads it, is another array of that line
    and keeps its samples (it went into the sampled one's stretch of heap, one time in
    six at the default sampling of small blocks)."""
    exe = compile_openmp(PROGS / "short_loops.c", tmp_path / "short_loops")
    run_numaprof("record", "-o", tmp_path / "p.data", "--small-sample", "16384", "--", exe,
                 "2048", "100000", env={"OMP_NUM_THREADS": "2"}, check=True)
    doc = json.loads(run_numaprof("report", tmp_path / "p.data", "--format", "json",
                                  check=True).stdout)
    objs = {o["name"]: o for o in doc["objects"]}
    assert "a" in objs and "b" in objs, [(o["name"], o["samples"]) for o in doc["objects"]]
    assert objs["a"]["samples"] > 0.8 * objs["b"]["samples"]  # a: read twice, written once
