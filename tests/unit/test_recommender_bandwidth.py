"""The recommender's bandwidth side (docs/recommender.md: weighted_interleave, "bandwidth
pressure where counters give it"): node counters weight contention by how
bandwidth-bound the run was, and targets whose nodes differ in bandwidth get
weighted_interleave with weights proportional to it.

Synthetic analyses are built as in test_recommender_choose.py; node counters are
produced by the two-kind-of-time model the cost model states (streaming at the memory
controllers vs everything else), run forward here from a known streaming share.
"""

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import profgen
import pytest
from helpers import DATA, ROOT, run_numaprof
from profgen import Array
from synth_analysis import BIG, access_random, analysis, obj, threads

from numaprof.analyzer import measure as M
from numaprof.analyzer.model import Node, NodeCounters, Topology
from numaprof.analyzer.profile import open_profile
from numaprof.recommender import emit, suggest
from numaprof.recommender.cost import SATURATED, bandwidth_pressure
from numaprof.recommender.policies import MAX_WEIGHT, bandwidth_weights, node_of_page
from numaprof.recommender.targets import (
    BANDWIDTH_DIFFERS,
    PRESETS,
    hwloc_node_bandwidth,
    relative_bandwidth,
    resolve_target,
)

DIFFERENT = DATA / "hwloc-2n-bandwidth.xml"  # Bandwidth 30000 / 10000 MiB/s (local initiators)
EQUAL = DATA / "hwloc-2n-equal-bandwidth.xml"  # 20000 / 20800 MiB/s: within 10 %
MIB_S = (1 << 20) / 1e9  # GB/s per MiB/s
PEAK = 20.0  # GB/s, each node's measured local triad bandwidth in the counters below


def recorded_2n(cpus_per_node=4):
    c = cpus_per_node
    return Topology(nodes=(Node(0, tuple(range(c)), 8 << 30), Node(1, tuple(range(c, 2 * c)), 8 << 30)),
                    distances=np.array([[10.0, 21.0], [21.0, 10.0]]), source="test")


def counters_from_model(t_stream: float, t_other: float, busy_share: float, n_nodes=2,
                        peak=PEAK) -> list[NodeCounters]:
    """Node counters of a run made of ``t_other`` seconds that do not depend on the memory
    controllers plus streaming that would take ``t_stream`` seconds spread evenly over the
    nodes at the attainable rate (SATURATED x peak); ``busy_share`` of the bytes go to
    node 0, the rest evenly to the others, and the busiest node paces the streaming."""
    shares = np.full(n_nodes, (1 - busy_share) / (n_nodes - 1))
    shares[0] = busy_share
    attainable = SATURATED * peak * 1e9  # bytes/s
    total = t_stream * n_nodes * attainable
    t_run = t_other + total * shares.max() / attainable
    return [NodeCounters(node=i, seconds=t_run, dram_bytes=total * sh,
                         bandwidth_gbs=total * sh / t_run / 1e9, peak_gbs=peak)
            for i, sh in enumerate(shares)]


# --- bandwidth pressure: the formula against the model it is derived from ---------------

@pytest.mark.parametrize("t_stream,t_other,busy", [
    (1.0, 0.0, 1.0),    # master-initialised, streaming all the time: saturated
    (1.0, 3.0, 1.0),    # streaming a quarter of a balanced run
    (0.2, 9.8, 1.0),    # mostly compute: a few % of the peak
    (1.0, 1.0, 0.5),    # balanced placement, half the time streaming
    (0.5, 2.0, 0.7),
])
def test_pressure_is_the_streaming_share_of_a_contention_free_run(t_stream, t_other, busy):
    cs = counters_from_model(t_stream, t_other, busy)
    pr = bandwidth_pressure(cs, recorded_2n(), active=[0, 1])
    assert pr is not None
    assert pr.beta == pytest.approx(t_stream / (t_stream + t_other), rel=1e-9)
    assert pr.busiest_node == 0
    assert pr.busiest_share == pytest.approx(cs[0].bandwidth_gbs / PEAK)


def test_low_utilisation_gives_low_pressure_and_saturation_full_pressure():
    low = [NodeCounters(0, 1.0, 2e9, 2.0, PEAK), NodeCounters(1, 1.0, 0.0, 0.0, PEAK)]
    pr = bandwidth_pressure(low, recorded_2n(), [0, 1])
    assert pr.busiest_share == pytest.approx(0.10)
    assert pr.beta < 0.1  # one node at 10 % of its peak: a busy node barely matters
    sat = [NodeCounters(0, 1.0, 18e9, 18.0, PEAK), NodeCounters(1, 1.0, 5e8, 0.5, PEAK)]
    assert bandwidth_pressure(sat, recorded_2n(), [0, 1]).beta == pytest.approx(1.0)


