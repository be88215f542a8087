"""Choosing a placement per hot object (docs/recommender.md).

For every hot object, every candidate policy is simulated on the measured accesses with
the thread→node map of the target (measured on the recorded machine, otherwise the one
the suggested OpenMP binding produces), scored by :mod:`numaprof.recommender.cost`, and
the cheapest wins.  Candidates whose scores differ by less than the tie tolerance are
equal; among equals the choice goes to a policy designed for the object's access pattern
(MAi: bind policies for regular access, cyclic / random ones for irregular and random
access, Pousa Ribeiro et al. 2009, §II-A), then to the simplest change: no change <
numactl / environment line < one-line patch.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from numaprof.analyzer.model import Analysis, ObjectAccess, ObjectResult, Topology
from numaprof.recommender import emit
from numaprof.recommender.cost import (
    TIE_TOLERANCE,
    Replay,
    Ties,
    bandwidth_pressure,
    contention_cost,
    imbalance,
)
from numaprof.recommender.model import ObjectSuggestion, Prediction, Suggestions
from numaprof.recommender.policies import bandwidth_weights, node_of_page, static_schedule_owner
from numaprof.recommender.targets import relative_bandwidth
from numaprof.units import human_bytes

#: Candidates, in tie-break order within the same kind of change.
CANDIDATES = (
    "first_touch",
    "cyclic",
    "parallel_init",
    "bind_block",
    "skew_mapp",
    "prime_mapp",
    "cyclic_block",
    "random",
    "random_block",
    "weighted_interleave",  # only where the nodes in use differ in bandwidth
    "bind_all",
    "replicate",  # only read-mostly data read from several nodes (replicable)
)
SPREADING = frozenset({"cyclic", "cyclic_block", "skew_mapp", "prime_mapp", "random",
                       "random_block", "weighted_interleave"})
#: "code": a source change given as the runtime call to add by hand (weighted_interleave
#: whose source patch could not be made: recommender.fixes sets it after a refusal).
CHANGE_RANK = {"none": 0, "env": 1, "numactl": 1, "patch": 2, "code": 2}

#: Hot data up to this size is "small shared data": pack threads (OMP_PROC_BIND=close)
#: for cache coherence rather than spreading them for bandwidth (Lorenzo et al.,
#: §IV-B: sizes not much bigger than the caches).
SMALL_SHARED_BYTES = 8 << 20

#: "Run on one node" needs the program's data to fit in this share of one node's memory.
ONE_NODE_MEMORY_SHARE = 0.8

#: replicate (a copy per node): the copy must take at most this share of each node's memory,
REPLICATE_MEMORY_SHARE = 0.25
#: at least this share of the object's sampled reads (and REPLICATE_MIN_READS of them) must
#: come after its last sampled write: initialised, then only read (Dashti et al. 2013,
#: §3.3, replicate pages read at least 90 % of the time).  Of its reads, not of all its
#: samples: how long the initialisation took says nothing of what comes after it.
REPLICATE_READ_AFTER = 0.9
REPLICATE_MIN_READS = 100
#: ... and its predicted score must be at least this share below the best placement's:
#: the what-if does not charge a copy's memory on every node, nor the change at every
#: read, so a placement that is nearly as local (a statically partitioned array read
#: where it was placed) stays the answer instead of flipping to replicate from one
#: recording to the next on a few percent of reads across the partition.
REPLICATE_GAIN = 0.10


def replicable(o: ObjectResult, plan) -> bool:
    """Whether a copy per node is a candidate for ``o`` on the plan's target: a heap or
    static array read by threads on two nodes or more, whose sampled writes all come
    before at least 90 % of its sampled reads (it was written, then only read), and whose copy
    fits in a quarter of each of those nodes' memory.  An object with no sampled write
    is not taken as read-only: the software backend under-samples stores, so no write
    seen is no evidence, while writes seen at its start and none after are."""
    acc = o.access
    if o.kind not in ("heap", "static") or acc is None or acc.time is None or not len(acc.page):
        return False
    nodes = np.unique(plan.thread_node[np.asarray(acc.thread)])
    if len(nodes) < 2:
        return False
    write, time = np.asarray(acc.write, dtype=bool), np.asarray(acc.time)
    if not write.any():
        return False
    after = int((time > time[write].max()).sum())
    if after < REPLICATE_MIN_READS or after < REPLICATE_READ_AFTER * int((~write).sum()):
        return False
    return all(not plan.target.nodes[int(p)].memory_bytes
               or o.size <= REPLICATE_MEMORY_SHARE * plan.target.nodes[int(p)].memory_bytes
               for p in nodes)


def _fits_pattern(policy: str, pattern: str) -> bool:
    # first_touch and the bind family place data for threads that keep their data
    # (regular access); irregular and random access want the spreading family; a copy
    # per node serves read-only data of any pattern.
    if policy == "replicate":
        return True
    if pattern in ("irregular", "random"):
        return policy in SPREADING
    return True


def _is_recorded(target: Topology, recorded: Topology) -> bool:
    if target is recorded:
        return True
    return (not target.name and target.nodes == recorded.nodes
            and np.array_equal(np.asarray(target.distances), np.asarray(recorded.distances)))


def binding_places(kind: str, n_threads: int, target: Topology) -> list[int]:
    """Node position of OpenMP threads 0..n_threads-1 under OMP_PROC_BIND=kind, OMP_PLACES=cores.

    Places are the target's cpus numbered node by node.  ``spread`` with T <= P threads
    puts thread k on place floor(k*P/T) (one per subpartition); ``close`` on place k;
    with more threads than places both give consecutive threads the same place.
    """
    places = [pos for pos, node in enumerate(target.nodes) for _ in node.cpus]
    if not places:
        places = list(range(target.n_nodes))
    p = len(places)
    out = []
    for k in range(n_threads):
        idx = k if (kind == "close" and n_threads <= p) else k * p // max(n_threads, 1)
        out.append(places[min(idx, p - 1)])
    return out


def _binding_from_env(env: dict[str, str]) -> str | None:
    bind = (env or {}).get("OMP_PROC_BIND", "").strip().lower().split(",")[0]
    if bind in ("close", "master", "primary"):
        return "close"
    if bind in ("spread", "true"):
        return "spread"
    return None


def _node_label(positions, target: Topology) -> str:
    ids = sorted({target.nodes[p].id for p in positions})
    if len(ids) == 1:
        return f"node {ids[0]}"
    return "nodes " + ", ".join(str(i) for i in ids)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


class _Plan:
    """Thread→node map of the target and the facts every object's choice needs."""

    def __init__(self, analysis: Analysis, target: Topology, hot: list[ObjectResult]):
        self.analysis = analysis
        self.target = target
        self.n = target.n_nodes
        self.recorded = _is_recorded(target, analysis.topology)
        seen: set[int] = set()
        for o in hot:
            seen.update(int(t) for t in np.unique(o.access.thread))
        n_threads = len(analysis.threads)
        self.compute = sorted(t for t in seen if t >= 0) or list(range(max(n_threads, 1)))
        self.binding: str | None = None
        self.binding_from_env = _binding_from_env(analysis.profile.env)
        unbound = any(not analysis.threads[t].bound or analysis.threads[t].migrations > 0
                      for t in self.compute if t < n_threads)
        hot_bytes = sum(o.size for o in hot)
        kind = self.binding_from_env or ("close" if hot_bytes <= SMALL_SHARED_BYTES else "spread")
        pos_of_id = {node.id: p for p, node in enumerate(target.nodes)}
        size = max(n_threads, max(seen, default=-1) + 1, 1)
        self.thread_node = np.zeros(size, dtype=np.int64)
        self.measured_map = self.recorded and not (unbound and self.binding_from_env is None
                                                   and self.n > 1)
        if self.measured_map:
            # Threads stay where they were measured: keep the measured map.
            for i, t in enumerate(analysis.threads):
                self.thread_node[i] = pos_of_id.get(t.node, 0)
        else:
            # Another machine, or unbound threads that the suggested binding will place.
            places = binding_places(kind, len(self.compute), target)
            self.thread_node[:] = places[0] if places else 0
            for k, t in enumerate(self.compute):
                self.thread_node[t] = places[k]
            if self.n > 1 and self.binding_from_env is None:
                self.binding = kind
        self.kind = kind
        self.compute_nodes = [int(self.thread_node[t]) for t in self.compute]
        self.spread_nodes = sorted(set(self.compute_nodes))
        self.tid_index = {t.tid: i for i, t in enumerate(analysis.threads)}
        self.contradicted: list[str] = []
        # Node bandwidths relative to the nodes in use (None: unknown or equal) and the
        # weighted_interleave weights over the spread nodes that follow from them.
        self.speed = relative_bandwidth(target, self.spread_nodes) if self.n > 1 else None
        self.weights: list[int] = []
        if self.speed is not None:
            bw = np.asarray(target.node_bandwidth, dtype=float)[self.spread_nodes]
            self.weights = bandwidth_weights(bw)
        # The node counters describe the recorded machine only.
        self.pressure = (bandwidth_pressure(analysis.node_counters, target, self.spread_nodes)
                         if self.recorded and self.n > 1 else None)
        self.beta = None if self.pressure is None else self.pressure.beta

    def master_index(self, o: ObjectResult) -> int:
        ft = o.first_touch
        if ft.master_tid is not None and ft.master_tid in self.tid_index:
            return self.tid_index[ft.master_tid]
        return self.compute[0] if self.compute else 0

    def placement_contradicts_master(self, o: ObjectResult) -> bool:
        """On the recorded multi-node machine, with threads that stay where they were
        measured: the measured pages per node show that no single node holds 90 % of the
        pages, so the first-touch record (which says one thread placed them) missed faults;
        the measured placement wins.  (With unbound threads a migrating master spreads its
        pages itself, and the prediction is for the suggested binding anyway.)"""
        if not self.measured_map or self.n < 2:
            return False
        pages = np.asarray(o.pages_by_node, dtype=float)
        if pages.sum() < 16:
            return False
        if pages.max() >= 0.9 * pages.sum():
            return False
        self.contradicted.append(o.name)
        return True

    def first_touch_nodes(self, o: ObjectResult,
                          subset: np.ndarray | None = None) -> tuple[np.ndarray, str]:
        """Node per page (or per page of ``subset``) under first touch on the target, and
        how it was derived."""
        acc = o.access
        n_pages = int(acc.n_pages)
        count = n_pages if subset is None else len(subset)
        master = int(self.thread_node[self.master_index(o)])
        per_page = getattr(acc, "first_touch_thread", None)
        if per_page is not None and len(per_page) == n_pages:
            per_page = np.asarray(per_page, dtype=np.int64)
            if subset is not None:
                per_page = per_page[subset]
            ok = (per_page >= 0) & (per_page < len(self.thread_node))
            nodes = np.full(count, master, dtype=np.int64)
            nodes[ok] = self.thread_node[per_page[ok]]
            return nodes, "measured"
        ft = o.first_touch
        if (ft.serial or ft.threads <= 1) and not self.placement_contradicts_master(o):
            return np.full(count, master, dtype=np.int64), "master"
        # Parallel first touch without per-page data: assume the initialisation used the
        # compute threads' static schedule (the NUMA-aware idiom of Gogar, §4).
        return node_of_page("bind_block", n_pages, [], threads_nodes=self.compute_nodes,
                            pages=subset), "static"


