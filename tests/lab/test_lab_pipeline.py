"""Lab tier: numaprof's own answers (`record` in the guest, `report --format json` on the
host, from the topology recorded in the guest) against the kernel's truth on 2 and 4 nodes.

Exact checks: pages per node (numa_maps at exit vs what the program saw with move_pages),
first-touch nodes, thread nodes and migrations (the program says where its threads ran).
Statistical checks, with margins: local fractions and traffic shares, from samples.
"""

import functools
import json
import re

import pytest
from helpers import run_numaprof

pytestmark = pytest.mark.lab

OMP_SPREAD = "OMP_PROC_BIND=spread OMP_PLACES=cores"
MIN_ADDRESS_SAMPLES = 20  # below this a local fraction says nothing


# Transparent huge pages would put a whole 2 MiB across two threads' blocks on one node and
# blur the known answers of the small arrays used here; the guest runs as root here.
THP_OFF = ("thp", "echo never > /sys/kernel/mm/transparent_hugepage/enabled && "
                  "cat /sys/kernel/mm/transparent_hugepage/enabled")


def _record(name: str, program: str, env: str = "", wrap: str = "") -> tuple[str, str]:
    """A guest check: record PROGRAM into NAME.data (its stdout to NAME.prog).  Reports are
    made on the host: Python is ~20x slower under TCG, and this is the documented use.
    4 kHz sampling, so that even the cheap read-only arrays get samples in a short run."""
    return (name, f"{env} {wrap} $NUMAPROF record --freq 4000 -o {name}.data -- {program} "
                  f"> {name}.prog")


@pytest.fixture(scope="session")
def pipeline2(tmp_path_factory, labkit):
    work = tmp_path_factory.mktemp("pipe2")
    labkit.build_prog("lab_place", work)
    labkit.build_prog("lab_migrate", work)
    for ex in ("serial_init", "numa_aware"):
        labkit.build_prog(ex, work, "-fopenmp", "-O2", src=labkit.ROOT / "examples" / f"{ex}.c")
    checks = [
        THP_OFF,
        _record("serial", "./serial_init 8 40", env=f"OMP_NUM_THREADS=2 {OMP_SPREAD}"),
        _record("aware", "./numa_aware 8 40", env=f"OMP_NUM_THREADS=2 {OMP_SPREAD}"),
        _record("place", "./lab_place threads 256 2 2"),
        _record("bind", "./lab_place touch 256 1 2", wrap="numactl --membind=1"),
        _record("migrate", "./lab_migrate 2 256"),
    ]
    return labkit.run_group(work, ["--preset", "2s", "--timeout", str(labkit.LAB_TIMEOUT)],
                            checks)


@pytest.fixture(scope="session")
def pipeline4(tmp_path_factory, labkit):
    work = tmp_path_factory.mktemp("pipe4")
    labkit.build_prog("numa_aware", work, "-fopenmp", "-O2",
                      src=labkit.ROOT / "examples" / "numa_aware.c")
    checks = [THP_OFF, _record("aware4", "./numa_aware 4 40", env=f"OMP_NUM_THREADS=4 {OMP_SPREAD}")]
    return labkit.run_group(work, ["--preset", "4s", "--timeout", str(labkit.LAB_TIMEOUT)],
                            checks)


@functools.cache
def _host_report(data_dir) -> dict:
    proc = run_numaprof("report", data_dir, "--format", "json", check=True)
    return json.loads(proc.stdout)


def _report(run, name):
    assert "[never]" in run.out("thp"), "transparent huge pages could not be turned off"
    run.out(name)  # the recording succeeded in the guest
    doc = _host_report(run.workdir / f"{name}.data")
    assert doc["schema"] == "numaprof.report/1"
    return doc


def _obj(doc, name):
    found = [o for o in doc["objects"] if o["name"] == name]
    assert found, f"object {name!r} not in the report: {[o['name'] for o in doc['objects']]}"
    return found[0]


