"""Per-object access features for the pattern classifier (docs/classifier.md), documented in
docs/analyzer.md.

Input: the object's samples as arrays (time, thread, relative position in the array,
page key).  The run of the object is cut into windows of equal sample counts; inside a
window each thread's accesses are summarised by robust percentiles of its position.
Nothing here decides a pattern — :mod:`numaprof.analyzer.patterns` does — so a trained
model can later consume the same features.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BINS = 16  # spatial histogram bins for the entropy feature
MAX_SAMPLES = 262_144  # samples the features look at (contiguous runs beyond that)
SUBSAMPLE_RUNS = 64
MIN_THREAD_SAMPLES = 2  # samples a thread needs in a window to count as active there
SERIAL_SHARE = 0.9  # one thread with this share of a window's samples makes it serial


@dataclass
class Windows:
    """Per-window summaries; arrays have one entry per window (W) or window×thread."""

    start: np.ndarray  # int64 ns, first sample time of the window
    end: np.ndarray  # int64 ns, last sample time
    samples: np.ndarray  # int64
    parallel: np.ndarray  # bool: ≥ 2 active threads
    span: np.ndarray  # float, median per-thread span (p95 − p5 of position) in the window
    entropy: np.ndarray  # float, median per-thread normalised spatial entropy
    overlap: np.ndarray  # float, mean pairwise overlap of thread ranges
    rank: np.ndarray  # (W, T) normalised rank of each thread's median position, NaN if absent
    distance: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (W, W) mapping distance
    step: np.ndarray = field(default_factory=lambda: np.zeros(0))  # median |step| of a thread's samples
    # runs of serial samples (window −1) and of windows' samples in time order, with the
    # object's sample counts: what the phases are made of
    pieces: dict = field(default_factory=dict)


def _window_ids(n: int, n_threads: int) -> tuple[np.ndarray, int]:
    # Enough windows to see phases, few enough that each thread has ~20 samples per window.
    w = int(np.clip(n // max(20 * n_threads, 1), 2, 16)) if n >= 4 else 1
    return (np.arange(n, dtype=np.int64) * w) // max(n, 1), w


def object_features(
    time: np.ndarray,
    thread: np.ndarray,
    pos: np.ndarray,
    page_key: np.ndarray,
    ip: np.ndarray | None = None,
    length: int = 0,
) -> tuple[dict[str, float], Windows]:
    """Features of one object's samples.

    ``time`` ns, ``thread`` small ints, ``pos`` position in the array in [0, 1),
    ``page_key`` an integer per distinct page (allocation and page), ``ip`` the sampled
    instruction (its loop) when known, ``length`` the array's bytes when every position
    is relative to the same length (what lets a loop be seen along another dimension,
    :func:`_fold`).  Returns the feature dict and the per-window table the phase
    labelling uses.
    """
    n = len(time)
    if ip is None:
        ip = np.zeros(n, dtype=np.uint64)
    if n and np.any(np.diff(time.astype(np.int64)) < 0):
        o = np.argsort(time, kind="stable")
        time, thread, pos, page_key, ip = time[o], thread[o], pos[o], page_key[o], ip[o]
    n_all = n
    all_time = time
    # A sample identical to its thread's previous one on this object (same instruction,
    # same address) says the thread did not run in between: the timer kept firing while
    # it was descheduled (a virtual cpu the host does not run: TCG guests on a loaded
    # host repeat a quarter of their samples).  Repeats carry no new position; they
    # would read as "no step" and hide a random walk.  Real accesses practically never
    # repeat an address one sampling interval later (3 in 18 478 samples here).
    rep = _repeats(thread, pos, ip)
    repeats = int(rep.sum())
    if repeats:
        keep = np.flatnonzero(~rep)
        time, thread, pos, page_key, ip = time[keep], thread[keep], pos[keep], page_key[keep], ip[keep]
        n = len(keep)
    if n > MAX_SAMPLES:
        # Millions of samples say nothing more about the pattern than a few hundred
        # thousand, and cost seconds and gigabytes.  Keep contiguous runs spread over the
        # object's lifetime, so that steps between neighbouring samples stay as recorded.
        run = MAX_SAMPLES // SUBSAMPLE_RUNS
        starts = np.linspace(0, n - run, SUBSAMPLE_RUNS).astype(np.int64)
        keep = (starts[:, None] + np.arange(run)[None, :]).ravel()
        time, thread, pos, page_key, ip = time[keep], thread[keep], pos[keep], page_key[keep], ip[keep]
        n = len(keep)
    uthreads, tl = np.unique(thread, return_inverse=True)
    T = len(uthreads)
    # Serial stretches (one thread alone on the object: initialisation, I/O) are phases of
    # their own and take no part in the windows that decide the pattern.
    serial = _serial_samples(tl, T)
    time_s = time
    par = np.flatnonzero(~serial)
    if len(par) < n:
        time, tl, pos, page_key, ip = time[par], tl[par], pos[par], page_key[par], ip[par]
    n_sub, n = n, len(par)
    wid, W = _window_ids(n, T)
    feats: dict[str, float] = {"samples": float(n_all), "threads": float(T), "windows": float(W),
                               "feature_samples": float(n_sub), "serial_samples": float(n_sub - n),
                               "repeat_samples": float(repeats)}
    if n == 0:
        empty = Windows(*(np.zeros(0) for _ in range(7)), rank=np.zeros((0, 0)))
        empty.pieces = _pieces(np.full(n_sub, -1), time_s, all_time)
        feats.update(parallel_windows=0.0, serial_windows=0.0, parallel_samples=0.0)
        return feats, empty

    # ---- per (window, thread) groups: percentiles of position -----------------------
    g = wid * T + tl
    order = _group_order(g, pos)
    gs, ps = g[order], pos[order]
    starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
    counts = np.diff(np.r_[starts, n])
    gid = gs[starts]
    gw, gt = gid // T, gid % T

    def q(frac):
        return ps[starts + np.floor(frac * (counts - 1)).astype(np.int64)]

    p5, p50, p95 = q(0.05), q(0.5), q(0.95)
    span = p95 - p5
    # spatial entropy of each group, normalised by what its sample count allows
    bins = np.minimum((pos * BINS).astype(np.int64), BINS - 1)
    h = np.bincount(g * BINS + bins, minlength=W * T * BINS).reshape(W * T, BINS)[gid]
    prob = h / counts[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.nansum(np.where(prob > 0, prob * np.log(prob), 0.0), axis=1)
    cap = np.log(np.minimum(counts, BINS).astype(float))
    ent = np.where(cap > 0, ent / np.where(cap > 0, cap, 1), 0.0)

    active = counts >= MIN_THREAD_SAMPLES
    w_samples = np.bincount(wid, minlength=W)
    top_share = np.zeros(W)
    np.maximum.at(top_share, gw, counts / w_samples[gw])
    n_active = np.bincount(gw[active], minlength=W)
    parallel = (n_active >= 2) & (top_share < SERIAL_SHARE)

    # loops that share out another dimension of the array (_contexts): the windows
    # whose threads coincide are seen folded by the row counts those loops use
    in_par = parallel[wid]
    ctx, folds = _contexts(ip, tl, pos, T, in_par, length)
    view = np.zeros(W, dtype=np.int64)
    w_span = np.full(W, np.nan)
    w_ent = np.full(W, np.nan)
    w_ovl = np.full(W, np.nan)
    rank = np.full((W, T), np.nan)
    for w in range(W):
        m = (gw == w) & active
        if not m.any():
            m = gw == w
        if not m.any():
            continue
        lo, hi, mid, th = p5[m], p95[m], p50[m], gt[m]
        k = len(lo)
        if k >= 2:
            w_ovl[w] = _pair_overlap(lo, hi)
            if w_ovl[w] >= FOLD_TRIED and len(folds) and counts[m].min() >= FOLD_MIN_SAMPLES:
                idx, who = _members(starts[m], counts[m])
                folded = _fold(ps[idx], who, k, folds)
                if folded is not None:
                    view[w], (lo, mid, hi) = folded
                    w_ovl[w] = _pair_overlap(lo, hi)
                    span[np.flatnonzero(m)] = hi - lo
        w_span[w] = np.median(span[m])
        w_ent[w] = np.median(ent[m])
        if k >= 2:
            r = np.argsort(np.argsort(mid, kind="stable"), kind="stable")
            rank[w, th] = r / (k - 1)

    # ---- stability of the thread → block mapping across parallel windows -------------
    pw = np.flatnonzero(parallel)
    R = rank[pw]
    both = ~np.isnan(R[:, None, :]) & ~np.isnan(R[None, :, :])
    diff = np.where(both, np.abs(np.nan_to_num(R[:, None, :]) - np.nan_to_num(R[None, :, :])), 0.0)
    nboth = both.sum(axis=2)
    dist = np.where(nboth >= 2, diff.sum(axis=2) / np.maximum(nboth, 1), np.nan)
    # windows seen along different dimensions give the threads different parts
    dist = np.where((view[pw][:, None] != view[pw][None, :]) & (nboth >= 2), 1.0, dist)
    full = np.full((W, W), np.nan)
    if len(pw):
        full[np.ix_(pw, pw)] = dist
    iu = np.triu_indices(len(pw), 1)
    pair_d = dist[iu] if len(pw) >= 2 else np.zeros(0)
    pair_d = pair_d[~np.isnan(pair_d)]
    consec = np.array([full[a, b] for a, b in zip(pw[:-1], pw[1:], strict=True)]) if len(pw) >= 2 else np.zeros(0)
    consec = consec[~np.isnan(consec)]

    # ---- page sharing and sequentiality (whole parallel part) -------------------------
    if in_par.any():
        pk, pt = page_key[in_par], tl[in_par]
        pairs = np.unique(pk.astype(np.uint64) * np.uint64(max(T, 1)) + pt.astype(np.uint64))
        per_page = np.unique(pairs // np.uint64(max(T, 1)), return_counts=True)[1]
        sharing = float(np.mean(per_page > 1))
        sharing_deg = float(np.mean(per_page))
    else:
        sharing, sharing_deg = 0.0, 0.0
    # steps between a thread's consecutive samples: independent positions under random
    # access (median |step| = 1 − 1/√2 ≈ 0.29), short steps inside a sweep or a chunk
    # samples are in time order: a stable sort by thread keeps it inside each thread
    o = np.argsort(tl.astype(np.int16) if T < 2**15 else tl, kind="stable")
    same = (tl[o][1:] == tl[o][:-1]) & in_par[o][1:] & in_par[o][:-1]
    d = np.diff(pos[o])[same]
    small_stride = float(np.mean(np.abs(d) < 1.0 / 64)) if len(d) else 0.0
    forward = float(np.mean((d >= 0) & (d < 1.0 / 64))) if len(d) else 0.0
    step_w = wid[o][1:][same]
    w_step = np.full(W, np.nan)
    if len(d):
        ad = np.abs(d)
        for w in np.unique(step_w).tolist():
            w_step[w] = np.median(ad[step_w == w])

    # consecutive samples of *different* threads: close positions mean the threads move
    # through the array together (dynamic scheduling hands out neighbouring chunks)
    cross = (tl[1:] != tl[:-1]) & in_par[1:] & in_par[:-1]
    cross_step = float(np.median(np.abs(np.diff(pos))[cross])) if cross.any() else 1.0

    par_groups = parallel[gw] & active

    def med(x):
        return float(np.median(x)) if len(x) else 0.0

    feats.update(
        parallel_windows=float(len(pw)),
        serial_windows=float(W - len(pw)),
        parallel_samples=float(in_par.sum()),
        span_median=med(span[par_groups]),
        span_p90=float(np.quantile(span[par_groups], 0.9)) if par_groups.any() else 0.0,
        entropy_median=med(ent[par_groups]),
        overlap_median=med(w_ovl[pw][~np.isnan(w_ovl[pw])]) if len(pw) else 0.0,
        instability=float(pair_d.mean()) if len(pair_d) else 0.0,
        instability_consecutive=float(consec.mean()) if len(consec) else 0.0,
        instability_max=float(pair_d.max()) if len(pair_d) else 0.0,
        window_pairs=float(len(pair_d)),
        page_sharing=sharing,
        threads_per_page=sharing_deg,
        small_stride=small_stride,
        forward_stride=forward,
        step_median=float(np.median(np.abs(d))) if len(d) else 0.0,
        step_pairs=float(len(d)),
        cross_step_median=cross_step,
        cross_pairs=float(cross.sum()),
        **ctx,
    )
    t64 = time.astype(np.int64)
    w_start = np.full(W, 0, dtype=np.int64)
    w_end = np.full(W, 0, dtype=np.int64)
    firsts = np.searchsorted(wid, np.arange(W))
    lasts = np.searchsorted(wid, np.arange(W), side="right") - 1
    ok = lasts >= firsts
    w_start[ok], w_end[ok] = t64[firsts[ok]], t64[lasts[ok]]
    out = Windows(w_start, w_end, w_samples, parallel, w_span, w_ent, w_ovl, rank, full, w_step)
    wid_all = np.full(n_sub, -1, dtype=np.int64)
    wid_all[par] = wid
    out.pieces = _pieces(wid_all, time_s, all_time)
    return feats, out


def _repeats(thread: np.ndarray, pos: np.ndarray, ip: np.ndarray) -> np.ndarray:
    """Samples (in time order) equal to the previous sample of the same thread: same
    position and instruction."""
    n = len(thread)
    out = np.zeros(n, dtype=bool)
    if n < 2:
        return out
    o = np.argsort(thread, kind="stable")  # time order kept inside each thread
    t, p, i = thread[o], pos[o], ip[o]
    out[o[1:]] = (t[1:] == t[:-1]) & (p[1:] == p[:-1]) & (i[1:] == i[:-1])
    return out


SERIAL_HALF = 10  # half-width (samples) of the neighbourhood that tells serial stretches


def _serial_samples(tl: np.ndarray, T: int) -> np.ndarray:
    """Samples in a serial stretch: some run of 2·10+1 consecutive samples (in time)
    that holds them has ≥ 90 % of its samples from their thread.  With two threads or
    more sharing the object, chance alone practically never gives such a run.  Any run
    that holds them, not only the one centred on them: the last samples of a serial
    stretch have the next parallel loop's samples on one side, and if they counted as
    parallel the thread that ran alone would seem to cover the whole array in the first
    parallel window (examples/gather: the index array written serially, then read by
    each thread in its half, called irregular)."""
    n = len(tl)
    if T < 2:
        return np.ones(n, dtype=bool)
    k = min(2 * SERIAL_HALF + 1, n)
    out = np.zeros(n, dtype=bool)
    for t in np.unique(tl).tolist():
        mine = tl == t
        c = np.concatenate([[0], np.cumsum(mine)])
        ok = (c[k:] - c[:-k]) >= SERIAL_SHARE * k  # the run of k starting at each index
        # covered: some qualifying run starts in [i − k + 1, i]
        q = np.concatenate([[0], np.cumsum(ok)])
        i = np.arange(n)
        lo = np.clip(i - k + 1, 0, len(ok))
        hi = np.clip(i + 1, 0, len(ok))
        out |= mine & (q[hi] - q[lo] > 0)
    return out


def _pieces(wid_all: np.ndarray, time: np.ndarray, all_time: np.ndarray) -> dict[str, np.ndarray]:
    """Consecutive runs (in time) of serial samples (−1) or of one window's samples, with
    their time range and the number of the object's samples in it."""
    n = len(wid_all)
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return {"window": z, "start": z, "end": z, "samples": z}
    first = np.flatnonzero(np.r_[True, wid_all[1:] != wid_all[:-1]])
    last = np.r_[first[1:] - 1, n - 1]
    t64 = time.astype(np.int64)
    start, end = t64[first], t64[last]
    if len(all_time) == n:
        samples = last - first + 1
    else:  # a subsample: count the object's samples in each piece's time range
        cut = np.searchsorted(all_time, start[1:].astype(all_time.dtype))
        samples = np.diff(np.concatenate([[0], cut, [len(all_time)]]))
    return {"window": wid_all[first], "start": start, "end": end, "samples": samples}