def test_pressure_needs_every_node_bandwidth_and_the_peaks_in_use():
    topo = recorded_2n()
    full = [NodeCounters(0, 1.0, 2e9, 2.0, PEAK), NodeCounters(1, 1.0, 1e9, 1.0, PEAK)]
    assert bandwidth_pressure(full, topo, [0, 1]) is not None
    no_bw = [full[0], NodeCounters(1, 1.0, numastat={"numa_hit": 10})]  # numastat only (VM)
    assert bandwidth_pressure(no_bw, topo, [0, 1]) is None
    no_peak = [full[0], dataclasses.replace(full[1], peak_gbs=None)]
    assert bandwidth_pressure(no_peak, topo, [0, 1]) is None
    assert bandwidth_pressure([], topo, [0, 1]) is None
    one = Topology(nodes=(Node(0, (0, 1), 8 << 30),), distances=np.array([[10.0]]))
    assert bandwidth_pressure(full[:1], one, [0]) is None


# --- the choice: latency-optimal at low pressure, load-balancing at saturation -----------

def uneven_gather():
    """Three threads on node 0, one on node 1 (bound), all gathering one master-initialised
    array: keeping the pages on node 0 is the latency optimum (3/4 of the accesses local)
    but loads node 0 with everything; balancing the pages costs remote accesses."""
    t = 4
    return analysis([obj("lookup", "random", access_random(BIG, t), serial=True, n_threads=t,
                         share=0.6)], threads(t, nodes=[0, 0, 0, 1], bound=True), topo=recorded_2n())


def test_without_counters_the_scores_are_the_bandwidth_bound_model_exactly():
    s = suggest(uneven_gather())
    assert s.pressure is None
    for row in s.objects[0].alternatives:
        assert row.score == row.latency * row.contention
    assert not any("node counters" in n for n in s.notes)


def test_counters_move_the_choice_between_latency_and_load_balance():
    an = uneven_gather()
    base = suggest(an).objects[0]  # no counters: fully bandwidth-bound
    rows = {a.policy: a for a in base.alternatives}
    latency_opt = min(base.alternatives, key=lambda a: a.latency)
    # an honest trade-off: the bandwidth-bound choice gives up locality for balance
    assert base.predicted.latency > latency_opt.latency * 1.05
    assert base.predicted.contention < rows["first_touch"].contention - 0.2
    assert latency_opt.contention > 1.2

    an.node_counters = counters_from_model(0.2, 9.8, busy_share=1.0)  # ~5 % of node 0's peak
    low = suggest(an)
    o = low.objects[0]
    assert low.pressure.beta == pytest.approx(0.02, rel=1e-6)
    assert o.predicted.latency == pytest.approx(latency_opt.latency)
    assert o.policy == "first_touch" and o.change == "none"  # the master's node: no change
    assert f"a fully bandwidth-bound run would get {base.policy} instead" in o.reason
    assert any("contention weighs 0.02 in the scores" in n for n in low.notes)
    for row in o.alternatives:
        assert row.score == pytest.approx(row.latency * (1 + 0.02 * (row.contention - 1)))

    an.node_counters = counters_from_model(1.0, 0.0, busy_share=1.0)  # node 0 saturated
    sat = suggest(an)
    o = sat.objects[0]
    assert sat.pressure.beta == pytest.approx(1.0)
    assert sat.pressure.busiest_share == pytest.approx(SATURATED)
    assert o.policy == base.policy
    assert "the same at the measured bandwidth pressure 1.00" in o.reason
    assert [a.score for a in o.alternatives] == pytest.approx([a.score for a in base.alternatives])


def test_counters_of_the_recorded_machine_do_not_apply_to_another_target():
    an = uneven_gather()
    plain = suggest(an, resolve_target("4s", an.topology))
    an.node_counters = counters_from_model(0.2, 9.8, busy_share=1.0)
    s = suggest(an, resolve_target("4s", an.topology))
    assert s.pressure is None
    assert [a.score for a in s.objects[0].alternatives] == [a.score for a in plain.objects[0].alternatives]
    assert any("says nothing about this target" in n for n in s.notes)


# --- node bandwidths on targets ------------------------------------------------------