def _obj_at(doc, addr: int):
    found = [o for o in doc["objects"] if int(o.get("address", "0"), 16) == addr]
    assert found, (f"no object at {addr:#x} in the report: "
                   f"{[(o['name'], o.get('address')) for o in doc['objects']]}")
    return found[0]


def _local(matrix) -> tuple[float, float]:
    total = sum(sum(r) for r in matrix)
    return (sum(matrix[i][i] for i in range(len(matrix))) / total if total else 0.0), total


def _sum(matrices):
    n = len(matrices[0])
    return [[sum(m[i][j] for m in matrices) for j in range(n)] for i in range(n)]


# ---- 2 nodes --------------------------------------------------------------------------

def test_report_sees_the_guest_topology(pipeline2):
    doc = _report(pipeline2, "serial")
    assert doc["topology"]["distances"] == [[10, 21], [21, 10]]
    assert [n["cpus"] for n in doc["topology"]["nodes"]] == [[0], [1]]


def test_master_initialised_arrays_live_on_node_0(pipeline2):
    doc = _report(pipeline2, "serial")
    for name in ("a", "b", "c"):
        o = _obj(doc, name)
        # serial_init frees its arrays before exit, so there is no numa_maps line for them
        # at exit: pages_by_node counts the pages located while it ran (move_pages).
        # lab_place's array, alive at exit, is compared page count for page count below.
        assert o["pages_by_node"][1] == 0 and o["pages_by_node"][0] > 0, (name, o)
        assert o["first_touch"]["nodes"] == [0], (name, o["first_touch"])
        assert o["first_touch"]["master_fraction"] >= 0.9, (name, o["first_touch"])


def test_master_initialised_traffic_is_half_remote(pipeline2):
    """Threads on nodes 0 and 1 stream over arrays that are all on node 0: T[1][0] > 0,
    T[*][1] = 0, local fraction near 0.5 (true 0.5; accept 0.25-0.75)."""
    doc = _report(pipeline2, "serial")
    t = _sum([_obj(doc, n)["traffic"] for n in ("a", "b", "c")])
    local, total = _local(t)
    assert total >= MIN_ADDRESS_SAMPLES, f"only {total} samples with an address: {t}"
    assert t[1][0] > 0, t
    assert t[0][1] == 0 and t[1][1] == 0, t
    assert 0.25 <= local <= 0.75, (local, t)


def test_spread_threads_are_bound_one_per_node(pipeline2):
    """OMP_PROC_BIND=spread: one bound thread per node.  The master may have run on the
    other node before libgomp bound it, so threads are placed by their main node."""
    doc = _report(pipeline2, "serial")
    busy = [th for th in doc["threads"] if th["samples"] > 0]
    assert sorted(th["node"] for th in busy) == [0, 1], doc["threads"]
    assert all(th["bound"] for th in busy), doc["threads"]


def _arrays(doc, names):
    """The named objects the report has: an array only written (numa_aware's x) can have
    no sample, as the soft backend under-represents stores (SPEC 2.2)."""
    found = [o for o in doc["objects"] if o["name"] in names]
    assert found, f"none of {names} in the report: {[o['name'] for o in doc['objects']]}"
    return found


def test_numa_aware_is_local(pipeline2):
    doc = _report(pipeline2, "aware")
    arrays = _arrays(doc, ("x", "y", "z"))
    t = _sum([o["traffic"] for o in arrays])
    local, total = _local(t)
    assert total >= MIN_ADDRESS_SAMPLES, f"only {total} samples with an address: {t}"
    assert local >= 0.8, (local, t)
    for o in arrays:
        assert sorted(o["first_touch"]["nodes"]) == [0, 1], (o["name"], o["first_touch"])


