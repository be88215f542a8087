"""numaprof-measure and analyzer/measure.py: the measured NUMA factor (docs/measure.md).

Exact checks only: shapes, placement, parsing, caching and the factor arithmetic.  Timings
on this shared machine are noise, so no test asserts on a latency or bandwidth value
beyond "positive and finite".
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT

from numaprof.analyzer import measure as M
from numaprof.analyzer.model import Node, Topology
from numaprof.errors import NumaprofError, UsageError

SOURCE = ROOT / "collector" / "measure"


@pytest.fixture(scope="session")
def measure_exe(tmp_path_factory) -> Path:
    """numaprof-measure built standalone from collector/measure, warnings as errors."""
    build = tmp_path_factory.mktemp("measure-build")
    subprocess.run(["cmake", "-S", str(SOURCE), "-B", str(build), "-DCMAKE_C_FLAGS=-Werror"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    return build / "numaprof-measure"


def this_machine() -> Topology:
    """This machine's nodes read from sysfs, as numaprof-measure sees them."""
    nodes = []
    for d in sorted(Path("/sys/devices/system/node").glob("node[0-9]*"),
                    key=lambda p: int(p.name[4:])):
        cpus = []
        for part in (d / "cpulist").read_text().strip().split(","):
            if part:
                lo, _, hi = part.partition("-")
                cpus += range(int(lo), int(hi or lo) + 1)
        nodes.append(Node(int(d.name[4:]), tuple(cpus), 0))
    n = len(nodes)
    dist = np.full((n, n), 20.0)
    np.fill_diagonal(dist, 10.0)
    return Topology(nodes=tuple(nodes), distances=dist, source="test")


def two_nodes() -> Topology:
    return Topology(nodes=(Node(0, (0, 1), 1 << 30), Node(1, (2, 3), 1 << 30)),
                    distances=np.array([[10.0, 21.0], [21.0, 10.0]]), source="test")


def hand_measurement(lat, bw, nodes=(0, 1)) -> M.Measurement:
    n = len(nodes)
    return M.Measurement(nodes=tuple(nodes), latency_ns=np.array(lat, dtype=float),
                         bandwidth_gbs=np.array(bw, dtype=float),
                         placed_fraction=np.ones((n, n)))


# ---------------------------------------------------------------- the C program