def _change_of(policy: str, numactl_ok: bool) -> str:
    if policy == "first_touch":
        return "none"
    if policy == "replicate":
        return "code"  # reads through numaprof_local(): by hand (replicate_code)
    if policy == "cyclic" and numactl_ok:
        return "numactl"
    return "patch"


def _parallel_init_access(o: ObjectResult, plan: _Plan) -> ObjectAccess | None:
    """The accesses as they would be with the serial initialisation made parallel.

    The serial initialisation is what the object sees before a second thread first
    accesses it (all of it by the master).  Those samples are given to the compute thread
    that owns their page under the static schedule, as `#pragma omp parallel for
    schedule(static)` on that loop would.  None when there is nothing to move (no sample
    times, or no other thread ever accesses the object).
    """
    acc = o.access
    t = getattr(acc, "time", None)
    if t is None or len(plan.compute) < 2:
        return None
    t = np.asarray(t)
    thread = np.asarray(acc.thread)
    master = plan.master_index(o)
    others = thread != master
    if not others.any():
        return None
    page = np.asarray(acc.page)
    n_pages = int(acc.n_pages)
    moved = (t < t[others].min()) & (page >= 0) & (page < n_pages)
    if not moved.any():
        return None
    # the owners of the moved samples' pages only: an array of terabytes (a sparse
    # reservation) has billions of pages but a few sampled ones
    owner = static_schedule_owner(n_pages, len(plan.compute), items=page[moved])
    new_thread = np.array(thread, dtype=np.int32, copy=True)
    new_thread[moved] = np.asarray(plan.compute, dtype=np.int64)[owner]
    return dataclasses.replace(acc, thread=new_thread)


