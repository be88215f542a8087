"""End-to-end: a loop's register spills (tests/progs/spills.c).  The slots of its
variables are named after them from their DWARF locations; the slots of the
loop-invariant temporaries the compiler keeps across a call are no variable's: they are
one thread-private object `(spills) main._omp_fn.0`, not an anonymous `[stack]`, and the
local array of the same frame keeps its name."""

import json

import pytest
from helpers import PROGS, compile_openmp, run_numaprof

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    work = tmp_path_factory.mktemp("spills")
    exe = work / "spills"
    compile_openmp(PROGS / "spills.c", exe)
    run_numaprof("record", "-o", work / "p.data", "--", exe, "1000", "150000",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    return json.loads(run_numaprof("report", work / "p.data", "--format", "json", check=True).stdout)


def test_spill_slots_are_one_private_object_of_their_function(report):
    objs = {o["name"]: o for o in report["objects"]}
    sp = objs.get("(spills) main._omp_fn.0")
    assert sp is not None, sorted(objs)
    assert sp["kind"] == "stack" and sp["attribution"] == "spill" and sp["thread_private"] is True, sp
    assert sp["count"] == 2 and sp["threads"] == 2, sp  # a frame per thread
    # six invariant factors of 8 bytes, reloaded after each call: the span of the slots
    assert 8 <= sp["size"] <= 64 and sp["reads"] >= 0.9, sp
    assert sp["share"] >= 0.1, sp
    # nothing is left on an anonymous stack
    anon = [o for o in report["objects"] if o["name"] == "[stack]" or o["name"].startswith("stack@")]
    assert sum(o["samples"] for o in anon) <= 0.02 * report["profile"]["with_address"], anon


def test_variables_of_the_frame_keep_their_names(report):
    objs = {o["name"]: o for o in report["objects"]}
    assert objs["hist"]["attribution"] == "frame" and objs["hist"]["thread_private"] is True
    assert objs["hist"]["size"] == 4096
    # the accumulators' own slots are named after them (their DWARF locations say so)
    spilled_vars = [n for n in "abcdef" if n in objs]
    assert spilled_vars and all(objs[n]["attribution"] == "frame" for n in spilled_vars), sorted(objs)
