"""Where one array of small blocks ends and the next begins, from the code that accesses
them (docs/analyzer.md, "Arrays of many small allocations").

Only some small allocations are recorded (the shim samples them by bytes), so between
the last sampled block of one site and the first of the next site laid out after it
there is a gap whose blocks could be either's; objects._site_fills splits it halfway.
When the two sites are two arrays built one after the other (a multigrid's residual `r`
of one level and the solution `u` of the next), half of a sampling period of the second
array is then counted as the first's, and those samples come from loops that never touch
the first array: the smoother's accesses to `u` read as the end of `r`.

The instructions say where the border is.  An instruction that accesses one array in
the recorded blocks of its site (and the gaps between two of them) votes for that site
in the split gaps; the border moves to where the fewest votes disagree with it, and the
samples in the gap go to the side of the border they are on.  An instruction that
accesses several sites (a routine called on different arrays) does not vote.
"""

from __future__ import annotations

import numpy as np

from numaprof.analyzer import attribution as att

#: An instruction votes for a site when this share of its samples on recorded blocks
#: (and gaps between two blocks of one site) are the site's ...
VOTE_SHARE = 0.9
#: ... and it has at least this many there.
VOTE_MIN = 3
#: The border moves when it puts at least this many more voting samples on their side.
MOVE_MIN = 2


def settle(objs, heap_iv: att.Intervals, a_iv: np.ndarray, a_obj: np.ndarray, a_ip: np.ndarray,
           a_addr: np.ndarray) -> int:
    """Move the border of each gap split halfway between two sites (``Obj.iv_border``) to
    where the accesses put it: ``heap_iv`` (the first layer of the intervals ``a_iv``
    indexes) and the samples' ``a_iv`` / ``a_obj`` are updated in place.  Returns how
    many samples changed object."""
    pairs = [(a, b) for o in objs if o.iv_border for a, b in o.iv_border.items()]
    if not pairs or not len(a_iv):
        return 0
    n_heap = len(heap_iv)
    pair_of = np.full(n_heap, -1, dtype=np.int64)  # heap interval -> its pair
    for k, (a, b) in enumerate(pairs):
        pair_of[a] = pair_of[b] = k
    on_heap = (a_iv >= 0) & (a_iv < n_heap)
    in_half = np.zeros(len(a_iv), dtype=bool)
    in_half[on_heap] = pair_of[a_iv[on_heap]] >= 0
    if not in_half.any():
        return 0
    ips = np.unique(a_ip[in_half])
    # the votes: (instruction, site) counts of the samples on recorded blocks and on the
    # gaps inside one site, for the instructions seen in the split gaps
    sure = on_heap & ~in_half & np.isin(a_ip, ips)
    vip, vobj = a_ip[sure], a_obj[sure].astype(np.int64)
    key = np.searchsorted(ips, vip).astype(np.int64) * (len(objs) + 1) + vobj
    uk, cnt = np.unique(key, return_counts=True)
    k_ip, k_obj = uk // (len(objs) + 1), uk % (len(objs) + 1)
    total = np.bincount(k_ip, weights=cnt, minlength=len(ips))
    strong = (cnt >= VOTE_MIN) & (cnt >= VOTE_SHARE * total[k_ip])
    votes = set(zip(k_ip[strong].tolist(), k_obj[strong].tolist(), strict=True))

    moved = 0
    idx = np.flatnonzero(in_half)
    of = pair_of[a_iv[idx]]
    order = np.argsort(of, kind="stable")
    idx, of = idx[order], of[order]
    cut = np.flatnonzero(np.r_[True, of[1:] != of[:-1], True])
    for lo_k, hi_k in zip(cut[:-1].tolist(), cut[1:].tolist(), strict=True):  # the pairs with samples
        mine = idx[lo_k:hi_k]
        a, b = pairs[int(of[lo_k])]
        first, second = int(heap_iv.obj[a]), int(heap_iv.obj[b])
        ip_i = np.searchsorted(ips, a_ip[mine])
        v = np.array([1 if (i, first) in votes else -1 if (i, second) in votes else 0 for i in ip_i.tolist()],
                     dtype=np.int64)
        lo, mid, hi = int(heap_iv.start[a]), int(heap_iv.end[a]), int(heap_iv.end[b])
        border = _border(a_addr[mine].astype(np.int64), v, lo, mid, hi)
        if border == mid:
            continue
        heap_iv.end[a] = np.uint64(border)
        heap_iv.start[b] = np.uint64(border)
        side = np.where(a_addr[mine].astype(np.int64) < border, a, b)
        new_obj = heap_iv.obj[side].astype(a_obj.dtype)
        moved += int(np.count_nonzero(new_obj != a_obj[mine]))
        a_iv[mine] = side
        a_obj[mine] = new_obj
    return moved


def _border(addr: np.ndarray, vote: np.ndarray, lo: int, mid: int, hi: int) -> int:
    """The border in [lo, hi] (addresses below it: the first site's) that the fewest
    votes (+1 first site, -1 second) disagree with: ``mid`` if it is one of those, else
    the middle of the stretch between votes nearest to it; ``mid`` unless that puts at
    least MOVE_MIN more votes on their side."""
    voted = vote != 0
    x, v = addr[voted], vote[voted]
    if not len(x):
        return mid
    o = np.argsort(x, kind="stable")
    x, v = x[o], v[o]

    # a border in (x[t-1], x[t]] puts the same votes on each side: stretch t; its wrong
    # votes are the second site's below it and the first's from x[t] on
    neg = np.r_[0, np.cumsum(v < 0)]
    pos = np.r_[np.cumsum((v > 0)[::-1])[::-1], 0]
    wrong = neg + pos
    a = np.r_[lo, x + 1]
    b = np.r_[x, hi]
    ok = a <= b
    at = np.where((a <= mid) & (mid <= b), mid, (a + b) // 2)
    best = int(wrong[ok].min())
    cand = np.flatnonzero(ok & (wrong == best))
    where = int(at[cand[np.argmin(np.abs(at[cand] - mid))]])
    t_mid = int(np.searchsorted(x, mid, side="left"))  # mid in (x[t_mid-1], x[t_mid]]
    if int(wrong[t_mid]) - best < MOVE_MIN:
        return mid
    return int(min(max(where, lo), hi))