def _huge_frames(o: ObjectResult, plan: _Plan) -> dict:
    """node_of_page's frame arguments for an object whose pages were first touched as
    transparent huge pages (most of them): a parallel first touch places each huge page
    whole, at the node of the thread that reaches it first.  Its bind_block (mbind per
    block) is exact: the kernel splits the mapping at each block's end."""
    ft = o.first_touch
    page = plan.analysis.topology.page_size or 4096
    if not ft.pages or ft.huge_pages * 2 < ft.pages or ft.huge_page_size <= page:
        return {}
    return {"frame_pages": ft.huge_page_size // page, "first_page": o.address // page}


def _compact(acc: ObjectAccess, subset: np.ndarray | None) -> ObjectAccess:
    """The accesses with pages renumbered as indexes into ``subset`` (None: unchanged)."""
    if subset is None:
        return acc
    page = np.asarray(acc.page)
    if len(subset) == 0:
        return dataclasses.replace(acc, page=np.full(len(page), -1), n_pages=0)
    idx = np.minimum(np.searchsorted(subset, page), len(subset) - 1)
    return dataclasses.replace(acc, page=np.where(subset[idx] == page, idx, -1),
                               n_pages=len(subset))


def _evaluate(plan: _Plan, o: ObjectResult) -> tuple[list[Prediction], str, Ties]:
    acc = o.access
    n_pages = int(acc.n_pages)
    # A huge array is sampled on few of its pages: evaluate the maps on those pages only.
    subset = None
    if n_pages > 4 * max(len(acc.page), 1):
        page = np.asarray(acc.page)
        subset = np.unique(page[(page >= 0) & (page < n_pages)])
    # "M = number of memory nodes used": the nodes the compute threads run on.  Spreading
    # further only adds remote latency (cost.py), so spreading policies use these nodes.
    spread_nodes = plan.spread_nodes
    factor = plan.target.numa_factor()
    ft_nodes, ft_how = plan.first_touch_nodes(o, subset)
    n_replayed = n_pages if subset is None else len(subset)
    replay = Replay(_compact(acc, subset), plan.thread_node, plan.n, n_replayed)
    replays = {}
    if ft_how == "master" or (ft_how == "measured" and o.first_touch.serial):
        pi_access = _parallel_init_access(o, plan)
        if pi_access is not None:
            replays["parallel_init"] = Replay(_compact(pi_access, subset), plan.thread_node,
                                              plan.n, n_replayed)
    preds, pages = [], {}
    for policy in CANDIDATES:
        if policy == "replicate":
            continue  # below: not a page map
        if policy == "first_touch":
            placed = ft_nodes
        elif policy in ("bind_block", "parallel_init"):
            placed = node_of_page(policy, n_pages, spread_nodes, threads_nodes=plan.compute_nodes,
                                  pages=subset, **_huge_frames(o, plan))
        elif policy == "bind_all":
            # The centralised placement on the node of the master thread.
            placed = node_of_page(policy, n_pages, [int(plan.thread_node[plan.master_index(o)])],
                                  pages=subset)
        elif policy == "weighted_interleave":
            if not plan.weights:
                continue  # equal (or unknown) node bandwidths: it would be cyclic
            placed = node_of_page(policy, n_pages, spread_nodes, weights=plan.weights,
                                  pages=subset)
        else:
            placed = node_of_page(policy, n_pages, spread_nodes, pages=subset)
        pages[policy] = placed
        preds.append(replays.get(policy, replay).predict(policy, placed, factor,
                                                         active_nodes=spread_nodes,
                                                         speed=plan.speed, pressure=plan.beta))
    if plan.n > 1 and replicable(o, plan):
        rep = replay.predict("replicate", None, factor, active_nodes=spread_nodes,
                             speed=plan.speed, pressure=plan.beta)
        rep.copies = int(len(np.unique(plan.thread_node[np.asarray(o.access.thread)])))
        preds.append(rep)
    return preds, ft_how, Ties(replay, pages, factor, len(spread_nodes), replays,
                               pressure=plan.beta)


#: The rule that breaks a tie, as the reason states it (docs/recommender.md, "Ties").
TIE_RULE = ("the policy designed for the access pattern, then the simplest change, then "
            "the fixed candidate order")


def _rank(p: Prediction, pattern: str) -> tuple:
    order = {name: i for i, name in enumerate(CANDIDATES)}
    return (not _fits_pattern(p.policy, pattern), CHANGE_RANK[p.change], order[p.policy])


def _pick_all(preds: list[Prediction], pattern: str, ties: Ties,
              numactl_ok: bool) -> tuple[Prediction, list[Prediction]]:
    """The choice and every candidate predicted as good as the best one (the tie).

    The best score defines the tie: every candidate whose cost is within sampling noise
    of it (`Ties`); among those, `TIE_RULE` decides.  Scores equal to the last bit go to
    the earlier candidate, so the same profile gives the same answer on every run.
    """
    for p in preds:
        p.change = _change_of(p.policy, numactl_ok)
    order = {name: i for i, name in enumerate(CANDIDATES)}
    # replicate is compared (the what-if table) but not chosen: it is no placement that
    # a patch or a command applies (suggest() offers it beside the choice)
    preds = [p for p in preds if p.policy != "replicate"]
    best = min(preds, key=lambda p: (p.score, order[p.policy]))
    equal = [p for p in preds if p is best or ties(p, best)]
    return min(equal, key=lambda p: _rank(p, pattern)), equal


def _pick(preds: list[Prediction], pattern: str, ties: Ties, numactl_ok: bool) -> Prediction:
    return _pick_all(preds, pattern, ties, numactl_ok)[0]


def what_if_order(preds: list[Prediction], chosen: str) -> list[Prediction]:
    """The what-if table's rows: the chosen policy first, then by predicted score (equal
    scores in the fixed candidate order)."""
    order = {name: i for i, name in enumerate(CANDIDATES)}
    return sorted(preds, key=lambda p: (p.policy != chosen, p.score, order.get(p.policy, 99)))


def _tie_words(chosen: Prediction, equal: list[Prediction], pattern: str) -> str:
    others = [p.policy for p in sorted(equal, key=lambda p: _rank(p, pattern))
              if p.policy != chosen.policy]
    if not others:
        return ""
    shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    verb = "is" if len(others) == 1 else "are"
    return (f" {shown} {verb} predicted as good (a tie within the sampling noise), broken "
            f"by {TIE_RULE}.")


def _reason(o: ObjectResult, chosen: Prediction, current: Prediction, plan: _Plan,
            ft_how: str, ties: Ties) -> str:
    tgt = plan.target
    master = int(plan.thread_node[plan.master_index(o)])
    others = sorted(set(plan.compute_nodes) - {master})
    serial = ft_how == "master" or (o.first_touch.serial and ft_how == "measured")
    now = f"local {_pct(current.local_fraction)}, max/mean load {current.imbalance:.2f}"
    new = f"local {_pct(chosen.local_fraction)}, max/mean load {chosen.imbalance:.2f}"
    over = (f"the {plan.n} nodes" if len(plan.spread_nodes) == plan.n
            else f"the {len(plan.spread_nodes)} nodes the threads run on")
    if chosen.policy == "first_touch":
        if current.local_fraction >= 0.9 and current.contention <= 1.25:
            return (f"first touch already places each thread's pages on its own node "
                    f"({now}); no change.")
        return (f"no placement is predicted to beat first touch ({now}) by more than the "
                f"sampling noise; no change.")
    if (chosen.policy in SPREADING and ties(current, chosen)
            and o.pattern in ("random", "irregular")):
        what = ("random access from all threads cannot be made local" if o.pattern == "random"
                else "threads change which part they touch between phases")
        return (f"{what}; first touch spreads the pages only as long as the initialisation "
                f"loop keeps the compute threads' schedule and binding ({now}), {chosen.policy} "
                f"spreads them over {over} by construction at the same predicted cost ({new}).")
    if serial and others:
        head = (f"master-thread initialisation: all pages on {_node_label([master], tgt)}, "
                f"threads on {_node_label(others, tgt)} read remotely ({now})")
    elif current.imbalance > 1.5:
        head = (f"first touch puts {_pct(current.traffic.sum(axis=0).max() / max(current.traffic.sum(), 1e-300))} "
                f"of the accesses on one node ({now})")
    else:
        head = f"first touch gives {now}"
    if chosen.policy == "parallel_init":
        fix = ("a parallel first-touch loop with the compute loop's static schedule puts "
               "each block on its thread's node")
    elif chosen.policy == "bind_block":
        fix = "placing block k on the node of thread k (bind_block) keeps accesses local"
    elif chosen.policy == "bind_all":
        fix = f"binding it to {_node_label([master], tgt)}, where its threads run, keeps accesses local"
    elif chosen.policy == "weighted_interleave":
        fix = (f"the nodes differ in memory bandwidth ({_bandwidth_text(plan)}), so "
               f"weighted_interleave puts pages on them in proportion ({_weights_text(plan)}) "
               f"and every node's controllers are busy for about the same time")
    elif o.pattern == "random":
        fix = (f"random access from all threads cannot be made local, so {chosen.policy} "
               f"spreads the pages over {over} to balance the load")
    elif o.pattern == "irregular":
        fix = (f"threads change which part they touch between phases, so {chosen.policy} "
               f"spreads the pages over {over} to balance the load")
    else:
        fix = f"{chosen.policy} spreads the pages over {over} to balance the load"
    return f"{head}; {fix} ({new})."


def replicate_words(name: str, size: int, rep: Prediction, chosen: Prediction) -> str:
    """Why a copy per node is better than the placement `chosen`, with its memory cost."""
    return (f"it is written first, then only read (its sampled writes all come before the "
            f"last {_pct(REPLICATE_READ_AFTER)} or more of its samples) by threads on "
            f"{rep.copies} nodes, so a copy on each (replicate) makes every read local (local "
            f"{_pct(rep.local_fraction)}, score {rep.score:.3f} against {chosen.score:.3f}) at "
            f"{rep.copies}x its memory ({human_bytes(size * rep.copies)})")


def _replicate_by_hand(sug: ObjectSuggestion, size: int) -> str:
    why = getattr(sug, "replicate_refused", "") or "no patch could be made"
    return (f"{replicate_words(sug.name, size, sug.replicate, sug.predicted)}; it is not "
            f"patched ({why}): by hand, {replicate_code(sug.name)} (sampling sees a fraction "
            "of the accesses: check that nothing writes it after the copy)")


def replicate_code(name: str) -> str:
    """The change a copy per node takes, in words and code (numaprof_place.h)."""
    ptr = name if name.isidentifier() else "ptr"
    return (f"after it is initialised call numaprof_replicate({ptr}, bytes) (#include "
            f"\"numaprof_place.h\"), read it in each thread through `const T *local = "
            f"NUMAPROF_LOCAL({ptr});` taken once per parallel region, and call "
            f"numaprof_replicate_free({ptr}) before it is written again or freed")


def _bandwidth_text(plan: _Plan) -> str:
    bw = np.asarray(plan.target.node_bandwidth, dtype=float)
    return ", ".join(f"node {plan.target.nodes[p].id} {bw[p]:.1f} GB/s" for p in plan.spread_nodes)


def _weights_text(plan: _Plan) -> str:
    return ("weights " + ":".join(str(w) for w in plan.weights) + " for "
            + _node_label(plan.spread_nodes, plan.target))


def _pressure_effect(o: ObjectResult, chosen: Prediction, preds: list[Prediction], ties: Ties,
                     plan: _Plan, numactl_ok: bool) -> str:
    """What the measured bandwidth pressure did to this choice: the pick of the same
    candidates scored as fully bandwidth-bound (the model without node counters)."""
    beta = plan.beta
    full = [dataclasses.replace(p, score=p.latency * p.contention) for p in preds]
    full_ties = copy.copy(ties)
    full_ties.pressure = None
    other = _pick(full, o.pattern, full_ties, numactl_ok)
    at = f"bandwidth pressure {beta:.2f} from the node counters"
    if other.policy != chosen.policy:
        return (f" At the measured {at}, each unit of contention adds {beta:.0%} to the cost "
                f"instead of 100%; a fully bandwidth-bound run would get {other.policy} "
                f"instead.")
    return f" The choice is the same at the measured {at} as for a fully bandwidth-bound run."


def _bandwidth_notes(analysis: Analysis, plan: _Plan, notes: list[str]) -> None:
    """Notes on node bandwidths and bandwidth pressure: what the scores used."""
    pr = plan.pressure
    if pr is not None:
        notes.append(
            f"memory bandwidth from the node counters: busiest node {pr.busiest_node} at "
            f"{pr.busiest_gbs:.1f} GB/s, {_pct(pr.busiest_share)} of its measured peak "
            f"({pr.busiest_peak_gbs:.1f} GB/s), {pr.total_gbs:.1f} GB/s over all nodes: a run "
            f"without contention would spend about {_pct(pr.beta)} of its time streaming at "
            f"the memory controllers, so contention weighs {pr.beta:.2f} in the scores "
            f"(1 = fully bandwidth-bound).")
    elif not plan.recorded and any(c.bandwidth_gbs is not None for c in analysis.node_counters):
        notes.append("the node counters measured the recorded machine's memory bandwidth, "
                     "which says nothing about this target: its scores assume a "
                     "bandwidth-bound loop.")
    if plan.weights:
        notes.append(f"node bandwidths differ ({_bandwidth_text(plan)}): each node's load is "
                     f"scored divided by its relative bandwidth, and weighted_interleave "
                     f"({_weights_text(plan)}) is a candidate.")


def _aggregate(preds: list[Prediction], n: int, factor: np.ndarray,
               active: list[int]) -> dict[str, float]:
    """Local fraction, imbalance, latency and busiest node's share of several objects' traffic."""
    tm = sum((p.traffic for p in preds if p.traffic is not None), np.zeros((n, n)))
    total = tm.sum()
    if total <= 0:
        return {"local": 1.0, "imbalance": 1.0, "latency": 1.0, "max_share": 1.0 / n}
    load = tm.sum(axis=0)
    used = np.zeros(n, dtype=bool)
    used[active] = True
    used |= load > 0
    return {"local": float(np.trace(tm) / total), "imbalance": imbalance(load[used]),
            "latency": float((tm * factor).sum() / total), "max_share": float(load.max() / total)}


SHARED_SMALL = 64 << 10  # bytes: a shared object this small is a sharing problem, not placement


def _sharing_on_target(plan, findings, target_name: str) -> list[str]:
    """Where the threads of each sharing finding run on the target with the binding the
    predictions assume: on several nodes, every write to a shared line invalidates the
    copy in another node's caches, at that pair's NUMA factor."""
    out = []
    factor = plan.target.numa_factor()
    for f in findings:
        pos = sorted({int(plan.thread_node[t]) for t in f.thread_index if t < len(plan.thread_node)})
        ids = [plan.target.nodes[p].id for p in pos]
        if len(pos) >= 2 and f.kind == "page":
            worst = max(float(factor[a, b]) for a in pos for b in pos)
            out.append(f"{f.object} on {target_name}: its {len(f.thread_index)} threads run on nodes "
                       f"{', '.join(map(str, ids))} with this binding, and each of its {f.pages} "
                       "shared pages lives on one of them: the threads of the others write it "
                       f"remotely whatever the placement (NUMA factor up to {worst:.2f}).")
        elif len(pos) >= 2:
            worst = max(float(factor[a, b]) for a in pos for b in pos)
            moves = ""
            if f.pairs:
                cross = f.cross_node(plan.thread_node)
                moves = (f" Of the {f.pairs} successive sampled accesses to its lines, "
                         f"{cross} ({_pct(cross / f.pairs)}) are by a thread of another node "
                         f"than the access before, one of them a write: that share of the "
                         f"line's moves between caches would cross the interconnect "
                         f"(sampling sees one access in many: a rate, not a count).")
            out.append(f"{f.object} on {target_name}: its {len(f.thread_index)} threads run on nodes "
                       f"{', '.join(map(str, ids))} with this binding, so each of its writes "
                       f"invalidates the line in another node's caches (NUMA factor up to "
                       f"{worst:.2f}); {f.writes} writes sampled in {f.windows} windows.{moves}")
        elif pos:
            what = "its pages are local to all of them" if f.kind == "page" else \
                "the line moves between caches of one node only"
            spread = ""
            if plan.n > 1 and f.kind != "page" and f.pairs:
                # what the same threads would pay spread over the target's nodes
                places = binding_places("spread", len(plan.compute), plan.target)
                node = np.zeros(len(plan.thread_node), dtype=np.int64)
                for k, t in enumerate(plan.compute):
                    node[t] = places[k]
                over = sorted({int(node[t]) for t in f.thread_index if t < len(node)})
                if len(over) >= 2:
                    cross = f.cross_node(node)
                    worst = max(float(factor[a, b]) for a in over for b in over)
                    spread = (f" Spread over the nodes (OMP_PROC_BIND=spread) they would run on "
                              f"{_node_label(over, plan.target)}: {cross} of the {f.pairs} "
                              f"successive sampled accesses to its lines ({_pct(cross / f.pairs)}) "
                              f"would then move the line across the interconnect (NUMA factor "
                              f"up to {worst:.2f}).")
            out.append(f"{f.object} on {target_name}: its threads share node {ids[0]} with this "
                       f"binding: {what}.{spread}")
    return out


def _is_replica(o) -> bool:
    """Whether the object is memory numaprof_replicate (numaprof_place.h) mapped: its
    allocation site is in that function or that header."""
    site = getattr(o, "site", "") or ""
    func, _, where = site.partition("@")
    return func.startswith("numaprof_replicate") or \
        where.rpartition(":")[0].endswith("numaprof_place.h")


def suggest(analysis: Analysis, target: Topology | None = None, *,
            min_share: float = 0.02, fixer=None) -> Suggestions:
    """A placement per hot object of ``analysis`` for ``target`` (default: the recorded machine).

    Hot objects have at least ``min_share`` of the samples, a known pattern and per-sample
    accesses.  Returns the choice, reason and what-if table per object (the chosen policy
    first), the command lines to run (thread binding, numactl) with their predicted
    effect, and notes.  ``fixer(suggestions)``, when given, attaches the source patches
    (recommender.fixes.attach_patches) before the lines to run are written, so that they
    say whether the prediction needs patches, changes by hand, or nothing more.
    """
    target = analysis.topology if target is None else target
    target_name = target.name or "recorded machine"
    notes: list[str] = []
    hot, skipped, private, needy, contended, copies, constants, tiny = ([] for _ in range(8))
    page = analysis.topology.page_size or 4096
    sharing = {f.object: f for f in getattr(analysis, "sharing", [])}
    for f in sharing.values():
        notes.append(f"{f.object}: {f.kind} sharing between threads ({f.lines} cache line(s)"
                     f"{f' in {f.pages} pages' if f.kind == 'page' else ''}, "
                     f"{f.threads} threads, {f.samples} samples in {f.windows} windows of 10 ms"
                     f"{', at ' + ', '.join(f.sources) if f.sources else ''}): {f.fix}.")
    for o in sorted(analysis.objects, key=lambda o: -o.share):
        if o.share < min_share:
            continue
        if o.name in sharing and o.size <= SHARED_SMALL:
            # a few lines written by every thread: where its pages live cannot help
            contended.append(o.name)
            continue
        if _is_replica(o):
            copies.append(o.name)  # numaprof_replicate's copies: each bound to its node
            continue
        if o.thread_private:
            private.append(o.name)  # on its own thread's stack: first touch keeps it local
            continue
        if o.read_only:
            constants.append(o.name)  # a file's .rodata: page-cache pages, read from caches
            continue
        if 0 < o.size < page:
            tiny.append(o.name)  # shares its page with other data: placing it moves them too
            continue
        if o.pattern == "unknown" and o.samples_needed > 0:
            needy.append(f"{o.name} (+{o.samples_needed})")
            continue
        if o.pattern == "unknown" or o.access is None or len(o.access.page) == 0:
            skipped.append(o.name)
            continue
        hot.append(o)
    if contended:
        notes.append("not placed (small and written by several threads: a sharing problem, "
                     f"above, that no placement fixes): {', '.join(contended)}.")
    if needy:
        notes.append("not placed until recorded with more samples (see the report's findings "
                     f"for --freq): {', '.join(needy)}.")
    if skipped:
        notes.append(f"not placed (pattern unknown or no sampled addresses): {', '.join(skipped)}.")
    if copies:
        notes.append("not placed (copies per node made by numaprof_replicate, each bound to its "
                     f"node and read by that node's threads): {', '.join(copies)}.")
    if private:
        notes.append("not placed (thread-private: each instance is used by one thread, on its own "
                     "stack or a heap buffer it allocated, and first touch keeps it on that thread's "
                     f"node; a spreading policy would make it remote): {', '.join(private)}.")
    if tiny:
        notes.append(f"not placed (under one page of {page} bytes: it shares its page with "
                     "other data, which a placement would move with it): "
                     f"{', '.join(tiny)}.")
    if constants:
        notes.append("not placed (the read-only data of a program or library file: the "
                     "compiler's constants and literals, read from every core's caches; their "
                     f"pages are the file's, in the page cache): {', '.join(constants)}.")
    cold = sum(1 for o in analysis.objects if o.share < min_share)
    if cold:
        notes.append(f"{cold} object(s) below {_pct(min_share)} of the samples not considered.")
    result = Suggestions(target=target, target_name=target_name, objects=[], notes=notes)
    if not hot:
        if sharing:
            # where the sharing threads would run: the binding of a plan with no data
            notes.extend(_sharing_on_target(_Plan(analysis, target, []), sharing.values(),
                                            target_name))
        if fixer is not None and sharing:
            fixer(result)  # the sharing fixes (padding) need no placement
        return result
    plan = _Plan(analysis, target, hot)
    notes.extend(_sharing_on_target(plan, sharing.values(), target_name))
    result.thread_nodes = [int(x) for x in plan.thread_node[: len(analysis.threads)]]
    result.binding = plan.binding
    result.pressure = plan.pressure
    if plan.weights:
        result.weighted_nodes = [plan.target.nodes[p].id for p in plan.spread_nodes]
        result.weights = list(plan.weights)
    factor = target.numa_factor()

    if plan.n == 1:
        notes.insert(0, "the target has one NUMA node: every access is local whatever the "
                        "placement, so nothing changes (evaluate a multi-node machine with "
                        "--target 2s, 4s, 8n-opteron, itanium2 or an hwloc XML file).")
    evaluated = []
    for o in hot:
        preds, ft_how, ties = _evaluate(plan, o)
        evaluated.append((o, preds, ft_how, ties))
    if plan.contradicted:
        notes.append("first touch by one thread recorded for "
                     + ", ".join(plan.contradicted)
                     + ", but their pages are measured on several nodes: the measured placement "
                       "is taken (some first-touch faults were not recorded).")
    if plan.n > 1 and any(how == "static" for _, _, how, _ in evaluated):
        notes.append("per-page first touch not recorded for some parallel-initialised objects: "
                     "their first touch is assumed to follow the compute threads' static schedule.")

    # numactl --interleave=all applies to the whole process, so it can only stand for
    # cyclic when it does not spoil an object that relies on first touch.
    numactl_ok = True
    for _attempt in range(2):
        choices, tied = [], []
        for o, preds, _how, ties in evaluated:
            if plan.n == 1:
                for p in preds:
                    p.change = "none"
                chosen, equal = next(p for p in preds if p.policy == "first_touch"), []
            else:
                chosen, equal = _pick_all(preds, o.pattern, ties, numactl_ok)
            choices.append(chosen)
            tied.append(equal)
        if not numactl_ok or not any(c.change == "numactl" for c in choices):
            break
        conflict = False
        for (_o, preds, _how, ties), c in zip(evaluated, choices, strict=True):
            if c.policy in ("first_touch", "parallel_init"):
                cyc = next(p for p in preds if p.policy == "cyclic")
                if not ties(cyc, c):
                    conflict = True
        if not conflict:
            break
        numactl_ok = False

    if plan.n > 1:
        _bandwidth_notes(analysis, plan, notes)
    for (o, preds, ft_how, ties), chosen, equal in zip(evaluated, choices, tied, strict=True):
        current = next(p for p in preds if p.policy == "first_touch")
        if plan.n == 1:
            reason = "one NUMA node: every access is local whatever the placement; nothing to place."
        else:
            reason = _reason(o, chosen, current, plan, ft_how, ties)
            reason += _tie_words(chosen, equal, o.pattern)
            if plan.pressure is not None:
                reason += _pressure_effect(o, chosen, preds, ties, plan, numactl_ok)
        result.objects.append(ObjectSuggestion(
            name=o.name, policy=chosen.policy, reason=reason, predicted=chosen,
            alternatives=what_if_order(preds, chosen.policy), patch=None,
            change=chosen.change, current=current, size=o.size, share=o.share,
            ties=[p.policy for p in sorted(equal, key=lambda p: _rank(p, o.pattern))
                  if p.policy != chosen.policy]))
        if chosen.policy == "weighted_interleave":
            result.objects[-1].weighted_nodes = list(result.weighted_nodes)
            result.objects[-1].weights = list(result.weights)
        rep = next((p for p in preds if p.policy == "replicate"), None)
        if rep is not None and plan.n > 1 and rep.score <= (1.0 - REPLICATE_GAIN) * chosen.score \
                and not ties(chosen, rep):
            # better than any placement, but a change at every read: offered beside the
            # placement, by hand (docs/recommender.md, "replicate")
            result.objects[-1].replicate = rep

    if fixer is not None:
        fixer(result)  # source patches first: the lines to run say whether there are any
    sizes = {o.name: o.size for o in hot}
    for sug in result.objects:
        if sug.replicate is not None:
            sug.reason += f" Better still: {_replicate_by_hand(sug, sizes[sug.name])}."
    if plan.n > 1:
        _commands(analysis, plan, result, factor)
    return result


def _commands(analysis: Analysis, plan: _Plan, result: Suggestions, factor: np.ndarray) -> None:
    command = analysis.profile.command
    now = _aggregate([s.current for s in result.objects], plan.n, factor, plan.spread_nodes)
    new = _aggregate([s.predicted for s in result.objects], plan.n, factor, plan.spread_nodes)
    env = emit.binding_env(plan.binding) if plan.binding else {}
    prefix = []
    if any(s.change == "numactl" for s in result.objects):
        ids = [plan.target.nodes[p].id for p in plan.spread_nodes]
        prefix = emit.interleave_args(None if len(ids) == plan.n else ids)
    patches = [s for s in result.objects if s.change in ("patch", "code")]
    changed = bool(prefix or patches)
    if changed and (env or prefix):
        comment = (f"predicted: local {_pct(now['local'])} -> {_pct(new['local'])}, "
                   f"max/mean node load {now['imbalance']:.2f} -> {new['imbalance']:.2f}"
                   + applied_words(patches))
        result.commands.append(emit.command_line(command, env=env, prefix=prefix, comment=comment))
    elif env:
        comment = (f"keeps each thread on the node where its first touch put its pages: "
                   f"predicted local {_pct(new['local'])}, max/mean node load {new['imbalance']:.2f}")
        result.commands.append(emit.command_line(command, env=env, comment=comment))
    if plan.binding == "spread":
        result.notes.append("threads are bound with OMP_PROC_BIND=spread OMP_PLACES=cores: large "
                            "data is bandwidth-bound, so spread threads over the nodes' memory "
                            "controllers (Lorenzo et al., §IV-A; docs/references.md); the predictions assume this binding.")
    elif plan.binding == "close":
        result.notes.append("threads are packed with OMP_PROC_BIND=close OMP_PLACES=cores: the "
                            "hot data is small and shared, so keeping threads close limits "
                            "coherence traffic (Lorenzo et al., §IV-B; docs/references.md); the predictions assume this binding.")
    if patches:
        result.notes.append(code_change_note(result.objects))
    for s in result.objects:
        if s.policy == "weighted_interleave":
            o = next((o for o in analysis.objects if o.name == s.name), None)
            result.notes.append(weighted_note(s, command, o))
    if not changed:
        result.notes.append("no placement change: first touch already places the hot data well "
                            "for this target.")
    _one_node(analysis, plan, result, now)


def applied_words(objects) -> str:
    """What the predicted effect of the lines to run assumes of the source: " (with the
    patches applied)" only when there are patches to apply; changes without a patch
    (refused, to add by hand, or not made: no recorded sources) say so; placements the
    source already has need nothing."""
    offered = [s for s in objects if s.fix is not None and s.fix.status == "offered"]
    placed = [s for s in objects if s.fix is not None and s.fix.status == "already placed"
              and not s.fix.by_hand]
    by_hand = [s for s in objects if s not in offered and s not in placed]
    if offered and by_hand:
        return " (with the patches applied and the other code changes above made by hand)"
    if offered:
        return " (with the patches applied)"
    if by_hand:
        return " (with the code changes above made by hand: no patch could be made)" if all(
            s.fix is not None for s in by_hand) else " (with the code changes applied)"
    if placed and all(s.fix.statement for s in placed):
        return " (with the placements already in the source)"
    if placed:
        return " (with the placements already in effect)"
    return ""


def weighted_note(s: ObjectSuggestion, command, obj=None) -> str:
    """How weighted_interleave is applied to one array: the statement after its allocation
    (numaprof_place.h, any Linux with mbind/move_pages) that `suggest --apply` writes —
    or, when no source patch could be made (change ``code``), to add by hand — and the
    whole-process kernel policy as the alternative.  `obj`: the analyzed object (its
    allocation site; a static array is placed before its first touch instead)."""
    ids, weights = s.weighted_nodes, s.weights
    call = emit.weighted_place_call(s.name, s.size, ids, weights)
    sysfs = "; ".join(emit.weighted_interleave_sysfs(ids, weights))
    site = getattr(obj, "site", "") or ""
    if getattr(obj, "kind", "") == "static":
        where = " before its first touch"
    else:
        where = " after its allocation" + (f" at {site}" if site and site != "?" else "")
    ptr = "" if f"numaprof_place_weighted({s.name}," in call else " (ptr: the array's pointer)"
    if s.change == "code":
        how = (f"needs a call{where}, to add by hand (no source patch "
               f"could be made, see its reason): #include \"numaprof_place.h\" and "
               f"{call}{ptr}")
    else:
        how = (f"is placed by the statement the source patch (`numaprof suggest --apply`) "
               f"writes{where}, with its pointer and size: "
               f"{emit.weighted_place_statement('ptr', 'bytes', ids, weights)}")
    return (f"{s.name}: weighted_interleave {how}. "
            f"Whole-process alternative on Linux >= 6.9 with numactl >= 2.0.19 (Debian 12's "
            f"2.0.16 has no --weighted-interleave): as root {sysfs}; then "
            f"{emit.command_line(command, prefix=emit.weighted_interleave_args(ids))} (the "
            f"weights apply to every weighted-interleave user on the machine).")


def code_change_note(objects) -> str | None:
    """The note naming the suggestions that need a source change, or None."""
    patches = [s for s in objects if s.change in ("patch", "code")]
    if not patches:
        return None
    return ("placement changes needing a code change: "
            + ", ".join(f"{s.name} ({s.policy})" for s in patches) + ".")


def _one_node_choice(target: Topology, n_threads: int, data: int):
    """The node to run on: one whose cpus take the compute threads and whose memory takes
    80 % of the data; of those the one with the most memory bandwidth when the target
    knows it (measured or from hwloc), then the lowest id.  None when no node qualifies."""
    fits = [(p, node) for p, node in enumerate(target.nodes)
            if n_threads <= max(len(node.cpus), 1) and node.memory_bytes
            and data <= ONE_NODE_MEMORY_SHARE * node.memory_bytes]
    if not fits:
        return None
    bw = None if target.node_bandwidth is None else np.asarray(target.node_bandwidth, dtype=float)
    if bw is not None and bw.shape == (target.n_nodes,):
        known = [(p, node) for p, node in fits if np.isfinite(bw[p]) and bw[p] > 0]
        if known:
            return max(known, key=lambda pn: (bw[pn[0]], -pn[1].id))[1]
    return min(fits, key=lambda pn: pn[1].id)[1]


def _one_node(analysis: Analysis, plan: _Plan, result: Suggestions, now: dict[str, float]) -> None:
    """`numactl -N n -m n` when the data fits one node and the unchanged program gains
    nothing from the other nodes (Gogar, §3.1).

    Rule: the compute threads fit on the node's cpus (so no compute is lost), all objects
    fit in 80 % of its memory, and the unchanged program's predicted time is longer than a
    one-node run's.  In a bandwidth-bound loop time goes as latency x the busiest memory
    node's share of the traffic: 1 x 1 on one node, and for the unchanged program its mean
    NUMA factor x its busiest node's share (master-thread initialisation: > 1 x 1).
    With a measured bandwidth pressure beta only that share of the time streams: over the
    K nodes in use, (1 - beta) + beta * K on one node against latency x ((1 - beta) +
    beta * K * busiest share) for the unchanged program (beta = 1 gives the rule above).
    The rule takes every node as fast as the others; the node named is the fastest one
    that qualifies (`_one_node_choice`), so a difference in bandwidth only helps it.
    """
    data = sum(o.size for o in analysis.objects)
    node = _one_node_choice(plan.target, len(plan.compute), data)
    if node is None:
        return
    if plan.beta is None:
        if now["latency"] * now["max_share"] <= 1.0 + TIE_TOLERANCE:
            return
    else:
        k = max(len(plan.spread_nodes), 1)
        cost_now = now["latency"] * contention_cost(max(1.0, k * now["max_share"]), plan.beta)
        if cost_now <= contention_cost(float(k), plan.beta) * (1.0 + TIE_TOLERANCE):
            return
    now_local = now["local"]
    result.commands.append(emit.command_line(
        analysis.profile.command, prefix=emit.one_node_args(node.id),
        comment=(f"run on one node without code changes: predicted local {_pct(now_local)} -> "
                 f"100% at the bandwidth of one node, cheaper than the unchanged program")))
    result.notes.append(f"the program as it is gains nothing from the other nodes and its "
                        f"{len(plan.compute)} thread(s) and data fit on node {node.id}: run it "
                        f"there (numactl -N {node.id} -m {node.id}) until the placement is fixed "
                        f"(Gogar, §3.1; docs/references.md).")