def test_hwloc_memattr_bandwidth_is_read_per_node_from_local_initiators():
    topo = resolve_target(str(DIFFERENT), recorded_2n())
    # node 1 also has a value from node 0's core (8000 MiB/s): the local one counts
    assert topo.node_bandwidth == pytest.approx([30000 * MIB_S, 10000 * MIB_S])
    eq = resolve_target(str(EQUAL), recorded_2n())  # cpuset initiators
    assert eq.node_bandwidth == pytest.approx([20000 * MIB_S, 20800 * MIB_S])


def test_hwloc_without_memattrs_has_no_bandwidth(tmp_path):
    tree = ET.parse(DIFFERENT)
    root = tree.getroot()
    for m in list(root.findall("memattr")):
        root.remove(m)
    path = tmp_path / "plain.xml"
    tree.write(path)
    topo = resolve_target(str(path), recorded_2n())
    assert topo.node_bandwidth is None
    assert hwloc_node_bandwidth(path, topo) is None


def test_apply_measured_takes_the_local_triad_bandwidth_in_topology_order():
    topo = Topology(nodes=(Node(1, (2, 3), 8 << 30), Node(0, (0, 1), 8 << 30)),
                    distances=np.array([[10.0, 21.0], [21.0, 10.0]]))
    m = M.Measurement(nodes=(0, 1), latency_ns=np.array([[100.0, 200.0], [200.0, 100.0]]),
                      bandwidth_gbs=np.array([[30.0, 9.0], [8.0, np.nan]]),
                      placed_fraction=np.ones((2, 2)))
    t = M.apply_measured(topo, m)
    assert np.isnan(t.node_bandwidth[0]) and t.node_bandwidth[1] == 30.0
    assert topo.node_bandwidth is None  # the input is untouched


def test_relative_bandwidth_only_when_the_nodes_in_use_differ():
    topo = recorded_2n()
    assert relative_bandwidth(topo, [0, 1]) is None  # unknown
    same = dataclasses.replace(topo, node_bandwidth=np.array([20.0, 20.0 * BANDWIDTH_DIFFERS]))
    assert relative_bandwidth(same, [0, 1]) is None
    diff = dataclasses.replace(topo, node_bandwidth=np.array([30.0, 10.0]))
    assert relative_bandwidth(diff, [0, 1]) == pytest.approx([1.5, 0.5])
    assert relative_bandwidth(diff, [0]) is None  # one node in use: nothing to weigh


def test_bandwidth_weights_are_small_and_proportional():
    assert bandwidth_weights([30.0, 10.0]) == [3, 1]
    assert bandwidth_weights([20.0, 12.0]) == [5, 3]
    assert bandwidth_weights([20.0, 20.0]) == [1, 1]
    rng = np.random.default_rng(7)
    for _ in range(200):
        bw = rng.uniform(5, 100, rng.integers(2, 9))
        w = np.array(bandwidth_weights(bw))
        assert (w >= 1).all() and np.gcd.reduce(w) == 1
        assert w.max() <= MAX_WEIGHT
        err = np.abs(w / w.sum() - bw / bw.sum()) / (bw / bw.sum())
        if err.max() > 0.05:
            # no W up to MAX_WEIGHT met 5 %: then each weight is its bandwidth on the
            # largest weight's scale, rounded (within half a unit)
            off = np.abs(w / w.max() - bw / bw.max()) * w.max()
            assert ((off <= 0.5 + 1e-9) | (w == 1)).all(), (bw, w)


# --- weighted_interleave as a candidate --------------------------------------------------

def spread_gather(t=4):
    return analysis([obj("lookup", "random", access_random(BIG, t), serial=False, n_threads=t,
                         share=0.6)], threads(t))


def test_weighted_interleave_on_nodes_of_different_bandwidth():
    an = spread_gather()
    s = suggest(an, resolve_target(str(DIFFERENT), an.topology))
    o = s.objects[0]
    assert s.weights == [3, 1] and s.weighted_nodes == [0, 1]
    assert o.policy == "weighted_interleave" and o.change == "patch"
    assert o.weighted_nodes == [0, 1] and o.weights == [3, 1]  # what the patch writes
    # pages (and so the gathered load) in proportion 3:1 to the nodes
    load = o.predicted.traffic.sum(axis=0) / o.predicted.traffic.sum()
    assert load == pytest.approx([0.75, 0.25], abs=0.02)
    # each node's load over its bandwidth is even: no contention left; equal interleave
    # keeps the slow node busy three times as long as the fast one
    assert o.predicted.contention == pytest.approx(1.0, abs=0.05)
    cyc = o.alternative("cyclic")
    assert cyc.contention > 1.8 and cyc.score > 1.5 * o.predicted.score
    assert "weights 3:1 for nodes 0, 1" in o.reason
    stmt = emit.weighted_place_statement("ptr", "bytes", [0, 1], [3, 1])
    assert any(stmt in n and "suggest --apply" in n for n in s.notes), s.notes
    assert any("numactl --weighted-interleave=0,1 ./app -n 10" in n and "2.0.16" in n for n in s.notes)
    assert not any("--weighted-interleave" in c for c in s.commands)  # not a line to paste