def test_pages_by_node_equals_the_kernel(pipeline2, labkit):
    """numaprof's pages_by_node (numa_maps at exit) = what move_pages told the program."""
    for check, expected in (("place", [128, 128]), ("bind", [0, 256])):
        doc = _report(pipeline2, check)
        truth = labkit.parse_lab_place((pipeline2.workdir / f"{check}.prog").read_text())
        assert labkit.counts(truth.nodes, 2) == expected, (check, truth)
        o = _obj_at(doc, truth.addr)
        assert o["pages_by_node"] == expected, (check, o["pages_by_node"])


def test_first_touch_is_on_the_node_of_the_toucher(pipeline2, labkit):
    doc = _report(pipeline2, "place")
    truth = labkit.parse_lab_place((pipeline2.workdir / "place.prog").read_text())
    assert truth.touchers == {0: 0, 1: 1}
    ft = _obj_at(doc, truth.addr)["first_touch"]
    assert ft["threads"] == 2, ft
    assert sorted(ft["nodes"]) == [0, 1], ft
    assert ft["pages"] == 256, ft


def test_migrated_thread_is_reported_bound_one_is_not(pipeline2):
    doc = _report(pipeline2, "migrate")
    prog = (pipeline2.workdir / "migrate.prog").read_text()
    tids = {m[0]: (int(m[1]), int(m[2]), int(m[3]))
            for m in re.findall(r"^thread (\w+) (\d+) (-?\d+) (-?\d+)$", prog, re.M)}
    assert tids["bound"][1:] == (0, 0) and tids["migrated"][1:] == (0, 1), prog
    threads = {th["tid"]: th for th in doc["threads"]}
    bound, migrated = threads.get(tids["bound"][0]), threads.get(tids["migrated"][0])
    assert bound and migrated, (tids, doc["threads"])
    assert bound["nodes"] == [0] and bound["migrations"] == 0, bound
    assert bound["bound"] is True, bound
    assert sorted(migrated["nodes"]) == [0, 1] and migrated["migrations"] >= 1, migrated


# ---- 4 nodes --------------------------------------------------------------------------

def test_four_node_traffic_matrix(pipeline4):
    """4 threads, one per node: a 4x4 matrix whose row i holds node i's thread's samples
    (each row non-empty and at most that thread's samples), and a NUMA-aware program
    stays local (>= 0.8).  Row shares are not compared: 4 vcpus on 2 host cores under
    TCG do not get equal time."""
    doc = _report(pipeline4, "aware4")
    t = doc["traffic"]
    assert len(t) == 4 and all(len(r) == 4 for r in t), t
    # The master thread may run elsewhere before libgomp binds it: count threads by the
    # node they ran on most ("node").
    busy = [th for th in doc["threads"] if th["samples"] > 0]
    per_node = {n: sum(th["samples"] for th in busy if th["node"] == n) for n in range(4)}
    assert all(per_node[n] > 0 for n in range(4)), doc["threads"]
    total = sum(map(sum, t))
    assert total >= 4 * MIN_ADDRESS_SAMPLES, t
    for i in range(4):
        assert 0 < sum(t[i]) <= per_node[i], (i, t, per_node)
    local, _ = _local(_sum([o["traffic"] for o in _arrays(doc, ("x", "y", "z"))]))
    assert local >= 0.8, (local, t)


@pytest.mark.xfail(reason="open bug: on the 4-node guest 3 of the 4 spread-bound worker "
                   "threads are recorded with an empty affinity (the 2-node case is right); "
                   "see the lab issue's note", strict=False)
def test_four_node_spread_threads_are_bound(pipeline4):
    """OMP_PROC_BIND=spread with 4 places binds all 4 threads, one per node."""
    doc = _report(pipeline4, "aware4")
    busy = [th for th in doc["threads"] if th["samples"] > 0]
    assert sorted(th["node"] for th in busy) == [0, 1, 2, 3], doc["threads"]
    assert all(th["bound"] for th in busy), [(th["tid"], th["affinity"], th["bound"])
                                             for th in busy]
