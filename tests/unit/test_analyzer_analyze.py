"""analyze() on synthetic profiles whose answers are known by construction (tests/profgen.py).

Exact checks (attribution, first touch, traffic sums) are kept apart from statistical
ones (pattern), which assert with margins.
"""


import json

import numpy as np
import profgen  # noqa: E402
import pytest
from profgen import Array  # noqa: E402

from numaprof.analyzer import analyze  # noqa: E402
from numaprof.cli.render import json_report, text_report

MiB = 1 << 20


def by_addr(analysis, run):
    """ObjectResult of each synthetic array, by name."""
    out = {}
    for a in run.arrays:
        hit = [o for o in analysis.objects if o.address == a.addr]
        assert len(hit) == 1, a.name
        out[a.name] = hit[0]
    return out


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    path = tmp_path_factory.mktemp("kinds") / "p"
    arrays = [
        Array("regular", 8 * MiB, ["serial_init", "regular", "regular"], samples=3000),
        Array("reversed", 8 * MiB, ["parallel_init", "regular", "reversed"], samples=3000),
        Array("dynamic", 8 * MiB, ["parallel_init", "dynamic", "dynamic"], samples=3000),
        Array("random", 8 * MiB, ["parallel_init", "random", "random"], samples=3000),
        Array("few", 1 * MiB, ["regular"], samples=20),
        Array("serial_only", 2 * MiB, ["serial", "serial"], samples=500),
        Array("serial_scalar", 48, ["serial", "serial"], samples=60),
        Array("serial_pair", 128, ["serial", "serial"], samples=60),
    ]
    run = profgen.synth_run(path, arrays, extra_samples=200, seed=3)
    return run, analyze(path)


def test_patterns_of_the_three_kinds(kinds):
    run, a = kinds
    o = by_addr(a, run)
    assert o["regular"].pattern == "regular"
    assert o["reversed"].pattern == "irregular"
    assert o["dynamic"].pattern == "irregular"
    assert o["random"].pattern == "random"
    for k in ("regular", "reversed", "random"):
        assert o[k].pattern_confidence >= 0.6, (k, o[k].pattern_confidence, o[k].features)
    # four threads taking turns on neighbouring chunks: their ranges coincide as under
    # random access, which the model weighs at about 0.4 (0.58 irregular here)
    assert o["dynamic"].pattern_confidence >= 0.55, o["dynamic"].features
    # the features that decide, with margins
    assert o["random"].features["span_median"] > 0.7 > 0.2 > o["regular"].features["span_median"]
    assert o["regular"].features["instability"] < 0.1
    assert o["reversed"].features["instability"] > 0.25


def test_one_threads_object_within_a_line_is_regular(kinds):
    """An object only one thread accessed has no pattern by the definitions (serial
    only), unless it fits in a cache line: then, as a thread-private scalar, it is one
    thread's in every phase and cannot spread (docs/classifier.md "Thread-private
    scalars").  Two lines are classified as any object."""
    run, a = kinds
    o = by_addr(a, run)
    assert (o["serial_only"].pattern, o["serial_only"].phases[0].pattern) == ("unknown", "serial")
    assert (o["serial_scalar"].pattern, o["serial_scalar"].pattern_confidence) == ("regular", 1.0)
    assert o["serial_scalar"].threads == 1 and not o["serial_scalar"].thread_private
    assert o["serial_pair"].pattern == "unknown", o["serial_pair"].features


def test_loops_alternating_faster_than_windows(tmp_path):
    """A backward and a forward loop in turn each iteration: every window sees both, so
    only the instruction (the loop) separates irregular from random."""
    run = profgen.synth_run(tmp_path / "p", [
        Array("alt", 8 * MiB, ["parallel_init", "alternating", "alternating"], samples=3000),
        Array("rnd", 8 * MiB, ["parallel_init", "random", "random"], samples=3000),
    ], thread_cpus=(0, 2))
    o = by_addr(analyze(run.path), run)
    assert o["alt"].pattern == "irregular", o["alt"].features
    # per window and per thread it looks random: independent places all over the array
    assert o["alt"].features["overlap_median"] > 0.5 and o["alt"].features["step_median"] > 0.2
    assert o["alt"].features["context_overlap"] < 0.2  # ...but not inside one loop
    assert o["alt"].features["context_instability"] > 0.3
    assert all(p.pattern != "random" for p in o["alt"].phases)
    assert o["rnd"].pattern == "random"


def test_rows_of_a_column_major_array(tmp_path):
    """Sharing out the rows of a column-major array gives each thread a slice of every
    column: its range is the whole array, as under random access.  Folded by the column
    length the threads are disjoint bands: one such loop alone is regular (a thread keeps
    its rows), alternating with a loop over columns it is irregular (an ADI solver's
    sweeps), and random access stays random whatever the fold."""
    run = profgen.synth_run(tmp_path / "p", [
        Array("rows", 8 * MiB, ["parallel_init", "rows", "rows"], samples=3000),
        Array("adi", 8 * MiB, ["parallel_init", "alternating_rows", "alternating_rows"], samples=3000),
        Array("rnd", 8 * MiB, ["parallel_init", "random", "random"], samples=3000),
    ], thread_cpus=(0, 2))
    o = by_addr(analyze(run.path), run)
    assert o["rows"].pattern == "regular", o["rows"].features
    assert o["adi"].pattern == "irregular", o["adi"].features
    assert o["rnd"].pattern == "random", o["rnd"].features
    for k in ("rows", "adi"):
        assert o[k].features["folded_contexts"] == 1 and o[k].features["context_overlap"] < 0.1
    assert o["rnd"].features["folded_contexts"] == 0
    assert o["adi"].features["context_instability"] > 0.9  # the two loops own different parts


