"""End-to-end: loads of the compiler's constants (tests/progs/constants.c).  Literals in
the executable's .rodata are at no symbol; their samples were in no object.  They are one
read-only object of the file, `constants .rodata`, which the report sets apart and
`suggest` never places; the program's arrays keep their names."""

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


def test_the_files_constants_are_one_read_only_object(report):
    objs = {o["name"]: o for o in report["objects"]}
    ro = objs.get("constants .rodata")
    assert ro is not None, sorted(objs)
    assert ro["kind"] == "mapping" and ro["read_only"] is True and ro["attribution"] == "address", ro
    assert ro["share"] >= 0.2 and ro["reads"] >= 0.99, ro
    assert ro["site"].endswith("@constants"), ro  # the function that read them most
    # what was in no object before
    assert report["profile"]["outside_objects"] <= 0.02 * report["profile"]["with_address"]
    for name in ("x", "y"):
        assert objs[name]["kind"] == "heap" and objs[name]["read_only"] is False, objs[name]


def test_constants_are_set_apart_and_never_placed(profile):
    text = run_numaprof("report", profile, check=True).stdout
    assert "constants .rodata (read-only)" in text, text
    assert "(read-only): the constants of a program or library file" in text
    sug = json.loads(run_numaprof("suggest", profile, "--target", "2s", "--format", "json",
                                  check=True).stdout)
    assert "constants .rodata" not in [o["name"] for o in sug["objects"]], sug["objects"]
    assert any("read-only data" in n and "constants .rodata" in n for n in sug["notes"]), sug["notes"]