MIN_CONTEXT_SAMPLES = 10


def _group_order(g: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Order by group, then position: one float sort instead of a two-key lexsort (pos
    is in [0, 1), so group + pos keeps groups apart; 3-4x faster on millions)."""
    return np.argsort(g + np.minimum(pos, 0.9999999), kind="quicksort")


def _contexts(ip, tl, pos, T, in_par, length: int = 0) -> tuple[dict[str, float], np.ndarray]:
    """Features per code context (the sampled instruction, i.e. the loop).

    A loop run backwards and a loop run forwards touch the same array with a different
    thread ↔ block mapping; when they alternate faster than a time window they can only
    be told apart by the instruction that made the access.  Per context: the overlap of
    the threads' ranges (disjoint under a static partition, coinciding under random
    access) and the thread ranks, compared between contexts.

    A loop that shares out the other dimension of a 2-D array (rows of a column-major
    array, a transpose) gives every thread a slice of every column: its range is the
    whole array, as under random access.  Where the threads' ranges coincide, the
    positions are also seen folded by a row length (:func:`_fold`); a context whose
    threads are disjoint folded is structured along that dimension, and two contexts
    structured along different dimensions give their threads different parts of the
    array (rank distance 1).  Returns the features and the row counts the folded
    contexts use.
    """
    out = {"contexts": 0.0, "context_overlap": 0.0, "context_span": 0.0, "context_instability": 0.0,
           "folded_contexts": 0.0, "folded_samples": 0.0}
    none = np.zeros(0, dtype=np.int64)
    sel = np.flatnonzero(in_par)
    if len(sel) == 0 or T < 2:
        return out, none
    uip, ci = np.unique(ip[sel], return_inverse=True)
    C = len(uip)
    g = ci.astype(np.int64) * T + tl[sel]
    p = pos[sel]
    order = _group_order(g, p)
    gs, ps = g[order], p[order]
    starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
    counts = np.diff(np.r_[starts, len(gs)])
    gid = gs[starts]
    gc, gt = gid // T, gid % T

    def q(frac):
        return ps[starts + np.floor(frac * (counts - 1)).astype(np.int64)]

    lo, mid, hi = q(0.05), q(0.5), q(0.95)
    ok = counts >= 3
    ranks = np.full((C, T), np.nan)
    view = np.zeros(C, dtype=np.int64)  # 0: positions as they are, k: folded by length / k
    ovl, spans, weights = [], [], []
    ks = _fold_candidates(length)
    for c in np.unique(gc[ok]).tolist():
        m = ok & (gc == c)
        k = int(m.sum())
        n_c = int(counts[m].sum())
        if k < 2 or n_c < MIN_CONTEXT_SAMPLES:
            continue
        a, b, md = lo[m], hi[m], mid[m]
        o = _pair_overlap(a, b)
        if o >= FOLD_TRIED and len(ks) and counts[m].min() >= FOLD_MIN_SAMPLES:
            idx, who = _members(starts[m], counts[m])
            folded = _fold(ps[idx], who, k, ks)
            if folded is not None:
                view[c], (a, md, b) = folded
                o = _pair_overlap(a, b)
                out["folded_contexts"] += 1
                out["folded_samples"] += n_c
        ovl.append(o)
        spans.append(float(np.median(b - a)))
        weights.append(n_c)
        r = np.argsort(np.argsort(md, kind="stable"), kind="stable")
        ranks[c, gt[m]] = r / (k - 1)
    if not weights:
        return out, none
    w = np.asarray(weights, dtype=float)
    out["contexts"] = float(len(weights))
    out["context_overlap"] = float(np.average(ovl, weights=w))
    out["context_span"] = float(np.average(spans, weights=w))
    used = np.flatnonzero(~np.isnan(ranks).all(axis=1))
    dists, dw = [], []
    cn = np.bincount(gc, weights=counts, minlength=C)
    for i, a in enumerate(used.tolist()):
        for b in used[i + 1 :].tolist():
            both = ~np.isnan(ranks[a]) & ~np.isnan(ranks[b])
            if both.sum() >= 2:
                same = view[a] == view[b]
                dists.append(float(np.abs(ranks[a, both] - ranks[b, both]).mean()) if same else 1.0)
                dw.append(min(cn[a], cn[b]))
    if dists:
        out["context_instability"] = float(np.average(dists, weights=dw))
    return out, np.unique(view[view > 0])


# Folding a context's positions by a row length (:func:`_fold`).
FOLD_TRIED = 0.5  # threads' ranges overlapping at least this much are tried folded
FOLD_DISJOINT = 0.1  # ... and are structured along a row when they overlap at most this folded
FOLD_MIN_SAMPLES = 16  # every thread's samples in the context, so that chance cannot separate them
FOLD_MIN_ROW = 1024  # bytes of a row: shorter "rows" are records, not a dimension
FOLD_MAX_ROWS = 1 << 20  # row counts tried: a million columns (an array of ≥ 1 GiB)
FOLD_MAX_SAMPLES = 256  # a thread's samples looked at per context (evenly spaced in position order)


def _fold_candidates(length: int) -> np.ndarray:
    """Row counts k (at most FOLD_MAX_ROWS) that cut ``length`` bytes into k rows of
    equal whole length, each a multiple of 4 bytes and at least FOLD_MIN_ROW."""
    if length < 2 * FOLD_MIN_ROW:
        return np.zeros(0, dtype=np.int64)
    ks = np.arange(2, min(length // FOLD_MIN_ROW, FOLD_MAX_ROWS) + 1, dtype=np.int64)
    return ks[(length % ks == 0) & ((length // ks) % 4 == 0)]


def _members(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the groups' members (each group a run starting at ``starts``), at most
    FOLD_MAX_SAMPLES of each, evenly spaced; and each one's group number."""
    picks = [s + np.unique(np.linspace(0, c - 1, min(c, FOLD_MAX_SAMPLES)).astype(np.int64))
             for s, c in zip(starts.tolist(), counts.tolist(), strict=True)]
    return np.concatenate(picks), np.repeat(np.arange(len(picks)), [len(x) for x in picks])


