"""A Fortran program written the way such codes are (tests/progs/derived_fields.f90): a
derived type's allocatable components allocated in a procedure of a module named
`mesh_mod` and initialised by whole-array assignments, which gfortran -O2 turns into
memset calls whose page faults name no line of the program.  Recorded, each component is
named `f%u`, `f%rhs`, `f%unew`, first-touched by one thread; `suggest` parallelises each
initialisation with `!$omp parallel workshare`, and the patched file compiles."""

import json
import shutil
import subprocess

import pytest
from helpers import PROGS, run_numaprof

pytestmark = pytest.mark.e2e


@pytest.mark.skipif(shutil.which("gfortran") is None, reason="gfortran not installed")
def test_components_are_named_and_their_initialisation_parallelised(tmp_path):
    src = tmp_path / "derived_fields.f90"
    shutil.copy(PROGS / "derived_fields.f90", src)
    subprocess.run(["gfortran", "-O2", "-g", "-fopenmp", "-o", "dt", src.name], cwd=tmp_path,
                   check=True)
    run_numaprof("record", "-o", "d.data", "--freq", "4000", "--", "./dt", "900", "240",
                 cwd=tmp_path, env={"OMP_NUM_THREADS": "2"}, check=True)
    rep = json.loads(run_numaprof("report", "d.data", "--format", "json", cwd=tmp_path,
                                  check=True).stdout)
    by = {o["name"]: o for o in rep["objects"]}
    assert {"f%u", "f%rhs", "f%unew"} <= set(by), sorted(by)
    assert by["f%u"]["first_touch"]["serial"], by["f%u"]["first_touch"]
    sug = json.loads(run_numaprof("suggest", "d.data", "--target", "2s", "--format", "json",
                                  cwd=tmp_path, check=True).stdout)
    fixes = {o["name"]: o for o in sug["objects"] if o["name"] in ("f%u", "f%rhs", "f%unew")}
    patched = [n for n, o in fixes.items() if "!$omp parallel workshare" in (o.get("patch") or "")]
    # f%u is first touched inside memset: the statement is found by source; every
    # component given parallel_init is patched (f%rhs, with the fewest samples, is under
    # the 2 % that make an object hot in 2 recordings of 5)
    assert "f%u" in patched, {n: o["fix"] for n, o in fixes.items()}
    assert all(n in patched for n, o in fixes.items() if o["policy"] == "parallel_init"), fixes
    applied = run_numaprof("suggest", "d.data", "--target", "2s", "--apply", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    text = src.read_text()
    assert text.count("!$omp parallel workshare") == text.count("!$omp end parallel workshare") \
        == len(patched)
    subprocess.run(["gfortran", "-O2", "-fopenmp", "-o", "dt2", src.name], cwd=tmp_path, check=True)
    want = subprocess.run(["./dt", "200", "3"], cwd=tmp_path, capture_output=True, text=True)
    got = subprocess.run(["./dt2", "200", "3"], cwd=tmp_path, capture_output=True, text=True,
                         env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"})
    assert got.returncode == 0 and got.stdout == want.stdout


@pytest.mark.skipif(shutil.which("gfortran") is None, reason="gfortran not installed")
def test_an_elements_components_allocated_level_by_level(tmp_path):
    """tests/progs/level_fields.f90: `level(l)%t`, `%tnew`, `%k`, one array per level,
    allocated and zeroed in a loop over the levels (memset, no line of the program).
    Each is one object with an instance per level; `suggest` wraps each zeroing in the
    loop body in WORKSHARE (before: refused, "no source line to patch"), the patched
    file builds, and the program prints what it printed."""
    src = tmp_path / "level_fields.f90"
    shutil.copy(PROGS / "level_fields.f90", src)
    subprocess.run(["gfortran", "-O2", "-g", "-fopenmp", "-o", "lf", src.name], cwd=tmp_path, check=True)
    run_numaprof("record", "-o", "l.data", "--", "./lf", "768", "20", cwd=tmp_path,
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    rep = json.loads(run_numaprof("report", "l.data", "--format", "json", cwd=tmp_path, check=True).stdout)
    by = {o["name"]: o for o in rep["objects"]}
    names = {"level(l)%t", "level(l)%tnew", "level(l)%k"}
    assert names <= set(by), sorted(by)
    assert all(by[n]["count"] == 3 and by[n]["first_touch"]["serial"] for n in names), \
        {n: (by[n]["count"], by[n]["first_touch"]) for n in names}
    sug = json.loads(run_numaprof("suggest", "l.data", "--target", "2s", "--format", "json",
                                  cwd=tmp_path, check=True).stdout)
    fixes = {o["name"]: o for o in sug["objects"] if o["name"] in names}
    init = [n for n, o in fixes.items() if o["policy"] == "parallel_init"]
    assert init, {n: o["policy"] for n, o in fixes.items()}
    assert all("!$omp parallel workshare" in (fixes[n].get("patch") or "") for n in init), \
        {n: fixes[n].get("fix") for n in init}
    loops = src.read_text().lower().count("!$omp parallel do")
    applied = run_numaprof("suggest", "l.data", "--target", "2s", "--apply", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    text = src.read_text()
    # the zeroings, not the loop over the levels around them
    assert text.count("!$omp parallel workshare") == len(init) and text.lower().count("!$omp parallel do") == loops
    subprocess.run(["gfortran", "-O2", "-fopenmp", "-o", "lf2", src.name], cwd=tmp_path, check=True)
    want = subprocess.run(["./lf", "200", "3"], cwd=tmp_path, capture_output=True, text=True)
    got = subprocess.run(["./lf2", "200", "3"], cwd=tmp_path, capture_output=True, text=True,
                         env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"})
    assert got.returncode == 0 and got.stdout == want.stdout
