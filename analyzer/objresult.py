"""One object's result from its samples: where each sample falls in the object (its
instances laid out as the logical arrays they are), its read/write mix, traffic between
nodes, pages by node, pattern and first touch (model.ObjectResult)."""

from __future__ import annotations

import numpy as np

from numaprof.analyzer import classifier, patterns
from numaprof.analyzer import features as feat
from numaprof.analyzer import sharing as sharing_
from numaprof.analyzer.firsttouch import first_touch_of
from numaprof.analyzer.model import ObjectAccess, ObjectResult
from numaprof.analyzer.objects import Obj


def count_of(mask: np.ndarray, a_count: np.ndarray | None) -> int:
    """Samples of a mask over the analysed samples: each stands for its ``a_count``."""
    if a_count is None:
        return int(np.count_nonzero(mask))
    return int(round(float(a_count[mask].sum())))


def traffic_stats(t: np.ndarray) -> tuple[float, list[float], float]:
    total = float(t.sum())
    if total <= 0:
        return 0.0, [0.0] * len(t), 0.0
    load = t.sum(axis=0) / total
    return float(np.trace(t) / total), [float(x) for x in load], float(load.max() / load.mean())


def instance_positions(o: Obj, addr, a_iv, members, ivs, page: int):
    """(position in [0, 1), page, instance, pages of the largest instance) of samples on
    an array of many small blocks: per instance (objects._instances), offsets in the
    logical array of that instance's blocks and gaps.  A sample on no interval of the
    array (named by code and joined to it) takes the instance whose address span holds
    it, else the whole array as one more instance."""
    inst_of = o.iv_instance or {}
    m_inst = np.array([inst_of.get(int(k), -1) for k in members.tolist()], dtype=np.int64)
    s_inst = np.array([inst_of.get(int(k), -1) for k in a_iv.tolist()], dtype=np.int64)
    ids = np.unique(m_inst[m_inst >= 0])
    spans = [(int(ivs.start[members[m_inst == u]].min()), int(ivs.end[members[m_inst == u]].max()))
             for u in ids.tolist()]
    for k in np.flatnonzero(s_inst < 0).tolist():
        a = int(addr[k])
        s_inst[k] = next((int(u) for u, (lo, hi) in zip(ids.tolist(), spans, strict=True) if lo <= a < hi),
                         int(ids.max(initial=-1)) + 1)
    pos = np.zeros(len(addr), dtype=np.float64)
    pg = np.zeros(len(addr), dtype=np.int64)
    largest = 0
    shift = page.bit_length() - 1
    known = set(ids.tolist())
    for u in sorted(known | set(np.unique(s_inst).tolist())):
        mine = np.flatnonzero(s_inst == u)
        mem = members[m_inst == u] if u in known else members
        off, total = logical_offsets(addr[mine], ivs.start[mem], ivs.end[mem])
        pos[mine] = np.minimum(off / max(total, 1), np.nextafter(1.0, 0))
        pg[mine] = off >> shift
        if u in known:
            largest = max(largest, total)
    return pos, pg, s_inst, max(1, -(-largest // page))


def logical_offsets(addr: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, int]:
    """Offsets of ``addr`` in the logical array made of the address ranges [start, end)
    (merged where they overlap, at any time) laid end to end in address order, and that
    array's length: how an array built from many small blocks is seen as one."""
    order = np.argsort(start, kind="stable")
    st, en = start[order].astype(np.int64), end[order].astype(np.int64)
    # merge: a range starts a new run where it begins past every earlier range's end
    run_end = np.maximum.accumulate(en)
    new = np.ones(len(st), dtype=bool)
    new[1:] = st[1:] > run_end[:-1]
    r_start = st[new]
    r_end = np.maximum.reduceat(en, np.flatnonzero(new)) if len(st) else en
    before = np.concatenate([[0], np.cumsum(r_end - r_start)])
    a = addr.astype(np.int64)
    k = np.clip(np.searchsorted(r_start, a, side="right") - 1, 0, max(len(r_start) - 1, 0))
    off = before[k] + np.clip(a - r_start[k], 0, None) if len(r_start) else np.zeros(len(a), dtype=np.int64)
    return off.astype(np.int64), int(before[-1])


def object_result(o: Obj, oi, idx, a_addr, a_ip, a_time, a_tidx, a_trow, a_prow, a_access, a_weight, a_count,
                   a_iv, ivs, N, page, with_address, ft, ft_rows, inferred, kernel, topo, node_index, threads, resolver,
                   n_program_threads, t_origin, pn_index, members, alloc_times) -> ObjectResult:
    n = len(idx)  # samples analysed; ``count`` the samples they stand for
    count = n if a_count is None else int(round(float(a_count[idx].sum())))
    iv = a_iv[idx]
    shift = np.uint64(page.bit_length() - 1)
    length = 0  # the bytes every position is relative to, when they are all the same
    if o.sample_period:
        # an array of many small blocks: each instance one logical array, its blocks in
        # address order
        pos, pg, iv, n_pages = instance_positions(o, a_addr[idx], a_iv[idx], members, ivs, page)
    else:
        off = (a_addr[idx] - ivs.start[iv]).astype(np.int64)
        span = (ivs.end[iv] - ivs.start[iv]).astype(np.float64)
        if n and np.all(span == span[0]):
            length = int(span[0])
        pos = np.minimum(off / np.maximum(span, 1), np.nextafter(1.0, 0))
        # page numbers as the kernel sees them (an allocation rarely starts on a page
        # boundary): what first touch, move_pages and the recommender's policies act on
        pg = ((a_addr[idx] >> shift) - (ivs.start[iv] >> shift)).astype(np.int64)
    acc = a_access[idx]
    known_acc = np.count_nonzero(acc)
    reads = float(np.count_nonzero(acc == 1) / known_acc) if known_acc else 0.0
    stores = float(np.count_nonzero(acc == 2) / known_acc) if known_acc else 0.0
    rmw = float(np.count_nonzero(acc == 3) / known_acc) if known_acc else 0.0
    w = a_weight[idx] if a_weight is not None else None
    trow, prow = a_trow[idx], a_prow[idx]
    known = (trow >= 0) & (prow >= 0)
    traffic = np.bincount(trow[known].astype(np.int64) * N + prow[known], weights=None if w is None else w[known],
                          minlength=N * N).reshape(N, N)
    local, load, imb = traffic_stats(traffic)
    # pages per node: the kernel's answer for the whole object (numa_maps, or move_pages
    # at its release or at exit), else the located pages, else the nodes of the first
    # touches (right only under the default policy)
    if kernel is not None:
        pages_by_node, pages_source = [int(x) for x in kernel.counts], kernel.source
    else:
        pages_by_node, pages_source = [int(x) for x in pn_index.pages(members, ivs, page)], "move_pages"
    page_key = iv.astype(np.int64) * (1 << 36) + pg
    features, windows = feat.object_features(a_time[idx], a_tidx[idx], pos, page_key, a_ip[idx], length)
    private = o.thread_private or (o.kind == "heap" and private_instances(iv, a_tidx[idx]))
    n_threads = len(np.unique(a_tidx[idx]))
    if (private or n_threads == 1) and not o.sample_period and n and \
            _widest_instance(o, ivs, iv) <= CACHE_LINE:
        pattern, conf = "regular", 1.0  # see _widest_instance
    else:
        pattern, conf = patterns.classify(features)
    needed = classifier.samples_needed(features, pattern)
    first_touch = first_touch_of(oi, ft, topo, n_program_threads, resolver)
    if kernel is None and first_touch.pages and (
            sum(pages_by_node) == 0 or (N == 1 and first_touch.pages > sum(pages_by_node))):
        lo, hi = np.searchsorted(ft.obj, oi), np.searchsorted(ft.obj, oi, side="right")
        rows = ft_rows[lo:hi]
        pages_by_node = [int(x) for x in np.bincount(rows[rows >= 0], minlength=N)[:N]]
        pages_source = "first_touch"
    if sum(pages_by_node) == 0:
        pages_source = "none"
    if not o.sample_period:
        spans = ivs.pages(members, page.bit_length() - 1)
        n_pages = max(1, int(spans.max()) if len(members) else -(-int(o.size) // page))
    access = ObjectAccess(page=pg.astype(np.int64), thread=a_tidx[idx].astype(np.int32),
                          # unweighted samples share one read-only 1.0 instead of n copies
                          weight=w if w is not None else np.broadcast_to(np.float64(1.0), (n,)),
                          write=acc >= 2, n_pages=n_pages,
                          time=(a_time[idx] - np.uint64(t_origin)).astype(np.int64))
    return ObjectResult(
        name=o.name or f"{o.kind}@{o.address:#x}",
        site=o.site,
        kind=o.kind,
        address=int(o.address),
        size=int(o.size),
        samples=count,
        share=count / with_address if with_address else 0.0,
        pattern=pattern,
        pattern_confidence=conf,
        samples_needed=needed,
        pattern_tentative=classifier.tentative(pattern, features),
        reads=reads,
        writes=stores + rmw,
        rmw=rmw,
        first_touch=first_touch,
        pages_by_node=pages_by_node,
        traffic=traffic,
        local_fraction=local,
        load_per_node=load,
        imbalance=imb,
        count=o.count,
        threads=n_threads,
        phases=patterns.phases(windows, t_origin, pattern),
        features=features,
        access=access,
        unplaced_samples=count_of(~known, None if a_count is None else a_count[idx]),
        inferred_samples=count_of(inferred[idx], None if a_count is None else a_count[idx]),
        pages_source=pages_source,
        alloc_time=(int(np.min(np.asarray(alloc_times)[o.alloc_rows]))
                    if o.alloc_rows else 0),
        pages_policy=kernel.policy if kernel is not None else "",
        pages_policy_mixed=kernel.mixed if kernel is not None else False,
        attribution=o.attribution,
        thread_private=private,
        read_only=o.read_only,
        pid=int(o.pid),
    )


#: Bytes of a cache line (x86): an instance no wider has one line to be accessed in.
CACHE_LINE = 64


def _widest_instance(o: Obj, ivs, iv: np.ndarray) -> int:
    """The bytes of the widest sampled instance of `o` (its size when that is larger).

    A thread-private object whose instances are each within a cache line is regular by
    the patterns' definitions (docs/classifier.md "Thread-private scalars"): each
    instance is one thread's in every phase, so which thread touches which part never
    changes, and an access within one line cannot spread over the object.  So is such an
    object only one thread accessed (a global `int cols` the main thread reloads around
    each `rand()` of a serial fill): it too is one thread's in every phase.  Such objects
    are the scalars and small structs a compiler keeps in the frame (a local `double`
    whose address is taken, `x1` of a shape-function loop), sampled a few dozen times
    each: the model, trained on arrays of megabytes, has nothing to tell them apart by,
    and their `unknown` hid nothing a user could act on."""
    widest = int(np.max(ivs.end[iv] - ivs.start[iv])) if len(iv) else 0
    return max(widest, int(o.size))


#: Share of a heap site's samples that must be on the one thread using each instance.
PRIVATE_PURITY = 0.95
PRIVATE_MIN_SAMPLES = 20


def private_instances(instance: np.ndarray, thread: np.ndarray) -> bool:
    """Whether a heap site's instances are each one thread's: a buffer every thread
    allocates for itself (`std::vector<double> local(n)` inside a parallel region), the
    instances of two threads or more, and each instance's samples from one thread
    (PRIVATE_PURITY of them).  Its pages are placed by the thread that uses them under
    first touch; a spreading policy would make them remote.  Only instances sampled
    twice or more say whose they are: the nodes of a shared tree, each sampled once by
    whichever thread walked it then, are each "one thread's" by chance."""
    if len(np.unique(thread)) < 2:
        return False
    inst, inv, per = np.unique(instance, return_inverse=True, return_counts=True)
    seen = per[inv] >= 2
    instance, thread = instance[seen], thread[seen]
    n = len(instance)
    if n < PRIVATE_MIN_SAMPLES:
        return False
    inst, inv = np.unique(instance, return_inverse=True)
    if len(inst) < 2:
        return False
    pairs, counts = sharing_.unique_pairs(inv, thread, counts=True)
    top = np.zeros(len(inst), dtype=np.int64)
    owner = np.full(len(inst), -1, dtype=np.int64)
    for (k, t), c in zip(pairs.T.tolist(), counts.tolist(), strict=True):
        if c > top[k]:
            top[k], owner[k] = c, t
    return bool(top.sum() >= PRIVATE_PURITY * n and len(np.unique(owner)) >= 2)
