"""Lab tier: the whole loop on a 2-node guest — record the master-initialised example,
`suggest --apply` its patches, rebuild with `numaprof config --cflags`, record again, and
compare with `report --diff`: the pages spread as predicted and the measured local
fraction is within ±0.15 of the prediction (issues: recommender depth, reports)."""

import json
import shutil
import subprocess

import pytest
from helpers import EXAMPLES, run_numaprof

pytestmark = pytest.mark.lab

OMP = "OMP_NUM_THREADS=2 OMP_PROC_BIND=spread OMP_PLACES=cores"
THP_OFF = ("thp", "echo never > /sys/kernel/mm/transparent_hugepage/enabled")
ARGS = "8 40"


def _build(work, extra=()):
    subprocess.run(["gcc", "-O2", "-g", "-fopenmp", *extra, "-o", str(work / "serial_init"),
                    str(work / "serial_init.c")], check=True)


def _record(name):
    return (name, f"{OMP} $NUMAPROF record --freq 4000 -o {name}.data -- ./serial_init {ARGS}")


@pytest.fixture(scope="module")
def loop(tmp_path_factory, labkit):
    work = tmp_path_factory.mktemp("fixloop")
    shutil.copy(EXAMPLES / "serial_init.c", work / "serial_init.c")
    _build(work)
    lab = ["--preset", "2s", "--timeout", str(labkit.LAB_TIMEOUT)]
    before = labkit.run_group(work, lab, [THP_OFF, _record("before")])
    before.out("before")
    sug = json.loads(run_numaprof("suggest", work / "before.data", "--format", "json",
                                  cwd=work, check=True).stdout)
    applied = run_numaprof("suggest", work / "before.data", "--apply", cwd=work)
    assert applied.returncode == 0, applied.stderr
    cflags = run_numaprof("config", "--cflags", check=True).stdout.split()
    _build(work, cflags)
    after = labkit.run_group(work, lab, [THP_OFF, _record("after")])
    after.out("after")
    diff = json.loads(run_numaprof("report", "--diff", work / "before.data", work / "after.data",
                                   "--format", "json", cwd=work, check=True).stdout)
    return work, sug, diff


def test_patch_was_applied(loop):
    work, sug, _ = loop
    text = (work / "serial_init.c").read_text()
    assert "numaprof_place" in text or "#pragma omp parallel for" in text.split("int main")[1]
    assert any(o["patch"] for o in sug["objects"])


def test_local_fraction_rises_and_matches_the_prediction(loop):
    _, sug, diff = loop
    predicted = {o["name"]: o["predicted"]["local_fraction"] for o in sug["objects"]}
    checked = 0
    for o in diff["objects"]:
        b, a = o["before"], o["after"]
        if o["name"] not in predicted or not b or not a or a["samples"] < 50:
            continue
        assert a["local_fraction"] > b["local_fraction"], o
        assert abs(a["local_fraction"] - predicted[o["name"]]) <= 0.15, (o, predicted)
        checked += 1
    # under TCG the samples of a loop land on its first instruction (docs/lab.md): in
    # `a[j] = b[j] + c[j] * s` that is the load of c, so c is the array decided on enough
    # samples and a and b may have few or none
    assert checked >= 1, diff
    assert diff["after"]["local_fraction"] > diff["before"]["local_fraction"]


def test_pages_spread_over_both_nodes(loop):
    _, _, diff = loop
    checked = 0
    for o in diff["objects"]:
        if o["name"] in ("a", "b", "c") and o["after"] and o["before"]:
            before, after = o["before"]["pages_by_node"], o["after"]["pages_by_node"]
            if sum(after) < 32:  # pages located from samples: too few to judge a split
                continue
            assert before[1] < 0.1 * sum(before), o
            assert min(after) > 0.25 * sum(after), o
            checked += 1
    assert checked >= 1, diff


def test_text_diff_shows_the_change(loop):
    work, _, _ = loop
    out = run_numaprof("report", "--diff", work / "before.data", work / "after.data",
                       check=True).stdout
    assert "local" in out and "->" in out
