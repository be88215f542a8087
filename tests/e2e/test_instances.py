"""End-to-end: several objects of one class whose constructor allocates its member
(tests/progs/vectors.cpp, after miniFE's Vector).  Each vector's coefficients are
allocated at the constructor's `coefs(len)`, which names them all
`Vector<double>::coefs`; they are named after the object each caller constructs, a
delegating constructor passed over."""

import json

import pytest
from helpers import PROGS, run_numaprof

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import subprocess

    work = tmp_path_factory.mktemp("vectors")
    exe = work / "vectors"
    subprocess.run(["g++", "-O2", "-g", "-fopenmp", "-o", str(exe), str(PROGS / "vectors.cpp")],
                   check=True)
    run_numaprof("record", "-o", work / "p.data", "--", exe, "2000000", "200",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    return json.loads(run_numaprof("report", work / "p.data", "--format", "json", check=True).stdout)


def test_each_constructed_object_names_its_member(report):
    src = (PROGS / "vectors.cpp").read_text().splitlines()
    objs = {o["name"]: o for o in report["objects"]}
    for name, decl in (("x.coefs", "Vector<double> x(n);"), ("r.coefs", "Vector<double> r(n);"),
                       ("p->coefs", "Vector<double> *p = new Vector<double>(n);"),
                       ("b.coefs", "Vector<double> b(n, 1.0);")):  # through a delegating constructor
        o = objs.get(name)
        assert o is not None, sorted(objs)
        line = next(i for i, t in enumerate(src, 1) if t.strip() == decl)
        assert o["site"] == f"main@vectors.cpp:{line}", o["site"]
        assert o["kind"] == "heap" and o["size"] == 2000000 * 8, o
    assert not [n for n in objs if n.endswith("::coefs")], sorted(objs)
    # the two the loops stream through most are regular
    assert objs["p->coefs"]["pattern"] == "regular" and objs["r.coefs"]["pattern"] == "regular"