def _fold(p: np.ndarray, who: np.ndarray, k: int, ks: np.ndarray):
    """The row count under which the ``k`` threads' positions (``p``, thread index
    ``who``) are most disjoint, with each thread's 5 %, 50 % and 95 % folded position;
    None when no row count makes them disjoint (overlap ≤ FOLD_DISJOINT).

    Folded by k rows, a position is its place inside its row, (p · k) mod 1: a thread
    that owns rows i0..i1 of every column of a column-major array is one band there."""
    if len(np.unique(who)) < k:
        return None
    f = np.mod(p[None, :] * ks[:, None], 1.0)
    qs = np.stack([np.quantile(f[:, who == t], [0.05, 0.5, 0.95], axis=1, method="lower") for t in range(k)],
                  axis=2)  # (3, candidates, threads)
    o = _pair_overlap(qs[0], qs[2])
    best = int(np.argmin(o))
    if o[best] > FOLD_DISJOINT:
        return None
    return int(ks[best]), (qs[0, best], qs[1, best], qs[2, best])


def _pair_overlap(a: np.ndarray, b: np.ndarray):
    """Mean pairwise overlap (intersection over union) of the ranges [a, b] along the
    last axis: a float for one set of ranges, an array for a stack of them."""
    k = a.shape[-1]
    a1, a2, b1, b2 = a[..., :, None], a[..., None, :], b[..., :, None], b[..., None, :]
    inter = np.clip(np.minimum(b1, b2) - np.maximum(a1, a2), 0, None)
    union = np.maximum(b1, b2) - np.minimum(a1, a2)
    iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 1.0)
    out = (iou.sum(axis=(-2, -1)) - k) / (k * (k - 1))
    return float(out) if np.ndim(out) == 0 else out