@pytest.mark.parametrize("target", [str(EQUAL), *PRESETS])
def test_no_weighted_interleave_on_equal_or_unknown_bandwidths(target):
    an = spread_gather()
    s = suggest(an, resolve_target(target, an.topology))
    assert s.weights == []
    assert all(a.policy != "weighted_interleave" for o in s.objects for a in o.alternatives)


def test_equal_bandwidth_target_scores_like_one_without_bandwidths(tmp_path):
    an = spread_gather()
    eq = resolve_target(str(EQUAL), an.topology)
    assert eq.node_bandwidth is not None
    a = suggest(an, eq).objects[0]
    b = suggest(an, dataclasses.replace(eq, node_bandwidth=None)).objects[0]
    assert a.policy == b.policy
    assert [r.score for r in a.alternatives] == [r.score for r in b.alternatives]


CC = shutil.which("cc") or shutil.which("gcc")


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_emitted_runtime_call_compiles_and_gives_the_weighted_map(tmp_path):
    # The emitted statement, verbatim, with numaprof_place_weighted replaced by a probe
    # that prints the runtime's map for the nodes and weights the statement passes.
    call = emit.weighted_place_call("lookup", 40 * 4096, [0, 2, 3], [5, 3, 1])
    src = tmp_path / "probe.c"
    src.write_text(f"""
#include <numaprof_place.h>
#include <stdio.h>
static int probe(void *p, size_t bytes, const int *nodes, const unsigned *weights, int m)
{{
    size_t n = bytes / 4096;
    struct numaprof_place_opts o;
    (void)p;
    memset(&o, 0, sizeof o);
    o.nodes = nodes;
    o.n_nodes = m;
    o.weights = weights;
    for (size_t i = 0; i < n; i++)
        printf("%d\\n", numaprof_node_of_page(NUMAPROF_WEIGHTED_INTERLEAVE, i, n, &o));
    return 0;
}}
#define numaprof_place_weighted probe
int main(void)
{{
    char lookup_storage[1];
    void *lookup = lookup_storage;
    {call}
    return 0;
}}
""")
    exe = tmp_path / "probe"
    subprocess.run([CC, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
                    f"-I{ROOT / 'collector' / 'include'}", str(src), "-o", str(exe)], check=True)
    got = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True,
                                          check=True).stdout.split()]
    assert got == node_of_page("weighted_interleave", 40, [0, 2, 3], weights=[5, 3, 1]).tolist()


# --- the recorded machine's cached measurement carries its node bandwidths --------------

def test_suggest_uses_the_measured_node_bandwidths(tmp_path, monkeypatch):
    path = tmp_path / "p"
    profgen.synth_run(path, [Array("x", 8 << 20, ["parallel_init", "random", "random"],
                                   samples=3000)], seed=5)
    mf = path / "manifest.json"
    doc = json.loads(mf.read_text())
    doc["host"] = socket.gethostname()
    mf.write_text(json.dumps(doc))
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    topo = open_profile(path).topology()

    def run(bw):
        M.save_cached(topo, M.Measurement(nodes=(0, 1), latency_ns=np.array([[100.0, 150.0], [150.0, 100.0]]),
                                          bandwidth_gbs=np.array(bw), placed_fraction=np.ones((2, 2))))
        proc = run_numaprof("suggest", path, "--format", "json", env={"XDG_CACHE_HOME": str(cache)},
                            check=True)
        return json.loads(proc.stdout)

    doc = run([[30.0, 9.0], [9.0, 10.0]])
    assert any("local bandwidth node 0 30.0, node 1 10.0 GB/s" in n for n in doc["notes"]), doc["notes"]
    assert any("node bandwidths differ" in n for n in doc["notes"]), doc["notes"]
    assert any(a["policy"] == "weighted_interleave" for a in doc["objects"][0]["alternatives"])
    doc = run([[20.0, 9.0], [9.0, 21.0]])
    assert not any("node bandwidths differ" in n for n in doc["notes"]), doc["notes"]
    assert all(a["policy"] != "weighted_interleave" for a in doc["objects"][0]["alternatives"])
    assert os.path.isdir(cache)
