"""replicate: a copy per node for data written first and then only read by threads on
several nodes (recommender/choose.py `replicable`; numaprof_place.h numaprof_replicate)."""

import numpy as np
import pytest
from helpers import ROOT
from synth_analysis import BIG, PAGE, analysis, obj, threads, two_node_recorded

from numaprof.analyzer.model import ObjectAccess
from numaprof.recommender import suggest
from numaprof.recommender.choose import replicable
from numaprof.recommender.targets import resolve_target


def table_access(n_pages, n_threads, *, n=8000, init=400, writes_later=0, rng=None):
    """A lookup table: the master thread writes it (the first `init` samples, in order),
    then every thread reads it at random; `writes_later` of the later samples are writes."""
    rng = rng or np.random.default_rng(5)
    page = np.concatenate([np.linspace(0, n_pages - 1, init).astype(np.int64),
                           rng.integers(0, n_pages, n - init)])
    thread = np.concatenate([np.zeros(init, np.int32), rng.integers(0, n_threads, n - init).astype(np.int32)])
    write = np.zeros(n, bool)
    write[:init] = True
    if writes_later:
        write[rng.choice(np.arange(init, n), writes_later, replace=False)] = True
    acc = ObjectAccess(page=page, thread=thread, weight=np.ones(n), write=write, n_pages=n_pages)
    acc.time = np.arange(n, dtype=np.int64) * 1000
    return acc


def _suggest(acc, t=16, target="2s", size_pages=None):
    o = obj("table", "random", acc, serial=True, n_threads=t)
    if size_pages is not None:
        o.size = size_pages * PAGE
    an = analysis([o], threads(t))
    return suggest(an, resolve_target(target, an.topology)), an


@pytest.mark.parametrize("target, nodes", [("2s", 2), ("4s", 4), ("8n-opteron", 8)])
def test_read_only_table_gets_replicate_beside_its_placement(target, nodes):
    s, _ = _suggest(table_access(BIG, 16), target=target)
    o = s.objects[0]
    # without a replicate patch the choice stays a placement numaprof applies; the copy per
    # node is compared in the what-if table and offered beside it, by hand
    assert o.policy != "replicate" and o.change in ("patch", "numactl")
    rep = o.alternative("replicate")
    assert rep is not None and rep.local_fraction == 1.0 and rep.copies == nodes
    assert o.replicate is rep and rep.score < o.predicted.score
    assert o.alternative("cyclic").copies == 1
    assert f"{nodes}x its memory" in o.reason
    assert "numaprof_replicate(table, bytes)" in o.reason and "NUMAPROF_LOCAL(table)" in o.reason
    # no sources to patch here: the reason says why it is by hand
    assert "it is not patched (no patch could be made)" in o.reason


def partitioned_access(n_pages, n_threads, across, *, n=8000, init=400, seed=5):
    """An array the master thread writes, then each thread reads in its own block of
    pages, except a share `across` of the reads, at random pages of the whole array."""
    rng = np.random.default_rng(seed)
    th = rng.integers(0, n_threads, n - init).astype(np.int32)
    per = n_pages // n_threads
    later = th.astype(np.int64) * per + rng.integers(0, per, n - init)
    cross = rng.random(n - init) < across
    later[cross] = rng.integers(0, n_pages, int(cross.sum()))
    page = np.concatenate([np.linspace(0, n_pages - 1, init).astype(np.int64), later])
    thread = np.concatenate([np.zeros(init, np.int32), th])
    write = np.zeros(n, bool)
    write[:init] = True
    acc = ObjectAccess(page=page, thread=thread, weight=np.ones(n), write=write, n_pages=n_pages)
    acc.time = np.arange(n, dtype=np.int64) * 1000
    return acc


@pytest.mark.parametrize("across, offered", [(0.0, False), (0.03, False), (0.06, False), (0.4, True)])
def test_replicate_must_clearly_beat_the_placement(across, offered):
    """A statically partitioned read: a block placement is as local as the copies, less the
    reads across the partition.  A few percent of those (a gain of 2-4 %) do not buy a copy
    on every node and a change at every read; 40 % do."""
    o = obj("dyn", "regular", partitioned_access(BIG, 16, across), serial=True, n_threads=16)
    an = analysis([o], threads(16))
    sug = suggest(an, resolve_target("2s", an.topology)).objects[0]
    rep = sug.alternative("replicate")
    assert rep is not None and rep.local_fraction == 1.0  # still a row of the what-if
    assert sug.policy != "replicate"
    assert (sug.replicate is not None) == offered, (across, sug.predicted.score, rep.score)
    if offered:
        assert rep.score <= 0.9 * sug.predicted.score


def test_a_long_initialisation_does_not_hide_the_reads_after_it():
    """The serial fill took 15 % of the table's samples (in the NUMA lab, under TCG, a
    fill took 10 %): every read still comes after the last write, so it is replicable."""
    s, _ = _suggest(table_access(BIG, 16, init=1200))
    assert s.objects[0].alternative("replicate") is not None and s.objects[0].replicate is not None


