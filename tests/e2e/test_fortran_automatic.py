"""End-to-end: a Fortran procedure's automatic arrays (tests/progs/automatic.f90, the cell
update of a transport sweep as SNAP's dim3_sweep writes it: `real(8), dimension(nang) ::
psi, pc, den` and `dimension(nang, 4) :: hv, fxhv`).  gfortran mallocs them on every
call at the line of the declaration, the column of each name; both threads call the
procedure, the first through another line of the driver.  Each is one object under its
own name: not five objects named by the site `cell_sweep@automatic.f90:13`, not one
per caller, and no frame object for the array gcc keeps in rbp.  The mask gfortran
allocates for a WHERE construct is named by its statement, one object too."""

import json
import shutil
import subprocess
from collections import Counter

import pytest
from helpers import PROGS, run_numaprof

pytestmark = pytest.mark.e2e

AUTOMATIC = {"psi", "pc", "den", "hv", "fxhv"}


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_automatic_arrays_named_once_each(tmp_path, opt):
    src = tmp_path / "automatic.f90"
    shutil.copy(PROGS / "automatic.f90", src)
    exe = tmp_path / "automatic"
    subprocess.run(["gfortran", opt, "-g", "-fopenmp", "-o", str(exe), str(src)], check=True, cwd=tmp_path)
    run_numaprof("record", "-o", tmp_path / "p.data", "--", exe, "1500", env={"OMP_NUM_THREADS": "2"},
                 check=True, cwd=tmp_path)
    doc = json.loads(run_numaprof("report", tmp_path / "p.data", "--format", "json", check=True).stdout)
    objs = doc["objects"]
    names = Counter(o["name"] for o in objs if o["name"] in AUTOMATIC)
    # hv and fxhv take most of the time: each is sampled in every run
    assert {"hv", "fxhv"} <= set(names), [(o["name"], o["site"], o["samples"]) for o in objs]
    assert all(n == 1 for n in names.values()), names
    for o in objs:
        if o["name"] in AUTOMATIC:
            assert o["kind"] == "heap" and "cell_sweep@automatic.f90:1" in o["site"], o
    unnamed = [(o["name"], o["samples"]) for o in objs if "cell_sweep@automatic.f90" in o["name"]]
    assert not unnamed, unnamed
    masks = [o for o in objs if o["name"].startswith("(temporary) ")]
    assert [o["name"] for o in masks] == ["(temporary) where (den < 0.3d0)"], \
        [(o["name"], o["site"], o["samples"]) for o in objs]
    hv = next(o for o in objs if o["name"] == "hv")
    assert hv["threads"] == 2, hv
    # where the code reads and writes it: the statements of the cell update that use hv
    # (lines 24-35), the WHERE on fxhv that writes it most
    lines = [int(a["site"].rsplit(":", 1)[1]) for a in hv["access_sites"]]
    assert lines and all(24 <= n <= 35 for n in lines), hv["access_sites"]
    assert all("cell_sweep@automatic.f90" in a["site"] for a in hv["access_sites"]), hv["access_sites"]
    assert sum(a["samples"] for a in hv["access_sites"]) >= 0.8 * hv["samples"], hv["access_sites"]


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_arrays_named_by_code_alone(tmp_path, opt):
    """No small block sampled (--small-sample 0): what names the accesses is the code.
    The WHERE masks (48 bytes, malloc'd each call) are read through the pointer malloc
    returned, in no variable: named after the statement of that call, as a sampled mask
    is.  At -O3 the dummy argument w (the caller's 384-byte array, in no tracked block) is
    read in sum(w * pc) through rcx, which gfortran passes round the cell loop through
    four frame slots, reloaded after each call: reaching definitions follow it back to
    the parameter (5 % of the samples in a recording of 2342; 1 sample before).  (With
    small blocks sampled, a sampled block of `flux`, allocated beside w, would take in w's
    samples were it not another array of the same allocate statement.)"""
    src = tmp_path / "automatic.f90"
    shutil.copy(PROGS / "automatic.f90", src)
    exe = tmp_path / "automatic"
    subprocess.run(["gfortran", opt, "-g", "-fopenmp", "-o", str(exe), str(src)], check=True,
                   cwd=tmp_path)
    run_numaprof("record", "-o", tmp_path / "p.data", "--small-sample", "0", "--", exe, "1500",
                 env={"OMP_NUM_THREADS": "2"}, check=True, cwd=tmp_path)
    objs = json.loads(run_numaprof("report", tmp_path / "p.data", "--format", "json",
                                   check=True).stdout)["objects"]
    total = sum(o["samples"] for o in objs)
    top = [(o["name"], o["samples"]) for o in objs[:12]]
    masks = [o for o in objs if o["name"] == "(temporary) where (den < 0.3d0)"]
    assert len(masks) == 1 and masks[0]["samples"] >= 0.01 * total, top
    assert masks[0]["threads"] == 2, masks
    if opt == "-O3":
        w = [o for o in objs if o["name"] == "w"]
        assert w and w[0]["samples"] >= 0.02 * total, top
        assert w[0]["threads"] == 2, w
