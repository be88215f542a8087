"""suggest(): choices from the cost model on synthetic analyses with known right answers.

Each test builds the analyzer's result objects by hand: threads, per-sample accesses
(page, thread) drawn from a known kernel shape (Pousa Ribeiro et al. 2010, Figure 15: regular, irregular,
random; static or dynamic schedule), and the first touch (master-thread or parallel).
"""

import dataclasses

import numpy as np
import pytest
from synth_analysis import (
    BIG,
    PAGE,
    MiB,
    access_dynamic,
    access_random,
    access_regular,
    access_reversed,
    analysis,
    by_name,
    example_gather,
    example_numa_aware,
    example_serial_init,
    obj,
    one_node,
    threads,
    two_node_recorded,
)

from numaprof.analyzer.model import Node, ObjectAccess, Topology
from numaprof.recommender import suggest
from numaprof.recommender.choose import SPREADING, binding_places
from numaprof.recommender.policies import static_schedule_owner
from numaprof.recommender.targets import resolve_target


def test_master_initialised_stream_on_2s_gets_parallel_first_touch():
    an = example_serial_init()
    s = suggest(an, resolve_target("2s", an.topology))
    for o in s.objects:
        assert o.policy in ("parallel_init", "bind_block"), o
        assert o.change == "patch"
        assert o.predicted.local_fraction > 0.95
        assert o.current.local_fraction == pytest.approx(0.5, abs=0.05)
        assert o.current.imbalance == pytest.approx(2.0)
        assert "master-thread initialisation: all pages on node 0, threads on node 1" in o.reason
    # the what-if table has every candidate, best first
    names = [a.policy for a in s.objects[0].alternatives]
    assert {"first_touch", "parallel_init", "bind_block", "cyclic", "skew_mapp", "prime_mapp",
            "random"} <= set(names)
    scores = [a.score for a in s.objects[0].alternatives]
    assert scores == sorted(scores)


def test_gather_on_2s_spreads_the_gathered_array():
    an = example_gather()
    s = by_name(suggest(an, resolve_target("2s", an.topology)))
    assert s["lookup"].policy in SPREADING
    assert s["idx"].policy in ("parallel_init", "bind_block")
    assert s["hist"].policy == "first_touch"
    # numactl --interleave=all would also interleave idx and hist, which need first touch:
    # the spreading must then be applied to lookup alone, as a patch.
    assert s["lookup"].change == "patch"


def test_gather_alone_uses_numactl_interleave():
    an = example_gather()
    an.objects = an.objects[:1]
    s = suggest(an, resolve_target("2s", an.topology))
    assert s.objects[0].policy == "cyclic" and s.objects[0].change == "numactl"
    assert any("numactl --interleave=all ./app -n 10" in c for c in s.commands)


def test_numa_aware_program_gets_no_change_no_false_alarm():
    an = example_numa_aware()
    for tgt in ("2s", "4s", "8n-opteron", "itanium2"):
        s = suggest(an, resolve_target(tgt, an.topology))
        assert [o.policy for o in s.objects] == ["first_touch"] * 3, tgt
        assert all(o.change == "none" for o in s.objects)
        assert not any("numactl" in c for c in s.commands)


@pytest.mark.parametrize("make", [example_serial_init, example_gather, example_numa_aware])
def test_recorded_one_node_machine_changes_nothing(make):
    an = make()
    s = suggest(an)
    assert all(o.policy == "first_touch" and o.change == "none" for o in s.objects)
    assert s.commands == []
    assert any("one NUMA node" in n for n in s.notes)


# --- agreement with the source documents (Pousa Ribeiro et al. 2009 Table I, 2010 §4) ---------------------------

def test_high_numa_factor_places_regular_arrays_locally():
    an = example_serial_init(t=16)
    s = suggest(an, resolve_target("itanium2", an.topology))
    assert all(o.policy in ("parallel_init", "bind_block") for o in s.objects)
    cyc = next(a for a in s.objects[0].alternatives if a.policy == "cyclic")
    assert cyc.local_fraction == pytest.approx(0.25, abs=0.03)
    assert s.objects[0].predicted.score < cyc.score / 1.5


@pytest.mark.parametrize("target", ["8n-opteron", "itanium2", "2s", "4s"])
def test_random_arrays_are_spread(target):
    t = 16
    an = analysis([obj("x", "random", access_random(BIG, t), serial=True, n_threads=t)], threads(t))
    s = suggest(an, resolve_target(target, an.topology))
    assert s.objects[0].policy in SPREADING
    assert s.objects[0].predicted.imbalance < 1.2
    ft = s.objects[0].current
    assert ft.imbalance == pytest.approx(resolve_target(target, an.topology).n_nodes)