def test_fold_candidates_and_chance():
    """Row counts cut the array into whole rows of ≥ 1 KiB; uniform positions of two
    threads are never disjoint under any of them."""
    from numaprof.analyzer import features as feat
    assert feat._fold_candidates(8 * MiB).tolist() == [2 ** k for k in range(1, 14)]
    ks = feat._fold_candidates(2000 * 2000 * 8)
    assert 2000 in ks and all(2000 * 2000 * 8 % k == 0 and 2000 * 2000 * 8 // k >= 1024 for k in ks)
    assert len(feat._fold_candidates(1024)) == 0
    rng = np.random.default_rng(7)
    ks = feat._fold_candidates(2 ** 4 * 3 ** 2 * 5 * 7 * 11 * 13 * 1024)
    assert len(ks) > 500
    misses = sum(feat._fold(rng.random(32), np.repeat([0, 1], 16), 2, ks) is not None for _ in range(200))
    assert misses == 0


@pytest.mark.parametrize("period", [17, 64])
def test_first_touch_between_recorded_faults(tmp_path, period):
    """One fault in `period` recorded per thread (the collector's --fault-period): the
    first touches in between are inferred from their neighbours, and come out as with
    every fault recorded: the same pages, threads, master share and nodes per page."""
    def run(name, p):
        return profgen.synth_run(tmp_path / name, [
            Array("serial", 8 * MiB, ["serial_init", "regular"], samples=500),
            Array("parallel", 8 * MiB, ["parallel_init", "regular"], samples=500),
            Array("small", 12 * 4096, ["parallel_init", "regular"], samples=100),
        ], fault_period=p, seed=5)
    full, part = run("full", 1), run("part", period)
    a_full, a_part = analyze(full.path), analyze(part.path)
    for name in ("serial", "parallel"):
        f, p = by_addr(a_full, full)[name].first_touch, by_addr(a_part, part)[name].first_touch
        assert p.pages == f.pages == 2048, (name, p)
        assert 0 < p.inferred_pages < p.pages and f.inferred_pages == 0
        assert (p.threads, p.serial, sorted(p.nodes)) == (f.threads, f.serial, sorted(f.nodes))
        assert abs(p.master_fraction - f.master_fraction) <= 2 * period / 2048, (name, p, f)
    # an allocation of fewer pages than the period may have no recorded fault at all:
    # then nothing is invented for it
    small = by_addr(a_part, part)["small"].first_touch
    assert small.pages in (0, 12) and small.pages >= small.inferred_pages


def test_fill_between_and_at_the_ends():
    """_fill: gaps up to the limit take the nearer record, farther ones stay empty; the
    ends are filled up to the interval's bounds when within the limit."""
    from numaprof.analyzer.firsttouch import _fill
    iv = np.array([0, 0, 0, 1])
    pg = np.array([3, 7, 100, 5])
    ok = np.array([10, 11, 12, 13])
    limit = np.full(4, 8)
    out_iv, out_pg, out_ok, inf = _fill(iv, pg, ok, limit, np.array([105, 105, 105, 6]),
                                        np.array([0, 0, 0, 1]))
    got = {(int(a), int(b)): int(c) for a, b, c in zip(out_iv, out_pg, out_ok, strict=True)}
    # head 0-2, record at 3, gap 4-6 (5 is as near to both: the earlier), record at 7
    assert [got[(0, k)] for k in range(0, 8)] == [10, 10, 10, 10, 10, 10, 11, 11]
    assert (0, 8) not in got and (0, 99) not in got  # 92 pages between 7 and 100: too far
    assert [got[(0, k)] for k in range(100, 105)] == [12] * 5  # the tail, to page 104
    assert [got[(1, k)] for k in range(1, 6)] == [13] * 5 and (1, 0) not in got  # from page lo = 1
    assert int(inf.sum()) == len(got) - 4


def test_dynamic_threads_move_together(kinds):
    run, a = kinds
    f = by_addr(a, run)["dynamic"].features
    assert f["cross_step_median"] < 0.05 < 0.2 < by_addr(a, run)["random"].features["cross_step_median"]


def test_unknown_below_threshold_and_serial_only(kinds):
    run, a = kinds
    o = by_addr(a, run)
    assert o["few"].pattern == "unknown" and o["few"].pattern_confidence == 0.0
    so = o["serial_only"]
    assert so.pattern == "unknown" and so.pattern_confidence == 0.0
    assert so.phases and all(p.pattern == "serial" and not p.parallel for p in so.phases)


def test_serial_initialisation_is_a_phase_not_the_pattern(kinds):
    run, a = kinds
    reg = by_addr(a, run)["regular"]
    assert reg.phases[0].pattern == "serial"
    assert any(p.pattern == "regular" and p.parallel for p in reg.phases)
    assert sum(p.samples for p in reg.phases) == reg.samples
    rev = by_addr(a, run)["reversed"]
    # two parallel phases whose thread ↔ block mapping differs (profgen's initialisation
    # has the threads write their blocks one after the other: serial stretches)
    assert [p.pattern for p in rev.phases if p.samples > 500 and p.parallel] == ["regular", "regular"]


def test_read_write_mix(kinds):
    run, a = kinds
    o = by_addr(a, run)["random"]
    # loops: 70 % loads, 20 % stores, 10 % rmw; parallel init: stores
    assert o.reads + o.writes == pytest.approx(1.0)
    assert 0.5 < o.reads < 0.7 and 0.05 < o.rmw < 0.15
    assert o.writes == pytest.approx(1 - o.reads)


def test_first_touch_serial_vs_parallel(kinds):
    run, a = kinds
    o = by_addr(a, run)
    ft = o["regular"].first_touch
    assert ft.master_fraction == 1.0 and ft.serial and ft.threads == 1
    assert ft.master_tid == run.tids[0] and ft.nodes == [0]
    assert ft.pages == 8 * MiB // 4096
    assert ft.sites == ["0x402000"]  # no binary to resolve the ip: the address is the site
    pt = o["reversed"].first_touch
    assert pt.threads == 4 and pt.master_fraction == pytest.approx(0.25) and not pt.serial
    assert sorted(pt.nodes) == [0, 1]


def test_traffic_rows_sum_to_samples_per_node(kinds):
    run, a = kinds
    for name, o in by_addr(a, run).items():
        if o.samples < 100:
            continue
        idx_of = {t.tid: i for i, t in enumerate(a.threads)}
        node_of_thread = np.array([run.nodes_of_threads[run.tids.index(t.tid)] if t.tid in run.tids else -1
                                   for t in a.threads])
        acc = o.access
        expect_rows = np.bincount(node_of_thread[acc.thread], minlength=2)
        assert o.traffic.sum(axis=1).tolist() == expect_rows.tolist(), name
        # columns: the node each sampled page lives on (the placement written by profgen)
        expect_cols = np.bincount(run.page_node[name][acc.page], minlength=2)
        assert o.traffic.sum(axis=0).tolist() == expect_cols.tolist(), name
        assert o.local_fraction == pytest.approx(np.trace(o.traffic) / o.traffic.sum())
        assert set(idx_of) >= set(run.tids)
    # serial first touch put everything on node 0: column 1 is empty, imbalance = N
    reg = by_addr(a, run)["regular"]
    assert reg.traffic[:, 1].sum() == 0 and reg.imbalance == pytest.approx(2.0)
    assert reg.load_per_node == [1.0, 0.0]
    assert reg.pages_by_node == [2048, 0]
    # parallel first touch: blocks of two threads per node, about even
    assert by_addr(a, run)["random"].imbalance < 1.1
    # global matrix = all located samples
    assert a.traffic.sum() == sum(o.traffic.sum() for o in a.objects)


def test_interleaved_placement_is_even(tmp_path):
    profgen.synth_run(tmp_path / "p", [Array("x", 4 * MiB, ["serial_init", "random"], samples=2000,
                                                   placement="interleave")])
    o = analyze(tmp_path / "p").objects[0]
    assert o.pages_by_node == [512, 512]
    assert o.imbalance < 1.1
    assert 0.4 < o.local_fraction < 0.6
    assert o.first_touch.serial  # the first touch was serial even though pages were moved


def test_profile_info_counts(kinds):
    run, a = kinds
    p = a.profile
    assert p.samples == run.samples
    assert p.with_address == run.samples - 100 and p.address_coverage == pytest.approx(p.with_address / p.samples)
    assert p.outside_objects == 100  # extra_samples: half outside every object, half without an address
    assert p.backend == "soft" and p.complete and p.rules["at_ip"] == p.with_address
    assert sum(o.samples for o in a.objects) + p.outside_objects == p.with_address
    assert p.duration_s == pytest.approx(2.0)


def test_waits_are_not_counted_against_the_coverage(tmp_path):
    """Samples of a thread spinning (rule spin) and of a core waiting on a divide (rule
    divide) are not memory accesses: the coverage leaves them out, no_mem stays in it."""
    path = tmp_path / "p"
    run = profgen.synth_run(path, [Array("x", 4 * MiB, ["regular"], samples=600)], extra_samples=120,
                            no_address_rules=(0, 16, 20))
    p = analyze(path).profile
    assert (p.rules["no_mem"], p.rules["spin"], p.rules["divide"]) == (20, 20, 20)
    assert p.address_coverage == pytest.approx(p.with_address / (run.samples - 40))
    doc = json_report.report(analyze(path))
    assert doc["profile"]["divide_wait"] == 20 and doc["profile"]["spin_wait"] == 20
    out = tmp_path / "report.txt"
    text_report.render(analyze(path), out=out)
    text = out.read_text()
    assert "of those not spin-waiting and on divides" in text
    assert "on divides   20 samples" in text


def test_objects_sorted_top_and_filter(kinds, tmp_path):
    run, a = kinds
    counts = [o.samples for o in a.objects]
    assert counts == sorted(counts, reverse=True)
    path = run.path
    assert len(analyze(path, top=2).objects) == 2
    name = a.objects[1].name
    only = analyze(path, object_name=name)
    assert [o.name for o in only.objects] == [name]
    steps = []
    analyze(path, progress=lambda s, f: steps.append(f))
    assert steps[-1] == 1.0 and steps == sorted(steps)


def test_object_access_for_the_recommender(kinds):
    run, a = kinds
    o = by_addr(a, run)["regular"]
    acc = o.access
    assert len(acc.page) == len(acc.thread) == len(acc.weight) == len(acc.write) == o.samples
    assert acc.n_pages == 2048 and acc.page.min() >= 0 and acc.page.max() < 2048
    assert acc.page.dtype == np.int64 and acc.thread.dtype == np.int32
    assert {a.threads[i].tid for i in np.unique(acc.thread)} == set(run.tids)
    assert acc.write.mean() == pytest.approx(o.writes, abs=1e-9)


def test_threads_and_findings(kinds):
    run, a = kinds
    assert [t.tid for t in a.threads] == run.tids
    for t, cpu in zip(a.threads, run.cpus, strict=True):
        assert t.cpus == [cpu] and t.migrations == 0 and not t.bound
        assert t.node == run.nodes_of_threads[run.tids.index(t.tid)]
    assert any("not bound" in f for f in a.findings)
    assert sum(t.samples for t in a.threads) == run.samples


def _hand_profile(path, samples, objects, threads=None, nodes=((0, 1), (2, 3)), page_nodes=None):
    w = profgen.ProfileWriter(path)
    w.manifest()
    w.topology([list(n) for n in nodes])
    n = len(samples["addr"])
    cols = dict(time=samples["time"], pid=[7] * n, tid=samples["tid"], cpu=samples["cpu"], ip=[0x400000] * n,
                addr=samples["addr"], access=samples.get("access", [1] * n))
    if "rule" in samples:
        cols["rule"] = samples["rule"]
    if "weight" in samples:
        cols["weight"] = samples["weight"]
    w.table("samples", **cols)
    k = len(objects["addr"])
    w.table("objects", time=objects["time"], free_time=objects["free_time"], pid=[7] * k, tid=[7] * k,
            addr=objects["addr"], size=objects["size"], kind=[1] * k, stack=objects["stack"], prev=[0] * k)
    if threads:
        w.table("threads", **threads)
    if page_nodes:
        w.table("page_nodes", time=[1] * len(page_nodes), pid=[7] * len(page_nodes),
                page=list(page_nodes), node=list(page_nodes.values()))
    return w


def test_gathers_count_in_the_object_their_base_register_points_into(tmp_path):
    """Samples of a gather (rule vsib_base) carry the base register's address: the array
    the lanes index, not the element.  They count in that object's samples and share,
    not in the samples with an address, its pattern or the traffic."""
    from numaprof.analyzer.core import RULE_VSIB_BASE

    A, B = 0x7000_0000_0000, 0x7000_0100_0000
    rng = np.random.default_rng(1)
    n_a, n_ga, n_gb = 60, 5, 10
    addr = [A + int(x) for x in rng.integers(0, 4 * 4096, n_a)] + [A] * n_ga + [B + 64] * n_gb
    n = len(addr)
    samples = dict(time=list(range(10, 10 + n)), addr=addr, tid=[7, 8] * (n // 2) + [7] * (n % 2),
                   cpu=[0, 2] * (n // 2) + [0] * (n % 2),
                   rule=[1] * n_a + [RULE_VSIB_BASE] * (n_ga + n_gb))
    objects = dict(time=[1, 2], free_time=[0, 0], addr=[A, B], size=[1 << 20, 1 << 20], stack=[1, 2])
    _hand_profile(tmp_path / "p", samples, objects,
                  page_nodes={**{A + k * 4096: k % 2 for k in range(4)}, B: 1})
    for budget in (10_000, 30):  # the whole profile, and a sub-sample of it
        a = analyze(tmp_path / "p", budget=budget)
        assert a.profile.with_address == n_a and a.profile.gather_samples == n_ga + n_gb
        by = {o.address: o for o in a.objects}
        # a sub-sample's samples stand for their object's exactly, gathers or not: the split
        # between the two is estimated
        assert by[A].samples == n_a + n_ga and by[A].gather_samples >= 1
        assert by[B].samples == by[B].gather_samples == n_gb
        assert by[B].pattern == "unknown" and float(np.sum(by[B].traffic)) == 0
        assert by[A].share + by[B].share == pytest.approx(1.0)
        if budget > n:
            assert by[A].features["samples"] == n_a  # the pattern: the addressed samples only
            assert float(np.sum(a.traffic)) == n_a
            assert any("gathers or scatters" in f and "their base register" not in f for f in a.findings)


def test_address_reused_after_free(tmp_path):
    A = 0x7000_0000_0000
    objects = dict(
        time=[100, 300, 300], free_time=[200, 0, 0],
        addr=[A, A, A + 0x100000], size=[0x100000, 0x80000, 0x1000], stack=[1, 2, 3],
    )
    samples = dict(
        time=[150, 150, 250, 350, 350, 350, 90],
        addr=[A + 8, A + 0x90000, A + 8, A + 8, A + 0x90000, A + 0x100010, A + 8],
        tid=[7] * 7, cpu=[0] * 7,
    )
    _hand_profile(tmp_path / "p", samples, objects)
    a = analyze(tmp_path / "p")
    got = {o.address if o.size != 0x80000 else "second": o.samples for o in a.objects}
    first = next(o for o in a.objects if o.size == 0x100000)
    second = next(o for o in a.objects if o.size == 0x80000)
    third = next(o for o in a.objects if o.size == 0x1000)
    assert first.samples == 2, got  # both samples while it was alive
    assert second.samples == 1  # A+8 at t=350; A+0x90000 is beyond its 512 KiB
    assert third.samples == 1
    # t=250 (freed, not yet reused), t=90 (before allocation), A+0x90000 at t=350
    assert a.profile.outside_objects == 3


def test_same_stack_is_one_object_with_a_count(tmp_path):
    A = 0x7000_0000_0000
    objects = dict(time=[10, 20, 30], free_time=[0, 0, 0], addr=[A, A + 0x200000, A + 0x400000],
                   size=[0x100000] * 3, stack=[5, 5, 6])
    samples = dict(time=[40, 41, 42, 43], addr=[A + 1, A + 0x200000 + 4096 * 3, A + 0x400001, A + 0x200008],
                   tid=[7] * 4, cpu=[0] * 4)
    _hand_profile(tmp_path / "p", samples, objects)
    a = analyze(tmp_path / "p")
    grouped = next(o for o in a.objects if o.count == 2)
    assert grouped.samples == 3
    assert sorted(grouped.access.page.tolist()) == [0, 0, 3]  # pages relative to each allocation
    assert len(a.objects) == 2


def test_migrations_binding_and_weights(tmp_path):
    A = 0x7000_0000_0000
    objects = dict(time=[1], free_time=[0], addr=[A], size=[2 * 4096], stack=[1])
    samples = dict(
        time=[10, 11, 12, 13, 14, 15], addr=[A, A + 4096, A, A + 4096, A, A],
        tid=[7, 7, 7, 7, 8, 8], cpu=[0, 2, 2, 0, 1, 1], weight=[100, 0, 300, 50, 10, 10],
    )
    threads = dict(pid=[7, 7], tid=[7, 8], ppid=[1, 7], start_time=[0, 5], end_time=[0, 0],
                   comm=["app", "app"], affinity_first=["0-3", "0-1"], affinity_last=["0-3", "1"],
                   samples=[4, 2])
    _hand_profile(tmp_path / "p", samples, objects, threads=threads, page_nodes={A: 0, A + 4096: 1})
    a = analyze(tmp_path / "p")
    t7, t8 = a.threads
    assert t7.migrations == 2 and t7.nodes == [0, 1] and t7.cpus == [0, 2] and not t7.bound
    assert t8.migrations == 0 and t8.bound and t8.affinity == "1"
    assert t7.timeline == [(0, 0), (1, 1), (3, 0)] and t8.timeline == [(4, 0)]
    assert any("1 thread ran on more than one node" in f for f in a.findings)
    o = a.objects[0]
    # weight where non-zero, else 1: (cpu0,page0)=100+10+10, (cpu2,page1)=1, (cpu2,page0)=300, (cpu0,page1)=50
    assert o.traffic.tolist() == [[120.0, 50.0], [300.0, 1.0]]
    assert o.pages_by_node == [1, 1]


def test_numa_maps_preferred_for_pages_by_node(tmp_path):
    A = 0x7000_0000_0010  # malloc's header sits before the pointer
    objects = dict(time=[1], free_time=[0], addr=[A], size=[64 * 4096], stack=[1])
    samples = dict(time=[10, 11], addr=[A + 8, A + 4096 * 10], tid=[7, 7], cpu=[0, 0])
    w = _hand_profile(tmp_path / "p", samples, objects, page_nodes={A - 0x10: 0})
    (w.path / "numa_maps.7").write_text(
        "555555554000 default file=/bin/app mapped=1 N0=1 kernelpagesize_kB=4\n"
        "700000000000 default anon=65 dirty=65 N0=40 N1=25 kernelpagesize_kB=4\n"
        "7ffff7fc0000 default anon=2 N0=2 kernelpagesize_kB=4\n")
    o = analyze(w.path).objects[0]
    assert o.pages_by_node == [40, 25]
    # the sample on an unlocated page is left out of the traffic and counted
    assert o.unplaced_samples == 1 and o.traffic.sum() == 1


def test_incomplete_profile_is_read_and_said(tmp_path):
    run = profgen.synth_run(tmp_path / "p", [Array("x", 1 * MiB, ["parallel_init", "regular"], samples=200)])
    profgen.ProfileWriter(run.path).manifest(complete=False, incomplete_reason="killed by SIGKILL")
    a = analyze(run.path)
    assert not a.profile.complete and a.profile.incomplete_reason == "killed by SIGKILL"
    assert any("did not complete" in f for f in a.findings)


def test_processes_are_attributed_separately(tmp_path):
    """Two processes (fork, MPI ranks) use the same virtual addresses for different data."""
    A = 0x7000_0000_0000
    w = profgen.ProfileWriter(tmp_path / "p")
    w.manifest()
    w.topology([[0, 1]])
    w.table("objects", time=[1, 1], free_time=[0, 0], pid=[7, 8], tid=[7, 8], addr=[A, A],
            size=[0x10000, 0x1000], kind=[1, 1], stack=[1, 2], prev=[0, 0])
    w.table("samples", time=[5, 6, 7, 8], pid=[7, 8, 8, 7], tid=[7, 8, 8, 7], cpu=[0, 1, 1, 0],
            ip=[0] * 4, addr=[A + 0x8000, A + 0x8000, A + 8, A + 8], access=[1] * 4)
    a = analyze(w.path)
    big = next(o for o in a.objects if o.size == 0x10000)
    small = next(o for o in a.objects if o.size == 0x1000)
    assert big.samples == 2 and small.samples == 1
    assert a.profile.outside_objects == 1  # pid 8's A+0x8000 is beyond its 4 KiB object


def test_features_on_a_subsample_agree(kinds, monkeypatch):
    """Large objects are classified from contiguous runs of their samples."""
    from numaprof.analyzer import features

    run, full = kinds
    monkeypatch.setattr(features, "MAX_SAMPLES", 2048)
    monkeypatch.setattr(features, "SUBSAMPLE_RUNS", 16)
    sub = analyze(run.path)
    for name in ("regular", "reversed", "dynamic", "random"):
        a, b = by_addr(full, run)[name], by_addr(sub, run)[name]
        assert b.features["feature_samples"] == 2048 < b.samples
        assert b.pattern == a.pattern, name
        assert sum(p.samples for p in b.phases) == b.samples


def test_unlocated_pages_take_the_first_touch_node(tmp_path):
    run = profgen.synth_run(tmp_path / "p", [
        Array("serial", 4 * MiB, ["serial_init", "regular"], samples=2000, located=False),
        Array("parallel", 4 * MiB, ["parallel_init", "regular"], samples=2000, located=False),
    ])
    o = by_addr(analyze(run.path), run)
    s, p = o["serial"], o["parallel"]
    assert s.pages_source == "first_touch" and s.pages_by_node == [1024, 0]
    assert s.inferred_samples == s.samples and s.unplaced_samples == 0
    assert s.traffic[:, 1].sum() == 0 and s.imbalance == pytest.approx(2.0)
    assert p.pages_by_node == [512, 512] and p.local_fraction > 0.95


def test_degenerate_profiles(tmp_path):
    w = profgen.ProfileWriter(tmp_path / "empty")
    w.manifest()
    w.topology([[0, 1]])
    a = analyze(w.path)
    assert a.profile.samples == 0 and a.objects == [] and a.threads == [] and a.traffic.sum() == 0
    # no topology, no objects, a cpu the machine does not list, no affinity recorded
    w = profgen.ProfileWriter(tmp_path / "bare")
    w.manifest()
    w.table("samples", time=[1, 2, 3], pid=[5] * 3, tid=[5, 6, 6], cpu=[0, 7, 7], ip=[1, 2, 3],
            addr=[0x1000, 0x2000, 0], access=[1, 2, 0])
    a = analyze(w.path)
    assert a.topology.n_nodes == 1 and a.profile.outside_objects == 2 and a.traffic.tolist() == [[2]]
    assert any("no recorded topology" in f for f in a.findings)
    assert not any("not bound" in f for f in a.findings)


def test_serial_stretches_do_not_decide_the_pattern(tmp_path):
    """Two threads; the master sweeps the array alone, then both run a static loop.  The
    window where the serial sweep ends holds the master's samples at the end of the array
    and the other thread's in its upper half: counted in, the threads' ranks swap."""
    run = profgen.synth_run(tmp_path / "p", [
        Array("x", 8 * MiB, ["serial", "serial", "regular", "regular", "regular"], samples=1500),
    ], thread_cpus=(0, 2))
    o = by_addr(analyze(run.path), run)["x"]
    assert o.pattern == "regular" and o.features["instability"] < 0.05, o.features
    assert [p.pattern for p in o.phases] == ["serial", "regular"]
    assert o.features["serial_samples"] >= 3000 - 30
    assert sum(p.samples for p in o.phases) == o.samples


def test_a_serial_stretch_ends_where_its_last_sample_is():
    """The master writes the array alone (100 samples in order), then two threads read
    their halves with a sample now and then (examples/gather's index array).  The serial
    stretch's last samples have the parallel loop's on one side; counted as parallel,
    the master would cover the whole array in the first window and the threads' ranks
    would swap between the windows (irregular)."""
    from numaprof.analyzer.features import object_features

    rng = np.random.default_rng(4)
    n_ser, n_par = 100, 40
    thread = np.r_[np.zeros(n_ser, dtype=np.int64), rng.integers(0, 2, n_par)]
    pos = np.r_[np.linspace(0.0, 0.99, n_ser), (thread[n_ser:] + rng.random(n_par)) / 2]
    time = np.arange(n_ser + n_par, dtype=np.int64) * 1000
    f, _ = object_features(time, thread, pos, (pos * 64).astype(np.int64))
    assert f["serial_samples"] == n_ser and f["parallel_samples"] == n_par, f
    assert f["overlap_median"] == 0.0 and f["instability"] == 0.0, f


def test_pages_are_kernel_pages(tmp_path):
    """malloc returns page + 16: an 8 KiB allocation spans three pages, and the byte at
    offset 4090 is on the second."""
    A = 0x7000_0000_0010
    objects = dict(time=[1], free_time=[0], addr=[A], size=[8192], stack=[1])
    samples = dict(time=[10, 11, 12], addr=[A, A + 4090, A + 8191], tid=[7] * 3, cpu=[0] * 3)
    _hand_profile(tmp_path / "p", samples, objects)
    acc = analyze(tmp_path / "p").objects[0].access
    assert acc.page.tolist() == [0, 1, 2] and acc.n_pages == 3


def test_numaprofs_own_mappings_are_counted_not_objects(tmp_path):
    """The shim's record file and library (mappings.flags bit 31) are never objects:
    samples at an address in them, or at an instruction of the shim's code (whatever it
    accesses), are counted as numaprof's own work, not dropped."""
    A, ANON, REC, SHIM, LIBC = (0x7000_0000_0000, 0x7e00_0000_0000, 0x7f00_0000_0000,
                                0x7f10_0000_0000, 0x7f20_0000_0000)
    own, shared, private = 0x80000000, 1, 2
    w = profgen.ProfileWriter(tmp_path / "p")
    w.manifest()
    w.topology([[0, 1]])  # one node: every sample with an address is traffic 0 -> 0
    w.table("mappings", time=[1] * 4, pid=[7] * 4, start=[ANON, REC, SHIM, LIBC],
            len=[0x100000] * 4, pgoff=[0] * 4, prot=[3, 3, 5, 5],
            flags=[private, own | shared, own | private, private],
            path=["//anon", "/home/u/p/shim.7.bin", "/opt/numaprof/libnumaprof_shim.so",
                  "/usr/lib/libc.so.6"])
    w.table("objects", time=[1], free_time=[0], pid=[7], tid=[7], addr=[A], size=[0x100000],
            kind=[1], stack=[1], prev=[0])
    # heap x2, the record file x3 (memcpy in libc), the shim's code x2 (touching an
    # anonymous mapping), the anonymous mapping x1 from the program's code
    ip = [0x400000] * 2 + [LIBC + 0x10] * 3 + [SHIM + 0x20] * 2 + [0x400000]
    addr = [A + 8, A + 16, REC + 64, REC + 128, REC + 4096, ANON + 8, ANON + 16, ANON + 24]
    n = len(addr)
    w.table("samples", time=[10 + i for i in range(n)], pid=[7] * n, tid=[7] * n, cpu=[0] * n,
            ip=ip, addr=addr, access=[1] * n)
    a = analyze(tmp_path / "p")
    assert a.profile.numaprof_own == 5
    assert sorted((o.kind, o.samples) for o in a.objects) == [("heap", 2), ("mapping", 1)]
    assert not any("shim" in o.name or "shim" in o.site for o in a.objects)
    assert sum(o.samples for o in a.objects) + a.profile.outside_objects + 5 == a.profile.with_address
    assert any(f.startswith("5 samples") and "numaprof's own work" in f for f in a.findings)
    assert int(a.traffic.sum()) == 3


def test_the_openmp_runtimes_own_state_is_counted_not_an_object(tmp_path):
    """libgomp's code on its own state (barrier counters in a heap block of its own, here
    in the anonymous mapping) is no array of the program's: counted in
    `runtime_samples` with a finding, in no object.  The same code writing a user array
    (a reduction's target) stays that array's sample, as does the program's own code on
    the anonymous mapping."""
    A, ANON, GOMP, LIBC = 0x7000_0000_0000, 0x7e00_0000_0000, 0x7f10_0000_0000, 0x7f20_0000_0000
    private = 2
    w = profgen.ProfileWriter(tmp_path / "p")
    w.manifest()
    w.topology([[0, 1]])
    w.table("mappings", time=[1] * 4, pid=[7] * 4, start=[ANON, GOMP, GOMP + 0x100000, LIBC],
            len=[0x100000] * 4, pgoff=[0] * 4, prot=[3, 5, 3, 5], flags=[private] * 4,
            path=["//anon", "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0",
                  "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0", "/usr/lib/libc.so.6"])
    # the user's array (allocated by the program), and a block libgomp's code allocated
    # (the shim sampled it: its stack's first frame is in libgomp)
    T = 0x7100_0000_0000
    w.table("objects", time=[1, 1], free_time=[0, 0], pid=[7, 7], tid=[7, 7], addr=[A, T],
            size=[0x100000, 0x100000], kind=[1, 1], stack=[1, 2], prev=[0, 0])
    w.table("stack_frames", stack=[1, 1, 2, 2], depth=[0, 1, 0, 1],
            ip=[0x400100, 0x400200, GOMP + 0x300, 0x400300])
    # libgomp's code: its barrier word x4 (3 atomic), its .data x1 (no code mapping: an
    # address in its writable mapping), the user's heap array x2, its own block x2; the
    # program's code on the anonymous mapping x1 and on the heap array x2
    ip = [GOMP + 0x40] * 5 + [GOMP + 0x80] * 2 + [0x400000] * 3 + [GOMP + 0x40] * 2
    addr = [ANON + 64] * 4 + [GOMP + 0x100010] + [A + 8, A + 16] + [ANON + 8, A + 24, A + 32] + [T, T + 64]
    access = [3, 3, 3, 1, 1, 3, 3, 1, 1, 1, 3, 3]
    n = len(addr)
    w.table("samples", time=[10 + i for i in range(n)], pid=[7] * n, tid=[7] * n, cpu=[0] * n,
            ip=ip, addr=addr, access=access)
    a = analyze(tmp_path / "p")
    assert a.profile.runtime_samples == 7 and a.profile.numaprof_own == 0
    assert sorted((o.kind, o.samples) for o in a.objects) == [("heap", 4), ("mapping", 1)], \
        [(o.name, o.kind, o.samples) for o in a.objects]
    assert sum(o.samples for o in a.objects) + a.profile.outside_objects + 7 == a.profile.with_address
    note = next(f for f in a.findings if "OpenMP runtime" in f)
    assert note.startswith("7 samples (58.3% of those with an address)") and "libgomp.so.1.0.0" in note
    assert "71% of them atomic read-modify-writes" in note and "synchronise often" in note, note
    assert int(a.traffic.sum()) == 5


def _as_runs(path):
    """Rewrite a profile's faults table the way the collector writes it
    (collector/src/faultruns.c): a thread's faults from one instruction, of one cpu and
    kind, whose pages are evenly spaced become one row (`run`, `stride`, `span`).  Returns the rows
    before and after."""
    from numaprof.analyzer.profile import open_profile
    from numaprof.analyzer.writer import DTYPES, write_column

    ft = {k: np.asarray(v) for k, v in open_profile(path).table("faults").items()}
    n = len(ft["time"])
    order = np.lexsort((ft["time"], ft["ip"], ft["tid"]))
    rows, run, stride, span = [], [], [], []
    same_cols = ("pid", "tid", "cpu", "ip", "flags", "source", "page_size")
    for i in order.tolist():
        if rows:
            r = rows[-1]
            d = (int(ft["addr"][i]) >> 12) - (int(ft["addr"][r]) >> 12) - (run[-1] - 1) * stride[-1] // 4096
            if all(ft[c][i] == ft[c][r] for c in same_cols) and d > 0 and (
                    run[-1] == 1 or d * 4096 == stride[-1]):
                stride[-1] = d * 4096
                run[-1] += 1
                span[-1] = int(ft["time"][i]) - int(ft["time"][r])
                continue
        rows.append(i)
        run.append(1)
        stride.append(0)
        span.append(0)
    rows = np.array(rows)
    types = DTYPES["faults"]
    for col, v in ft.items():
        write_column(path / f"faults.{col}.col", v[rows], types[col])
    for col, v in (("run", run), ("stride", stride), ("span", span)):
        write_column(path / f"faults.{col}.col", np.array(v), types[col])
    m = json.loads((path / "manifest.json").read_text())
    return n, len(rows), m


@pytest.mark.parametrize("period", [1, 17])
def test_faults_in_runs_give_the_same_first_touches(tmp_path, period):
    """The collector writes a thread's evenly spaced faults as one row (a run): laid
    out again by the analyzer, the first touches are those of one row per fault."""
    def run(name):
        return profgen.synth_run(tmp_path / name, [
            Array("serial", 8 * MiB, ["serial_init", "regular"], samples=500),
            Array("parallel", 8 * MiB, ["parallel_init", "regular"], samples=500),
        ], fault_period=period, seed=5)
    whole, runs = run("whole"), run("runs")
    before, after, _ = _as_runs(runs.path)
    assert after < before / 8  # initialisation loops: long runs
    a_whole, a_runs = analyze(whole.path), analyze(runs.path)
    assert a_runs.profile.faults == a_whole.profile.faults == before
    for name in ("serial", "parallel"):
        f, r = by_addr(a_whole, whole)[name].first_touch, by_addr(a_runs, runs)[name].first_touch
        assert (r.pages, r.inferred_pages, r.threads, r.serial, sorted(r.nodes)) == \
            (f.pages, f.inferred_pages, f.threads, f.serial, sorted(f.nodes)), name
        assert r.master_fraction == pytest.approx(f.master_fraction)


def test_repeats_of_a_page_are_counted_and_laid_out_bounded():
    """collector/src/faultruns.c writes a page faulted again and again by one thread and
    instruction in one window as one row of repeats (stride 0): all counted, laid out as
    at most REPEAT_POINTS faults on that page, spread over its span."""
    from numaprof.analyzer.firsttouch import REPEAT_POINTS, fault_count, fault_records

    ft = {"time": np.array([1000, 5000, 9000], dtype=np.uint64),
          "tid": np.array([1, 1, 2], dtype=np.uint32),
          "addr": np.array([0x10000, 0x10010, 0x20000], dtype=np.uint64),
          "run": np.array([1, 1_000_000, 3], dtype=np.uint32),
          "stride": np.array([0, 0, 4096], dtype=np.uint32),
          "span": np.array([0, 800_000, 200], dtype=np.uint32)}
    assert fault_count(ft) == 1 + 1_000_000 + 3
    out = fault_records(ft)
    rep = out["addr"] == 0x10010
    assert int(rep.sum()) == REPEAT_POINTS and (out["tid"][rep] == 1).all()
    t = out["time"][rep].astype(np.int64)
    assert t.min() == 5000 and t.max() == 5000 + 800_000 and (np.diff(t) > 0).all()
    assert sorted(out["addr"][out["tid"] == 2].tolist()) == [0x20000, 0x21000, 0x22000]  # a run: every fault
    assert len(out["time"]) == 1 + REPEAT_POINTS + 3


def test_a_run_of_faults_beyond_the_address_space_is_refused(tmp_path):
    from numaprof.analyzer.writer import write_column
    from numaprof.errors import ProfileError

    run = profgen.synth_run(tmp_path / "p", [Array("a", 1 * MiB, ["serial_init", "regular"], samples=200)])
    _as_runs(run.path)
    stride = np.fromfile(run.path / "faults.stride.col", dtype="<u4", offset=16)
    runs = np.fromfile(run.path / "faults.run.col", dtype="<u4", offset=16)
    runs[0], stride[0] = 2**26, 2**32 - 4096  # 2^58 bytes from its first page
    write_column(run.path / "faults.run.col", runs, "<u4")
    write_column(run.path / "faults.stride.col", stride, "<u4")
    with pytest.raises(ProfileError, match="beyond the address space"):
        analyze(run.path)


def test_brk_heap_seen_twice_is_one_object(tmp_path):
    """The brk heap is recorded first as an anonymous mapping at its start, later as
    `[heap]`, grown: one object, as large as it grew, whichever row a sample falls in
    (a code-named array in it would otherwise be split into two instances)."""
    H = 0x5599_2D0D_5000
    w = profgen.ProfileWriter(tmp_path / "p")
    w.manifest()
    w.topology([[0, 1]])
    w.table("mappings", time=[1, 50], pid=[7, 7], start=[H, H], len=[0x21000, 0x229000],
            pgoff=[0, 0], prot=[3, 3], flags=[2, 2], path=["//anon", "[heap]"])
    addr = [H + 8, H + 0x100, H + 0x200, H + 0x100000]
    time = [10, 20, 100, 100]
    n = len(addr)
    w.table("samples", time=time, pid=[7] * n, tid=[7] * n, cpu=[0] * n, ip=[0x400000] * n,
            addr=addr, access=[1] * n)
    a = analyze(tmp_path / "p")
    assert [(o.name, o.size, o.samples) for o in a.objects] == [("[heap]", 0x229000, 4)]
    assert a.profile.outside_objects == 0


C_CONSTANTS = """
double scale(const double *x, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++)
        s += x[i] > 0.577 ? x[i] * 2.25 : x[i] * 0.31;
    return s;
}
int main(void) { return 0; }
"""


def _scale_insn(info, func: int, which: str) -> int:
    """The link-time address of an instruction of `scale`: its first ("entry"), the first
    that reads memory at a fixed address ("literal": a constant of .rodata, RIP-relative)
    or through a base and an index register ("indexed": `x[i]`)."""
    import capstone
    from capstone import x86

    if which == "entry":
        return func
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    for i in md.disasm(info._code(func, 64), func):
        mems = [o.mem for o in i.operands if o.type == x86.X86_OP_MEM]
        if which == "literal" and any(m.base == x86.X86_REG_RIP and m.index == 0 for m in mems):
            return i.address
        if which == "indexed" and any(m.base not in (0, x86.X86_REG_RIP) and m.index != 0 for m in mems):
            return i.address
    raise AssertionError(f"no {which} load in scale")


def _consts_profile(tmp_path, data, at="entry", registers=False):
    """A profile of C_CONSTANTS built with gcc -O2, its segments mapped as the loader maps
    them, 100 samples in a [heap] array and those of ``data`` (addresses given by
    (section, offset)), all from `scale` at the instruction ``at`` (_scale_insn); with
    ``registers``, the software backend's register columns, each access at IP with the
    address registers of that instruction.  Returns (path, number of data samples)."""
    from helpers import build_program

    from numaprof.analyzer import symbols

    exe = build_program(tmp_path, "consts.c", C_CONSTANTS, "gcc", ["-O2", "-g"])
    info = symbols.elf_info(str(exe))
    func = next(a for a, (name, _) in zip(info.func_addr.tolist(), info.func_info, strict=True)
                if name == "scale")
    func = _scale_insn(info, func, at)
    BASE, HEAP = 0x5555_0000_0000, 0x5555_1000_0000
    maps = []
    for seg in info.elf.iter_segments():
        if seg["p_type"] != "PT_LOAD":
            continue
        v, o, m, fl = seg["p_vaddr"], seg["p_offset"], seg["p_memsz"], seg["p_flags"]
        prot = (1 if fl & 4 else 0) | (2 if fl & 2 else 0) | (4 if fl & 1 else 0)
        maps.append((BASE + (v & ~0xFFF), ((v + m + 0xFFF) & ~0xFFF) - (v & ~0xFFF), o & ~0xFFF,
                     str(exe), prot))
    maps.append((HEAP, 1 << 20, 0, "[heap]", 3))
    w = profgen.ProfileWriter(tmp_path / "p")
    w.manifest(cwd=str(tmp_path))
    w.topology([[0, 1]])
    m = len(maps)
    w.table("mappings", time=[0] * m, pid=[7] * m, start=[x[0] for x in maps],
            len=[x[1] for x in maps], pgoff=[x[2] for x in maps], prot=[x[4] for x in maps],
            flags=[2] * m, path=[x[3] for x in maps])
    addr = [HEAP + 8 * i for i in range(100)]
    for section, n in data:
        where = (0x7000_0000_0000 if section == "nowhere"  # in no mapping
                 else BASE + int(info.elf.get_section_by_name(section)["sh_addr"]) + 8)
        addr += [where] * n
    n = len(addr)
    w.table("samples", time=list(range(10, 10 + n)), pid=[7] * n, tid=[7] * n, cpu=[0] * n,
            ip=[BASE + func] * n, addr=addr, access=[1] * n)
    if registers:
        # a literal's operand has no address register (base_reg, index_reg 0: none)
        base, index = (0, 0) if at == "literal" else (6, 1)  # rdi + rax * 8: DWARF 5, 0, plus one
        w.table("samples", sp=[0x7FFF_0000_0000] * n, bp_sp=[-(2**31)] * n, insn_off=[0] * n,
                base_reg=[base] * n, index_reg=[index] * n, base_off=[0] * n, size=[8] * n)
    return tmp_path / "p", n - 100


@pytest.mark.parametrize("share", [0.3, 0.02])
def test_samples_in_no_object_are_said_where(tmp_path, share):
    """Samples at addresses no object holds are counted, never dropped; when they are a
    notable share of the samples with an address a finding says where they went, with the
    code that made them."""
    path, n_out = _consts_profile(tmp_path, [("nowhere", int(round(100 * share / (1 - share))))])
    a = analyze(path)
    assert a.profile.outside_objects == n_out
    said = [f for f in a.findings if "in no object" in f]
    if share < 0.05:
        assert not said, a.findings
        return
    assert len(said) == 1, a.findings
    assert said[0].startswith(f"{n_out} samples")
    assert "at addresses in no mapping the collector saw" in said[0], said[0]
    assert "most from scale@consts.c:" in said[0], said[0]


@pytest.mark.parametrize("share", [0.3, 0.02])
def test_constants_are_a_read_only_object_of_their_file(tmp_path, share):
    """Loads of the constants a compiler puts in .rodata (no symbol of their own) were in
    no object: they are one read-only object of the file, named by it and the section,
    its site the code that read them most; the heap array stays as it was."""
    path, n_const = _consts_profile(tmp_path, [(".rodata", int(round(100 * share / (1 - share))))])
    a = analyze(path)
    assert a.profile.outside_objects == 0
    assert not [f for f in a.findings if "in no object" in f], a.findings
    found = [(o.name, o.kind, o.samples, o.site) for o in a.objects if o.read_only]
    assert found == [("consts .rodata", "mapping", n_const, "scale@consts")], found
    heap = [o for o in a.objects if o.name == "[heap]"]
    assert len(heap) == 1 and heap[0].samples == 100 and not heap[0].read_only


@pytest.mark.parametrize("registers", [False, True])
def test_literals_read_at_a_fixed_address_are_counted_apart(tmp_path, registers):
    """A constant of .rodata read at an address fixed in the instruction (RIP-relative):
    what a sample there caught is arithmetic, not a wait on memory.  Its samples are
    counted apart (`constant_samples`), with a finding naming the line, and are in no
    object; the heap array is unchanged.  Told by the sampled registers (no base, no
    index) or, without them (the hardware backends), by the instruction decoded."""
    path, n_const = _consts_profile(tmp_path, [(".rodata", 60)], at="literal", registers=registers)
    a = analyze(path)
    assert a.profile.constant_samples == n_const == 60
    assert not [o for o in a.objects if o.read_only], [(o.name, o.samples) for o in a.objects]
    said = [f for f in a.findings if "the compiler's constants" in f]
    assert len(said) == 1 and said[0].startswith("60 samples"), a.findings
    assert "scale@consts.c:" in said[0], said[0]
    assert a.profile.outside_objects == 0
    assert sum(o.samples for o in a.objects) + a.profile.constant_samples == a.profile.with_address


@pytest.mark.parametrize("registers", [False, True])
def test_a_table_read_through_an_index_stays_the_files_object(tmp_path, registers):
    """Read-only data at no symbol read through a base and an index register is a table,
    data of the program's: it stays in the objects (the file's read-only object), not
    counted apart."""
    path, n = _consts_profile(tmp_path, [(".rodata", 40)], at="indexed", registers=registers)
    a = analyze(path)
    assert a.profile.constant_samples == 0
    assert sum(o.samples for o in a.objects) == a.profile.with_address == 100 + n
    if not registers:
        found = [(o.name, o.samples) for o in a.objects if o.read_only]
        assert found == [("consts .rodata", n)], [(o.name, o.samples) for o in a.objects]
    # (with the registers, both are named by code after `x`, whose register the base is)


def test_data_of_a_file_named_by_its_section(tmp_path):
    """Samples in a writable mapping of an ELF file at no symbol (the GOT, a library's
    allocator state) make an object named by the file and the section, its site the
    function that accessed it, not by its address."""
    path, n = _consts_profile(tmp_path, [(".got", 30)])
    a = analyze(path)
    found = [o for o in a.objects if o.kind == "mapping" and o.name.startswith("consts")]
    assert [(o.name, o.samples) for o in found] == [("consts .got", n)], \
        [(o.name, o.site, o.samples) for o in a.objects]
    assert found[0].site == "scale@consts", found[0].site


def test_access_sites_rank_the_lines_by_samples():
    """An object's access sites: the source lines of its sampled instructions, most
    samples first, at most three, counted at the object's own scale (its samples may be a
    sub-sample), instructions without a line left out."""
    from numaprof.analyzer.core import access_sites

    lines = {0x10: "f@a.c:3", 0x14: "f@a.c:3", 0x20: "g@a.c:9", 0x30: "h@a.c:12", 0x40: None,
             0x50: "k@a.c:20"}
    ips = np.array([0x10] * 3 + [0x14] * 2 + [0x20] * 4 + [0x30] * 2 + [0x40] * 6 + [0x50])
    assert access_sites(ips, lines.get, len(ips)) == [("f@a.c:3", 5), ("g@a.c:9", 4), ("h@a.c:12", 2)]
    # a sub-sample of an object of 36 samples: the counts at its scale
    assert access_sites(ips, lines.get, 36, top=1) == [("f@a.c:3", 10)]
    assert access_sites(np.array([], dtype=np.uint64), lines.get, 0) == []