def test_program_measures_this_machine(measure_exe):
    proc = subprocess.run([str(measure_exe), "--size-mib", "8", "--reps", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    topo = this_machine()
    n = topo.n_nodes
    assert data["nodes"] == [nd.id for nd in topo.nodes]
    assert data["errors"] == []
    for name in ("latency_ns", "bandwidth_gbs", "placed_fraction"):
        assert np.array(data[name], dtype=float).shape == (n, n), name
    lat = np.array(data["latency_ns"], dtype=float)
    bw = np.array(data["bandwidth_gbs"], dtype=float)
    assert np.isfinite(lat).all() and (lat > 0).all()
    assert np.isfinite(bw).all() and (bw > 0).all()
    # mbind before the first touch: every sampled page is on the memory node.
    assert np.array(data["placed_fraction"], dtype=float).tolist() == np.ones((n, n)).tolist()
    s = data["settings"]
    assert s["size_mib"] == 8 and s["reps"] == 1
    assert s["threads"] == [len(nd.cpus) for nd in topo.nodes]
    assert s["binding"] == "mbind MPOL_BIND"


def test_program_options(measure_exe):
    proc = subprocess.run([str(measure_exe), "--size-mib", "4", "--reps", "2", "--threads", "1",
                           "--no-hugepages", "--seed", "7"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)["settings"]
    assert s["threads"] == [1] * this_machine().n_nodes
    assert s["hugepages"] is False and s["seed"] == 7 and s["reps"] == 2


@pytest.mark.parametrize("args", [["--size-mib", "0"], ["--reps", "x"], ["--bogus"], ["extra"]])
def test_program_refuses_bad_arguments(measure_exe, args):
    proc = subprocess.run([str(measure_exe), *args], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "usage: numaprof-measure" in proc.stderr


def fake_sysfs(root: Path, nodes: dict[int, tuple[str, int]]) -> Path:
    for nid, (cpulist, mem_kb) in nodes.items():
        d = root / "sys" / "devices" / "system" / "node" / f"node{nid}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpulist + "\n")
        (d / "meminfo").write_text(f"Node {nid} MemTotal:       {mem_kb} kB\n"
                                   f"Node {nid} MemFree:        {mem_kb // 2} kB\n")
    return root


def test_program_reports_a_node_it_cannot_bind(measure_exe, tmp_path):
    # A second node that this kernel does not have: mbind to it must fail, be reported in
    # "errors" with a non-zero exit, and leave nulls; a memory-less third node gives nulls
    # and no error.
    real = this_machine()
    cpus = ",".join(map(str, real.nodes[0].cpus))
    missing = max(nd.id for nd in real.nodes) + 1
    root = fake_sysfs(tmp_path, {0: (cpus, 1 << 20), missing: (cpus, 1 << 20),
                                 missing + 1: ("", 0)})
    proc = subprocess.run([str(measure_exe), "--size-mib", "2", "--reps", "1"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NUMAPROF_SYSROOT": str(root)})
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["nodes"] == [0, missing, missing + 1]
    lat = data["latency_ns"]
    assert lat[0][0] > 0 and lat[1][0] > 0
    assert lat[0][1] is None and lat[1][1] is None
    assert all(x is None for x in lat[2]) and all(row[2] is None for row in lat)
    assert len(data["errors"]) == 2
    assert all(f"memory node {missing}: mbind" in e for e in data["errors"])


# ---------------------------------------------------------------- parsing


def test_parse_output_reads_the_program_json():
    text = json.dumps({"version": 1, "nodes": [0, 1], "node_cpus": [[0], [1]],
                       "latency_ns": [[100, 150], [None, 100]],
                       "bandwidth_gbs": [[10, 5], [4, 8]],
                       "placed_fraction": [[1, 1], [None, 1]],
                       "settings": {"size_mib": 8}, "errors": []})
    m = M.parse_output(text)
    assert m.nodes == (0, 1)
    assert m.node_cpus == ((0,), (1,))
    assert np.isnan(m.latency_ns[1, 0]) and m.latency_ns[0, 1] == 150
    assert m.settings == {"size_mib": 8}
    assert m.created  # stamped when parsed


@pytest.mark.parametrize("text", [
    "", "not json", "[]", json.dumps({"version": 2, "nodes": [0]}),
    json.dumps({"version": 1, "nodes": [0, 1], "latency_ns": [[1, 2]], "bandwidth_gbs": [[1, 2]]}),
    json.dumps({"version": 1, "nodes": [0], "latency_ns": [[-3]], "bandwidth_gbs": [[1]]}),
    json.dumps({"version": 1, "nodes": [0, 0], "latency_ns": [[1, 1], [1, 1]],
                "bandwidth_gbs": [[1, 1], [1, 1]]}),
])
def test_parse_output_refuses_garbage(text):
    with pytest.raises(NumaprofError, match="unreadable output"):
        M.parse_output(text)


# ---------------------------------------------------------------- factors


def test_factors_of_a_two_node_measurement():
    m = hand_measurement([[100, 150], [150, 100]], [[20, 10], [8, 16]])
    assert m.latency_factor.tolist() == [[1.0, 1.5], [1.5, 1.0]]
    assert m.bandwidth_factor.tolist() == [[1.0, 2.0], [2.0, 1.0]]


def test_factor_rows_use_their_own_local_latency():
    m = hand_measurement([[80, 120], [200, 100]], [[10, 10], [10, 10]])
    assert m.latency_factor.tolist() == [[1.0, 1.5], [2.0, 1.0]]


def test_apply_measured_replaces_the_numa_factor_and_keeps_the_slit():
    topo = two_nodes()
    assert topo.numa_factor().tolist() == [[1.0, 2.1], [2.1, 1.0]]
    t = M.apply_measured(topo, hand_measurement([[100, 150], [150, 100]], [[1, 1], [1, 1]]))
    assert t.numa_factor().tolist() == [[1.0, 1.5], [1.5, 1.0]]
    assert t.slit_factor().tolist() == [[1.0, 2.1], [2.1, 1.0]]
    assert t.distances.tolist() == topo.distances.tolist()
    assert topo.measured_factor is None  # the input is untouched


def test_apply_measured_follows_node_ids_and_falls_back_to_slit():
    topo = two_nodes()
    # Measurement listed in the other node order, with one unmeasurable pair.
    m = hand_measurement([[100, 130], [np.nan, 100]], [[1, 1], [1, 1]], nodes=(1, 0))
    t = M.apply_measured(topo, m)
    # measured row "1" is topology row 1: 1→0 is 130/100; 0→1 was not measured → SLIT 2.1.
    assert t.numa_factor().tolist() == [[1.0, 2.1], [1.3, 1.0]]


def test_apply_measured_refuses_another_machine():
    with pytest.raises(NumaprofError, match="nodes"):
        M.apply_measured(two_nodes(), hand_measurement([[100]], [[1]], nodes=(0,)))


# ---------------------------------------------------------------- caching


@pytest.fixture
def xdg(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("NUMAPROF_SYSROOT", raising=False)
    return tmp_path / "cache"


def test_cache_round_trip(xdg):
    topo = two_nodes()
    assert M.load_cached(topo) is None
    m = hand_measurement([[100, 150], [150, np.nan]], [[20, 10], [8, 16]])
    path = M.save_cached(topo, m)
    assert path.parent == xdg / "numaprof"
    assert path.name == f"measure-{M.machine_key(topo)}.json"
    got = M.load_cached(topo)
    assert got is not None
    assert got.nodes == m.nodes
    np.testing.assert_array_equal(got.latency_ns, m.latency_ns)  # NaN survives as null
    np.testing.assert_array_equal(got.bandwidth_gbs, m.bandwidth_gbs)


def test_cache_is_per_machine_layout(xdg):
    M.save_cached(two_nodes(), hand_measurement([[100, 150], [150, 100]], [[1, 1], [1, 1]]))
    other = Topology(nodes=(Node(0, (0, 1, 2, 3), 1 << 30),), distances=np.array([[10.0]]))
    assert M.load_cached(other) is None


def test_corrupt_cache_is_ignored(xdg):
    topo = two_nodes()
    path = M.cache_path(topo)
    path.parent.mkdir(parents=True)
    path.write_text("{ truncated")
    assert M.load_cached(topo) is None


def test_machine_key_follows_sysfs_and_hostname(tmp_path):
    topo = two_nodes()
    a = fake_sysfs(tmp_path / "a", {0: ("0-1", 1000), 1: ("2-3", 1000)})
    b = fake_sysfs(tmp_path / "b", {0: ("0-1", 1000), 1: ("2-3", 2000)})
    c = fake_sysfs(tmp_path / "c", {0: ("0-1", 1000), 1: ("2-3", 1000)})
    key = M.machine_key(topo, sysroot=str(a), hostname="h1")
    assert key.startswith("h1-")
    assert key == M.machine_key(topo, sysroot=str(c), hostname="h1")
    assert key != M.machine_key(topo, sysroot=str(b), hostname="h1")
    assert key != M.machine_key(topo, sysroot=str(a), hostname="h2")
    assert "/" not in M.machine_key(topo, sysroot=str(a), hostname="a/b")


def test_measure_runs_parses_and_caches(measure_exe, xdg):
    topo = this_machine()
    m = M.measure(topo, size_mib=4, reps=1, executable=measure_exe)
    n = topo.n_nodes
    assert m.latency_ns.shape == (n, n) and (m.latency_ns > 0).all()
    assert m.bandwidth_gbs.shape == (n, n) and (m.bandwidth_gbs > 0).all()
    assert np.allclose(np.diag(m.latency_factor), 1.0)
    cached = M.load_cached(topo)
    assert cached is not None
    np.testing.assert_array_equal(cached.latency_ns, m.latency_ns)
    assert cached.settings["size_mib"] == 4
    t = M.apply_measured(topo, cached)
    assert t.numa_factor().shape == (n, n)


def test_measure_checks_its_arguments_and_the_executable(measure_exe, xdg, tmp_path):
    with pytest.raises(UsageError):
        M.measure(this_machine(), size_mib=0, executable=measure_exe)
    with pytest.raises(UsageError):
        M.measure(this_machine(), reps=0, executable=measure_exe)
    with pytest.raises(NumaprofError, match="cannot run"):
        M.measure(this_machine(), executable=tmp_path / "nothing-here")
    # The program measured different nodes than the topology names: refused, not cached.
    elsewhere = Topology(nodes=(Node(70, (0,), 1 << 30), Node(71, (1,), 1 << 30)),
                         distances=np.array([[10.0, 20.0], [20.0, 10.0]]))
    with pytest.raises(NumaprofError, match="topology has"):
        M.measure(elsewhere, size_mib=2, reps=1, executable=measure_exe)
    assert M.load_cached(elsewhere) is None


def test_measure_runs_a_relative_executable(measure_exe, xdg, tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    os.symlink(measure_exe, tmp_path / "bin" / "numaprof-measure")
    monkeypatch.chdir(tmp_path / "bin")
    m = M.measure(this_machine(), size_mib=2, reps=1, executable="./numaprof-measure")
    assert m.latency_ns.shape == (this_machine().n_nodes,) * 2


def test_program_refuses_a_buffer_larger_than_the_free_memory(measure_exe, tmp_path):
    # MPOL_BIND would not spill to another node: the OOM killer, not an error, would follow.
    cpus = ",".join(map(str, this_machine().nodes[0].cpus))
    node = tmp_path / "sys" / "devices" / "system" / "node" / "node0"
    node.mkdir(parents=True)
    (node / "cpulist").write_text(cpus + "\n")
    (node / "meminfo").write_text("Node 0 MemTotal:  1048576 kB\nNode 0 MemFree:  3072 kB\n")
    env = {**os.environ, "NUMAPROF_SYSROOT": str(tmp_path)}
    proc = subprocess.run([str(measure_exe), "--size-mib", "4", "--reps", "1"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["latency_ns"] == [[None]]
    assert data["errors"] == ["cpu node 0, memory node 0: 4 MiB do not fit in the node's 3 MiB "
                              "of free memory (use --size-mib)"]
    proc = subprocess.run([str(measure_exe), "--size-mib", "2", "--reps", "1"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout
