"""Threads and their placement (docs/analyzer.md): where each thread ran, migrations, binding."""

from __future__ import annotations

import numpy as np

from numaprof.analyzer.model import ThreadResult, Topology
from numaprof.analyzer.profile import CPU_UNKNOWN

MAX_CPU = 65535  # a profile's cpu column is 16 bits (65535: unknown)


def parse_cpulist(text: str) -> set[int]:
    """'0-3,8' → {0, 1, 2, 3, 8}; an empty or malformed list, or one naming a cpu beyond
    the 65535 a profile can hold, gives the empty set (affinity unknown)."""
    out: set[int] = set()
    for part in (text or "").replace(" ", "").split(","):
        if not part:
            continue
        try:
            if "-" in part:
                a, b = part.split("-", 1)
                step = 1
                if ":" in b:
                    b, s = b.split(":", 1)
                    step = int(s)
                lo, hi = int(a), int(b)
                if not 0 <= lo <= hi < MAX_CPU:
                    return set()
                out.update(range(lo, hi + 1, step))
            else:
                c = int(part)
                if not 0 <= c < MAX_CPU:
                    return set()
                out.add(c)
        except ValueError:
            return set()
    return out


def thread_ids(threads_table: dict, sample_tids: np.ndarray) -> np.ndarray:
    """Sorted distinct tids: those of the threads table and any only seen in samples."""
    known = np.asarray(threads_table["tid"]).astype(np.int64)
    if len(sample_tids) > 1_000_000:
        # np.unique on ten million values is slow; tids already known cover almost all
        missing = sample_tids[~np.isin(sample_tids, known)] if len(known) else sample_tids
        extra = np.unique(missing)
    else:
        extra = np.unique(sample_tids)
    return np.union1d(known, extra.astype(np.int64))


def analyze_threads(
    threads_table: dict,
    tids: np.ndarray,
    s_tidx: np.ndarray,
    s_cpu: np.ndarray,
    s_time: np.ndarray,
    topo: Topology,
) -> tuple[list[ThreadResult], list[str]]:
    """One ThreadResult per tid in ``tids`` (same order) and plain-sentence findings.

    ``s_tidx`` is each sample's index into ``tids``; samples are all samples of the run
    (with or without a data address), since placement does not depend on the address.
    """
    T = len(tids)
    cpu_node_map = topo.node_of_cpu()
    cpu = np.asarray(s_cpu)
    unknown = cpu == CPU_UNKNOWN
    if unknown.any():
        # cpu not recorded: one extra column, on no cpu and on no node (unless the
        # machine has only one)
        known_max = int(cpu[~unknown].max()) if (~unknown).any() else -1
        ncpu_known = max([known_max + 1, *(c + 1 for c in cpu_node_map)], default=1)
        cpu = np.where(unknown, ncpu_known, cpu)
        ncpu = ncpu_known + 1
    else:
        ncpu_known = ncpu = max([int(cpu.max()) + 1 if len(cpu) else 0,
                                 *(c + 1 for c in cpu_node_map)], default=1)
    cpu_node = np.full(ncpu, -1, dtype=np.int16)
    for c, nd in cpu_node_map.items():
        cpu_node[c] = nd
    if ncpu > ncpu_known and topo.n_nodes == 1:
        cpu_node[ncpu_known] = topo.nodes[0].id
    N = max(topo.n_nodes, max(cpu_node_map.values(), default=0) + 1)
    s_tidx = np.asarray(s_tidx, dtype=np.int32)
    counts = np.bincount(s_tidx, minlength=T)
    # samples per (thread, cpu) and per (thread, node), kept sparse: a thread runs on a few
    # cpus, so T x ncpu dense matrices would cost memory for nothing (and a crafted
    # profile with many tids and cpu ids could ask for gigabytes)
    cpu_t, cpu_c, cpu_n = _pair_counts(s_tidx, cpu, T, ncpu)
    cpu_bounds = np.searchsorted(cpu_t, np.arange(T + 1))
    node = cpu_node[cpu]
    known = node >= 0
    node_t, node_v, node_n = _pair_counts(s_tidx[known], node[known], T, N)
    node_bounds = np.searchsorted(node_t, np.arange(T + 1))
    del known

    # migrations: node changes between consecutive samples of a thread, in time order
    t = np.asarray(s_time)
    if len(t) > 1 and np.all(t[1:] >= t[:-1]):
        order = np.argsort(s_tidx, kind="stable")
    else:
        order = np.lexsort((t, s_tidx))
    ot, on = s_tidx[order], node[order]
    change = (ot[1:] == ot[:-1]) & (on[1:] != on[:-1]) & (on[1:] >= 0) & (on[:-1] >= 0)
    migrations = np.bincount(ot[1:][change], minlength=T)
    timelines = _timelines(ot, on, t, order, T)

    machine = {c for n in topo.nodes for c in n.cpus}
    tmap = {int(tid): i for i, tid in enumerate(np.asarray(threads_table["tid"]).tolist())}
    results: list[ThreadResult] = []
    cpu_samples = []  # per thread: (its cpus, samples on each)
    for i, tid in enumerate(tids.tolist()):
        row = tmap.get(tid)
        comm = str(threads_table["comm"][row]) if row is not None else ""
        pid = int(threads_table["pid"][row]) if row is not None else 0
        aff = ""
        if row is not None:
            aff = str(threads_table["affinity_last"][row]) or str(threads_table["affinity_first"][row])
        aff_set = parse_cpulist(aff)
        lo, hi = cpu_bounds[i], cpu_bounds[i + 1]
        mine = cpu_c[lo:hi] < ncpu_known  # cpus in ascending order
        cpus = [int(c) for c in cpu_c[lo:hi][mine]]
        cpu_samples.append((cpu_c[lo:hi][mine], cpu_n[lo:hi][mine]))
        lo, hi = node_bounds[i], node_bounds[i + 1]
        # most samples first, ties in node order
        nodes_seen = [int(n) for n in node_v[lo:hi][np.argsort(-node_n[lo:hi], kind="stable")]]
        results.append(
            ThreadResult(
                tid=int(tid),
                pid=pid,
                comm=comm,
                samples=int(counts[i]),
                cpus=cpus,
                nodes=nodes_seen,
                node=nodes_seen[0] if nodes_seen else -1,
                migrations=int(migrations[i]),
                bound=bool(aff_set) and bool(machine) and not machine <= aff_set,
                affinity=aff,
                timeline=timelines[i],
            )
        )
    # threads sharing a cpu: same dominant cpu (the topology carries no SMT siblings)
    main_cpu = {}
    for i, r in enumerate(results):
        # only threads that mostly stayed on one cpu: a migrating thread shares nothing
        cs, ns = cpu_samples[i]
        if r.samples >= 10 and len(ns) and ns.max() >= 0.5 * r.samples:
            main_cpu.setdefault(int(cs[np.argmax(ns)]), []).append(i)
    shared = []
    for c, members in main_cpu.items():
        if len(members) > 1:
            for i in members:
                results[i].shares_core_with = [results[j].tid for j in members if j != i]
            shared.append((c, [results[j].tid for j in members]))
    return results, findings(results, topo, shared)


