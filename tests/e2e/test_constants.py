"""End-to-end: loads of the compiler's constants (tests/progs/constants.c).  Literals in
the executable's .rodata are at no symbol, read RIP-relative by `transfer`: a sample
charged to one caught arithmetic, not a wait on memory.  They are counted apart
(`profile.constant_samples`) with a finding naming the lines, in no object, and never
placed; the program's arrays keep their names."""

import json

import pytest
from helpers import PROGS, compile_openmp, run_numaprof

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    work = tmp_path_factory.mktemp("constants")
    exe = compile_openmp(PROGS / "constants.c", work / "constants", "-lm")
    run_numaprof("record", "-o", work / "p.data", "--", exe, "1000000", "1000",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    return work / "p.data"


@pytest.fixture(scope="module")
def report(profile):
    return json.loads(run_numaprof("report", profile, "--format", "json", check=True).stdout)


def test_the_compilers_constants_are_counted_apart(report):
    prof = report["profile"]
    objs = {o["name"]: o for o in report["objects"]}
    assert prof["constant_samples"] >= 0.2 * prof["with_address"], prof
    said = [f for f in report["findings"] if "the compiler's constants" in f]
    assert len(said) == 1 and "transfer@constants.c:" in said[0], report["findings"]
    # in no object, nor counted as outside every object
    ro = objs.get("constants .rodata")
    assert ro is None or ro["samples"] <= 0.02 * prof["with_address"], ro
    assert prof["outside_objects"] <= 0.02 * prof["with_address"], prof
    total = sum(o["samples"] for o in report["objects"])
    assert (total + prof["outside_objects"] + prof["constant_samples"] + prof["library_samples"]
            + prof["runtime_samples"] + prof["numaprof_own"]) == prof["with_address"], prof
    for name in ("x", "y"):
        assert objs[name]["kind"] == "heap" and objs[name]["read_only"] is False, objs[name]


def test_constants_are_said_and_never_placed(profile):
    text = run_numaprof("report", profile, check=True).stdout
    assert "read the compiler's constants" in " ".join(text.split()), text
    sug = json.loads(run_numaprof("suggest", profile, "--target", "2s", "--format", "json",
                                  check=True).stdout)
    assert "constants .rodata" not in [o["name"] for o in sug["objects"]], sug["objects"]
    assert {"x", "y"} & {o["name"] for o in sug["objects"]}, sug["objects"]