def test_low_factor_contention_spreads_a_parallel_initialised_random_array():
    t = 16
    an = analysis([obj("x", "random", access_random(BIG, t), serial=False, n_threads=t)], threads(t))
    s = suggest(an, resolve_target("8n-opteron", an.topology))
    assert s.objects[0].policy in SPREADING


def test_dynamic_schedule_gets_cyclic():
    t = 8
    an = analysis([obj("v", "irregular", access_dynamic(BIG, t), serial=False, n_threads=t)], threads(t))
    s = suggest(an, resolve_target("8n-opteron", an.topology))
    o = s.objects[0]
    assert o.policy == "cyclic"
    # first touch by a static init leaves each time window on one node's block: the windowed
    # contention sees it even though the whole run is balanced.
    assert o.current.imbalance < 1.2
    assert o.current.contention > 2.0


def test_dynamic_schedule_without_sample_times_master_init_still_cyclic():
    t = 8
    acc = access_dynamic(BIG, t)
    acc.time = None
    an = analysis([obj("v", "irregular", acc, serial=True, n_threads=t)], threads(t))
    assert suggest(an, resolve_target("2s", an.topology)).objects[0].policy == "cyclic"


def test_first_touch_never_chosen_for_master_initialised_shared_array():
    for make in (access_regular, access_random, access_reversed):
        for tgt in ("2s", "4s", "8n-opteron", "itanium2"):
            for t in (2, 4, 16):
                an = analysis([obj("x", "regular", make(BIG, t), serial=True, n_threads=t)], threads(t))
                s = suggest(an, resolve_target(tgt, an.topology))
                assert s.objects[0].policy != "first_touch", (make.__name__, tgt, t)


def test_irregular_reversed_master_init_on_itanium2_prefers_locality_over_spreading():
    # Half the accesses stay local with bind_block, 1/4 with a spreading policy: on a high
    # NUMA factor machine the cost model keeps the latency advantage (Pousa Ribeiro et al. 2009, §III-D).
    t = 16
    an = analysis([obj("x", "irregular", access_reversed(BIG, t), serial=True, n_threads=t)], threads(t))
    o = suggest(an, resolve_target("itanium2", an.topology)).objects[0]
    assert o.policy in ("parallel_init", "bind_block")
    assert o.predicted.local_fraction == pytest.approx(0.5, abs=0.05)