TIMELINE_MAX = 1000
_DENSE_CELLS = 1 << 22


def _pair_counts(a: np.ndarray, b: np.ndarray, na: int, nb: int):
    """(a, b, count) of each distinct pair, sorted by a then b: a bincount over the
    na x nb matrix when it is small, a sort of the pairs when it is not."""
    key = a.astype(np.int64) * nb + b
    if na * nb <= _DENSE_CELLS:
        dense = np.bincount(key, minlength=na * nb)
        pairs = np.flatnonzero(dense)
        n = dense[pairs]
    else:
        pairs, n = np.unique(key, return_counts=True)
    return pairs // nb, pairs % nb, n


def _timelines(ot, on, t, order, T) -> list[list[tuple[int, int]]]:
    out: list[list[tuple[int, int]]] = [[] for _ in range(T)]
    known = np.flatnonzero(on >= 0)
    if len(known) == 0:
        return out
    kt, kn = ot[known], on[known]
    # a point where a thread's (known) node differs from its previous known sample
    point = np.ones(len(known), dtype=bool)
    point[1:] = (kt[1:] != kt[:-1]) | (kn[1:] != kn[:-1])
    idx = np.flatnonzero(point)
    th = kt[idx]
    idx = idx[np.arange(len(idx)) - np.searchsorted(th, th) < TIMELINE_MAX]  # first N per thread
    times = np.asarray(t)[order][known][idx].astype(np.int64)
    t0 = int(np.asarray(t).min())
    for th, tm, nd in zip(kt[idx].tolist(), (times - t0).tolist(), kn[idx].tolist(), strict=True):
        out[th].append((tm, int(nd)))
    return out


def findings(results: list[ThreadResult], topo: Topology, shared) -> list[str]:
    """Plain sentences about thread placement, most important first."""
    out = []
    active = [r for r in results if r.samples]
    if topo.n_nodes > 1:
        multi = [r for r in active if len(r.nodes) > 1]
        if multi:
            moves = sum(r.migrations for r in multi)
            out.append(
                f"{len(multi)} thread{'s' if len(multi) != 1 else ''} ran on more than one node "
                f"({moves} node change{'s' if moves != 1 else ''} seen between samples)"
            )
    if len(active) >= 2:
        # threads whose affinity was not recorded are neither bound nor unbound
        unbound = [r for r in active if not r.bound and r.affinity]
        if unbound:
            which = "threads are" if len(unbound) == len(active) else f"{len(unbound)} of {len(active)} threads are"
            out.append(
                f"{which} not bound to cpus: set OMP_PROC_BIND=close (or spread) and "
                "OMP_PLACES=cores, or bind with numactl --physcpubind"
            )
    for cpu, tids in shared:
        out.append(f"threads {', '.join(map(str, tids))} ran mostly on the same cpu {cpu}")
    return out