def test_written_throughout_is_not_replicated():
    # 3 % of the reads' time still writes: not read-only after initialisation
    s, _ = _suggest(table_access(BIG, 16, writes_later=240))
    assert s.objects[0].alternative("replicate") is None
    assert s.objects[0].replicate is None


def test_no_write_seen_is_no_evidence():
    acc = table_access(BIG, 16)
    acc.write[:] = False
    s, _ = _suggest(acc)
    assert s.objects[0].alternative("replicate") is None


def test_without_sample_times_no_replicate():
    acc = table_access(BIG, 16)
    acc.time = None
    s, _ = _suggest(acc)
    assert s.objects[0].alternative("replicate") is None


def test_a_copy_too_large_for_a_node_is_not_a_candidate():
    # 2s preset: 64 GiB a node; a 20 GiB table is more than a quarter of it
    s, an = _suggest(table_access(BIG, 16), size_pages=(20 << 30) // PAGE)
    assert s.objects[0].alternative("replicate") is None


def test_threads_on_one_node_need_no_copies():
    # recorded on two nodes, both threads bound to node 0: one node reads it
    o = obj("table", "random", table_access(BIG, 2), serial=True, n_threads=2)
    an = analysis([o], threads(2, nodes=[0, 0], bound=True), topo=two_node_recorded())
    s = suggest(an)
    assert s.objects[0].alternative("replicate") is None
    # spread over both nodes, it is one
    an = analysis([o], threads(2, nodes=[0, 1], bound=True), topo=two_node_recorded())
    assert suggest(an).objects[0].replicate is not None


def test_replicable_rule_directly():
    acc = table_access(BIG, 16)
    s, an = _suggest(acc)
    o = an.objects[0]
    from numaprof.recommender.choose import _Plan
    plan = _Plan(an, resolve_target("2s", an.topology), [o])
    assert replicable(o, plan)
    o.kind = "stack"
    assert not replicable(o, plan)


def test_json_carries_the_replicate_offer():
    from numaprof.cli.render.json_suggest import suggestion

    s, an = _suggest(table_access(BIG, 16))
    doc = suggestion(s, an)["objects"][0]
    assert doc["replicate"]["copies"] == 2 and doc["replicate"]["local_fraction"] == 1.0
    assert doc["replicate"]["bytes"] == 2 * BIG * PAGE
    assert "NUMAPROF_LOCAL(table)" in doc["replicate"]["by_hand"]
    assert any(a["policy"] == "replicate" and a["copies"] == 2 for a in doc["alternatives"])


def test_the_copies_of_an_applied_replicate_are_not_placed():
    """After the replicate patch, the copies numaprof_replicate maps (one allocation site
    in numaprof_place.h, one instance per node, each bound to its node) are no object to
    place: suggest says what they are instead of offering a placement (or patching the
    header)."""
    import synth_analysis as sa

    acc = table_access(BIG, 16)
    copies = sa.obj("c", "random", acc, serial=False, n_threads=16)
    copies.site = "numaprof_replicate@numaprof_place.h:636"
    s = suggest(sa.analysis([copies], threads(16)), resolve_target("2s", None))
    assert s.objects == []
    assert any(n.startswith("not placed (copies per node made by numaprof_replicate")
               and n.endswith(": c.") for n in s.notes), s.notes


def test_a_weighted_placement_replaced_by_a_copy_keeps_no_weights(monkeypatch):
    """A read-only table whose placement was weighted_interleave (nodes of unequal
    bandwidth) and whose copy per node is patched instead: the suggestion is replicate,
    and the weights of the placement it replaces are not left on it (the JSON gave
    `"weights": [3, 1]` beside `"policy": "replicate"`)."""
    from numaprof.recommender import fixes
    from numaprof.recommender.patch import sites
    from numaprof.recommender.patch.edits import Patch, PatchInfo

    o = obj("table", "random", table_access(BIG, 16), serial=True, n_threads=16)
    an = analysis([o], threads(16))
    s = suggest(an, resolve_target(str(ROOT / "tests" / "data" / "hwloc-2n-bandwidth.xml"), an.topology))
    sug = s.objects[0]
    assert sug.policy == "weighted_interleave" and sug.weights
    sug.replicate = sug.alternative("replicate")
    info = PatchInfo(kind="replicate", statement="numaprof_replicate(table, n);", where="t.c:3",
                     scope="table: the array")
    patch = Patch("/src/t.c", "0" * 64, "--- a/t.c\n+++ b/t.c\n", "", (), "/src", info=info)
    monkeypatch.setattr(sites, "replicate_for_object", lambda *a: patch)
    assert fixes._replicated(sug, o, {}, "/src", {}, None, [], {})
    assert sug.policy == "replicate" and sug.weights == [] and sug.weighted_nodes == []