def test_parallel_first_touch_of_huge_pages_predicts_the_boundary_frame_remote():
    # A 16 MiB master-initialised array first touched as 2 MiB transparent huge pages,
    # page 0 400 pages into its frame: a parallel first touch gives the frame across the
    # two blocks' boundary whole to thread 1 (its block starts there), 400 of thread 0's
    # pages; mbind per block (bind_block) splits the mapping and stays exact.
    n = 16 * MiB // PAGE
    base = obj("x", "regular", access_regular(n, 2), serial=True, n_threads=2)
    huge = dataclasses.replace(base, address=0x7F0000000000 + 400 * PAGE, first_touch=dataclasses.replace(
        base.first_touch, huge_pages=n, huge_page_size=2 * MiB))
    tgt = resolve_target("2s", one_node())
    plain = suggest(analysis([base], threads(2)), tgt).objects[0]
    o = suggest(analysis([huge], threads(2)), tgt).objects[0]
    assert plain.alternative("parallel_init").local_fraction == pytest.approx(1.0)
    assert o.alternative("parallel_init").local_fraction == pytest.approx(1 - 400 / n, abs=0.02)
    assert o.alternative("bind_block").local_fraction == pytest.approx(1.0)
    # base pages (most of the first touches): the plain prediction
    few = dataclasses.replace(huge, first_touch=dataclasses.replace(huge.first_touch, huge_pages=n // 4))
    assert suggest(analysis([few], threads(2)), tgt).objects[0].alternative(
        "parallel_init").local_fraction == pytest.approx(1.0)


# --- thread placement and commands ---------------------------------------------------------

def test_spread_binding_line_and_effect():
    an = example_serial_init()
    s = suggest(an, resolve_target("2s", an.topology))
    assert s.binding == "spread"
    line = s.commands[0]
    assert line.startswith("OMP_PROC_BIND=spread OMP_PLACES=cores ./app -n 10  # predicted: local 50% -> 100%")
    # no fixer made a patch: the line does not claim patches
    assert "(with the code changes applied)" in line and "patches" not in line
    assert s.thread_nodes == [0, 1]


def test_run_on_one_node_for_master_init_that_fits():
    an = example_serial_init()
    s = suggest(an, resolve_target("2s", an.topology))
    assert any(c.startswith("numactl -N 0 -m 0 ./app -n 10") for c in s.commands)


def test_run_on_one_node_names_the_fastest_node_that_fits():
    an = example_serial_init()
    target = dataclasses.replace(resolve_target("2s", an.topology), node_bandwidth=np.array([40.0, 90.0]))
    s = suggest(an, target)
    assert any(c.startswith("numactl -N 1 -m 1 ./app -n 10") for c in s.commands), s.commands
    assert not any(c.startswith("numactl -N 0") for c in s.commands)


def test_run_on_one_node_names_a_node_whose_cpus_take_the_threads():
    an = example_serial_init()  # 2 threads
    target = Topology(nodes=(Node(0, (0,), 8 << 30), Node(1, (1, 2, 3), 8 << 30)),
                      distances=np.array([[10.0, 21.0], [21.0, 10.0]]), source="test")
    s = suggest(an, target)
    assert any(c.startswith("numactl -N 1 -m 1 ./app -n 10") for c in s.commands), s.commands


def test_no_run_on_one_node_when_threads_do_not_fit():
    an = example_serial_init(t=16)
    s = suggest(an, resolve_target("8n-opteron", an.topology))  # 2 cores per node
    assert not any(c.startswith("numactl -N") for c in s.commands)


def test_no_run_on_one_node_when_data_does_not_fit():
    an = example_serial_init()
    for o in an.objects:
        o.size = 40 << 30  # 3 x 40 GiB > 80 % of a 64 GiB node
    s = suggest(an, resolve_target("2s", an.topology))
    assert not any(c.startswith("numactl -N") for c in s.commands)


def test_small_shared_data_packs_threads_close():
    t = 4
    an = analysis([obj("tab", "regular", access_regular(256, t), serial=True, n_threads=t)], threads(t))
    s = suggest(an, resolve_target("2s", an.topology))
    assert s.binding == "close"
    assert s.thread_nodes == [0, 0, 0, 0]
    # all threads on node 0 with the master's pages: first touch is right
    assert s.objects[0].policy == "first_touch"


def test_recorded_multi_node_uses_measured_thread_nodes_and_binds_unbound_threads():
    t = 4
    an = analysis([obj("a", "regular", access_regular(BIG, t), serial=True, n_threads=t)],
                  threads(t, nodes=[0, 0, 1, 1], bound=False), topo=two_node_recorded())
    s = suggest(an)
    assert s.thread_nodes == [0, 0, 1, 1]
    assert s.objects[0].policy in ("parallel_init", "bind_block")
    assert s.commands and s.commands[0].startswith("OMP_PROC_BIND=spread OMP_PLACES=cores ")


def test_bound_threads_keep_their_measured_nodes():
    t = 4
    an = analysis([obj("a", "regular", access_regular(BIG, t), serial=False, n_threads=t)],
                  threads(t, nodes=[0, 1, 0, 1], bound=True), topo=two_node_recorded())
    s = suggest(an)
    assert s.thread_nodes == [0, 1, 0, 1]
    # static blocks 0..3 alternate between the nodes: bind_block follows the threads
    o = s.objects[0]
    assert o.policy == "first_touch" and o.current.local_fraction > 0.95


def test_unbound_threads_on_recorded_machine_are_predicted_with_the_binding():
    t = 4
    an = analysis([obj("a", "regular", access_regular(BIG, t), serial=True, n_threads=t)],
                  threads(t, nodes=[0, 0, 0, 0], bound=False), topo=two_node_recorded())
    s = suggest(an)
    assert s.binding == "spread" and s.thread_nodes == [0, 0, 1, 1]


def test_bound_threads_on_recorded_machine_get_no_binding_line():
    t = 4
    an = analysis([obj("a", "regular", access_regular(BIG, t), serial=False, n_threads=t)],
                  threads(t, nodes=[0, 0, 1, 1], bound=True), topo=two_node_recorded())
    s = suggest(an)
    assert s.binding is None
    assert s.objects[0].policy == "first_touch"
    assert s.commands == []


def test_existing_omp_proc_bind_is_respected():
    an = example_serial_init()
    an.profile.env = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}
    s = suggest(an, resolve_target("2s", an.topology))
    assert s.binding is None
    assert s.thread_nodes == [0, 0]
    assert not any(c.startswith("OMP_PROC_BIND") for c in s.commands)


def test_binding_places_spread_and_close():
    topo = resolve_target("4s", one_node())  # 16 cores per node
    assert binding_places("spread", 4, topo) == [0, 1, 2, 3]
    assert binding_places("spread", 8, topo) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert binding_places("close", 4, topo) == [0, 0, 0, 0]
    assert binding_places("close", 128, topo)[-1] == 3


def test_cold_and_unknown_objects_are_noted_not_placed():
    an = example_serial_init()
    an.objects[0].share = 0.001
    an.objects[1].pattern = "unknown"
    s = suggest(an, resolve_target("2s", an.topology))
    assert [o.name for o in s.objects] == ["c"]
    assert any("b" in n and "pattern unknown" in n for n in s.notes)
    assert any("below 2%" in n for n in s.notes)


def test_measured_per_page_first_touch_is_used_when_present():
    t = 2
    acc = access_regular(BIG, t)
    # pages first touched by the *other* thread than the one computing on them
    acc.first_touch_thread = 1 - static_schedule_owner(BIG, t)
    an = analysis([obj("a", "regular", acc, serial=False, n_threads=t)], threads(t))
    o = suggest(an, resolve_target("2s", an.topology)).objects[0]
    assert o.current.local_fraction < 0.05
    assert o.policy in ("parallel_init", "bind_block")


def test_measured_costs_follow_the_numa_factor():
    # same placement, higher factor → higher score for the remote share
    an = example_serial_init()
    s2 = suggest(an, resolve_target("2s", an.topology)).objects[0].current
    s8 = suggest(an, resolve_target("itanium2", an.topology)).objects[0].current
    assert s2.latency == pytest.approx(0.5 * 1.0 + 0.5 * 2.1, abs=0.03)
    assert s8.latency > s2.latency


def with_serial_init_phase(acc, n_threads, init_samples=3000):
    """Prepend a serial initialisation sampled in time: thread 0 writes the pages in order."""
    t_loop = np.sort(np.random.default_rng(9).random(len(acc.page))) * 1e9 + 1e9
    init_pages = np.linspace(0, acc.n_pages - 1, init_samples).astype(np.int64)
    out = ObjectAccess(page=np.concatenate([init_pages, acc.page]),
                       thread=np.concatenate([np.zeros(init_samples, np.int32), acc.thread]),
                       weight=np.ones(init_samples + len(acc.page)),
                       write=np.concatenate([np.ones(init_samples, bool), acc.write]),
                       n_pages=acc.n_pages)
    out.time = np.concatenate([np.linspace(0, 0.9e9, init_samples), t_loop]).astype(np.int64)
    return out


def test_serial_phase_is_not_contention():
    # One thread writing the array in order hits one node at a time under a block
    # placement, but one thread cannot saturate a memory node: no contention from it.
    t = 8
    acc = with_serial_init_phase(access_regular(BIG, t), t)
    an = analysis([obj("a", "regular", acc, serial=True, n_threads=t)], threads(t))
    o = suggest(an, resolve_target("8n-opteron", an.topology)).objects[0]
    assert o.policy in ("parallel_init", "bind_block")
    assert o.predicted.contention < 1.3
    assert o.current.contention > 4  # master-initialised: every thread loads node 0


def test_windowed_contention_keeps_numa_aware_as_is():
    t = 8
    acc = access_regular(BIG, t)
    acc.time = np.random.default_rng(4).integers(0, 10**9, len(acc.page))
    an = analysis([obj("a", "regular", acc, serial=False, n_threads=t)], threads(t))
    for tgt in ("2s", "8n-opteron", "itanium2"):
        o = suggest(an, resolve_target(tgt, an.topology)).objects[0]
        assert o.policy == "first_touch", tgt
        assert o.current.contention < 1.3


def test_uneven_thread_work_with_local_pages_is_no_contention():
    # NUMA-aware placement, but thread 0 issues 60 % of the accesses (uneven work or
    # sampling): every access is local, so node 0's larger load is its own threads' demand.
    t = 2
    acc = access_regular(BIG, t)
    keep = (acc.thread == 0) | (np.random.default_rng(1).random(len(acc.page)) < 0.66)
    acc = ObjectAccess(page=acc.page[keep], thread=acc.thread[keep], weight=acc.weight[keep],
                       write=acc.write[keep], n_pages=acc.n_pages)
    assert 0.55 < np.mean(acc.thread == 0) < 0.65
    an = analysis([obj("y", "regular", acc, serial=False, n_threads=t)], threads(t))
    for tgt in ("2s", "8n-opteron", "itanium2"):
        o = suggest(an, resolve_target(tgt, an.topology)).objects[0]
        assert o.policy == "first_touch", (tgt, o.alternatives[:3])
        assert o.current.contention == pytest.approx(1.0)


def test_parallel_init_prediction_parallelises_the_serial_initialisation():
    # The master's initialisation writes are 30 % of the samples: bind_block leaves that
    # loop serial (half of it remote on 2 nodes), parallel_init runs it on the owners.
    t = 2
    acc = with_serial_init_phase(access_regular(BIG, t), t, init_samples=3400)
    an = analysis([obj("idx", "regular", acc, serial=True, n_threads=t)], threads(t))
    s = suggest(an, resolve_target("2s", an.topology)).objects[0]
    rows = {a.policy: a for a in s.alternatives}
    assert rows["parallel_init"].local_fraction > 0.97
    assert rows["bind_block"].local_fraction == pytest.approx(1 - 0.3 / 2, abs=0.03)
    assert s.policy == "parallel_init"
    assert s.alternative("bind_block") is rows["bind_block"] and s.alternative("nope") is None
    # without sample times the initialisation cannot be told apart: both predict the same
    acc.time = None
    s = suggest(an, resolve_target("2s", an.topology)).objects[0]
    rows = {a.policy: a for a in s.alternatives}
    assert rows["parallel_init"].local_fraction == pytest.approx(rows["bind_block"].local_fraction)


def test_huge_array_is_evaluated_on_its_sampled_pages():
    # 64 GiB of pages, 8000 samples: same decisions and numbers as a full evaluation would
    # give, without materialising 16 M-page maps per candidate.
    t = 4
    n_pages = 16 << 20
    for make, serial, want in ((access_regular, True, {"parallel_init", "bind_block"}),
                               (access_random, True, SPREADING),
                               (access_regular, False, {"first_touch"})):
        acc = make(n_pages, t)
        an = analysis([obj("huge", "random" if make is access_random else "regular", acc,
                           serial=serial, n_threads=t)], threads(t))
        o = suggest(an, resolve_target("4s", an.topology)).objects[0]
        assert o.policy in want, (make.__name__, serial, o.policy)
        if make is access_regular and serial:
            assert o.current.local_fraction == pytest.approx(0.25, abs=0.03)
            assert o.predicted.local_fraction == pytest.approx(1.0)


def test_measured_placement_overrides_an_incomplete_first_touch_record():
    # Recorded on 2 nodes: the first-touch record says one thread placed the pages, but
    # the pages are measured half on each node (faults of the other thread were lost).
    t = 2
    an = analysis([obj("z", "regular", access_regular(BIG, t), serial=True, n_threads=t)],
                  threads(t, nodes=[0, 1], bound=True), topo=two_node_recorded())
    an.objects[0].pages_by_node = [359, 360]
    s = suggest(an)
    assert s.objects[0].policy == "first_touch"
    assert any("measured on several nodes" in n for n in s.notes)
    # the same record with the pages really on one node is a master-thread initialisation
    an.objects[0].pages_by_node = [719, 0]
    assert suggest(an).objects[0].policy in ("parallel_init", "bind_block")
    # unbound threads: a migrating master spreads its own pages; the suggested binding's
    # master-thread initialisation is what is predicted
    an.threads = threads(t, nodes=[0, 1], bound=False)
    an.objects[0].pages_by_node = [600, 119]
    s = suggest(an)
    assert s.objects[0].policy in ("parallel_init", "bind_block")
    assert not any("measured on several nodes" in n for n in s.notes)


def test_an_object_under_a_page_is_not_placed():
    """A 32-byte struct (CoMD's interpolation table headers, three of them) shares its
    page with other data: a placement would move that too.  The array beside it is
    placed as before."""
    an = example_serial_init()
    small = dataclasses.replace(an.objects[0], name="struct Table", size=32, count=3)
    an = dataclasses.replace(an, objects=[small, *an.objects[1:]])
    s = suggest(an, resolve_target("2s", an.topology))
    assert "struct Table" not in by_name(s)
    assert any(n.startswith("not placed (under one page of 4096 bytes") and "struct Table" in n
               for n in s.notes), s.notes
    assert {o.name for o in s.objects} == {o.name for o in an.objects[1:]}
