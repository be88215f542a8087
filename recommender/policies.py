"""The page→node maps of every placement policy (docs/recommender.md), defined once, vectorised.

Definitions follow MAi (Pousa Ribeiro et al. 2009, §II-A; Pousa Ribeiro et al. 2010,
Table 5).  Pages are numbered from 0 inside the array; ``nodes`` is the ordered set of M
memory nodes the policy may use and the result holds, per page, an entry of ``nodes``.
The C runtime ``collector/include/numaprof_place.h`` implements the same formulas; keep
the two in step (docs/recommender.md has the exact definitions).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Default block size, in pages, of cyclic_block and random_block (64 KiB of 4 KiB pages).
DEFAULT_BLOCK_PAGES = 16

#: The policies of docs/recommender.md plus the ``parallel_init`` pseudo-policy.
POLICIES = (
    "first_touch",
    "bind_all",
    "bind_block",
    "cyclic",
    "cyclic_block",
    "skew_mapp",
    "prime_mapp",
    "random",
    "random_block",
    "weighted_interleave",
    "parallel_init",
)

_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_MIX1 = _U64(0xBF58476D1CE4E5B9)
_MIX2 = _U64(0x94D049BB133111EB)


def smallest_prime_at_least(m: int) -> int:
    """The smallest prime P >= m (prime_mapp's number of virtual nodes)."""
    p = max(2, int(m))
    while any(p % d == 0 for d in range(2, int(p**0.5) + 1)):
        p += 1
    return p


def splitmix64(seed: int, index: np.ndarray) -> np.ndarray:
    """The ``index``-th output (0-based) of splitmix64 started at ``seed``, vectorised.

    Used by random / random_block so that Python and C draw the same node per page.
    """
    with np.errstate(over="ignore"):
        z = _U64(seed & 0xFFFFFFFFFFFFFFFF) + (np.asarray(index, dtype=_U64) + _U64(1)) * _GOLDEN
        z = (z ^ (z >> _U64(30))) * _MIX1
        z = (z ^ (z >> _U64(27))) * _MIX2
        return z ^ (z >> _U64(31))


def static_schedule_owner(n_items: int, n_threads: int, items: np.ndarray | None = None) -> np.ndarray:
    """Thread owning each item under OpenMP ``schedule(static)`` without a chunk size.

    Thread k gets one contiguous block; the first ``n_items % n_threads`` threads get one
    item more (libgomp's split).  ``items``: only these item indexes (default all).
    """
    if n_threads <= 0:
        raise ValueError("static schedule needs at least one thread")
    q, r = divmod(n_items, n_threads)
    k = np.arange(n_threads)
    starts = k * q + np.minimum(k, r)
    i = np.arange(n_items) if items is None else np.asarray(items, dtype=np.int64)
    return np.searchsorted(starts, i, side="right") - 1


def frame_toucher(n_pages: int, n_threads: int, items: np.ndarray, frame_pages: int,
                  first_page: int) -> np.ndarray:
    """Thread that first touches each item's page when the static schedule's threads
    first-touch an array backed by huge pages of ``frame_pages`` base pages.

    A fault maps the whole aligned frame at the first toucher's node (the kernel's
    transparent huge pages).  The threads start their blocks together and go up at one
    pace, so a frame in which a block starts is the first touched by that block's thread
    (at its start), whoever owns the frame's other pages; any other frame by its own
    pages' owner.  Frames that reach past the array's ends are taken as base pages: a
    huge page needs the aligned 2 MiB inside the mapping, which an array's own mapping
    (a large malloc's) does not hold there.
    """
    i = np.asarray(items, dtype=np.int64)
    owner = static_schedule_owner(n_pages, n_threads, i)
    q, r = divmod(n_pages, n_threads)
    k = np.arange(n_threads)
    starts = k * q + np.minimum(k, r)
    f0 = (first_page + i) // frame_pages * frame_pages - first_page  # the frame's first page
    f1 = f0 + frame_pages
    whole = (f0 >= 0) & (f1 <= n_pages)
    lo = np.minimum(np.searchsorted(starts, np.maximum(f0, 0), side="left"), n_threads - 1)
    first = np.where((starts[lo] >= f0) & (starts[lo] < f1), starts[lo], np.maximum(f0, 0))
    toucher = static_schedule_owner(n_pages, n_threads, np.minimum(first, max(n_pages - 1, 0)))
    return np.where(whole, toucher, owner)


def _bind_all(i: np.ndarray, nodes: np.ndarray, capacity_pages) -> np.ndarray:
    if capacity_pages is None:
        return np.full(len(i), nodes[0], dtype=np.int64)
    cap = np.asarray(capacity_pages, dtype=np.int64)
    if cap.shape != nodes.shape:
        raise ValueError("bind_all: capacity_pages needs one entry per node")
    ends = np.cumsum(cap)
    which = np.searchsorted(ends, i, side="right")
    # Pages beyond the total capacity stay on the last node (the kernel would fail or
    # fall back; the prediction keeps them somewhere visible).
    return nodes[np.minimum(which, len(nodes) - 1)]


def _weighted(i: np.ndarray, nodes: np.ndarray, weights) -> np.ndarray:
    w = np.ones(len(nodes), dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
    if w.shape != nodes.shape or (w <= 0).any():
        raise ValueError("weighted_interleave: one positive integer weight per node")
    # Linux weighted_interleave_nid(): offset mod total weight, walk the cumulated weights.
    ends = np.cumsum(w)
    return nodes[np.searchsorted(ends, i % int(ends[-1]), side="right")]


#: Largest weight ``bandwidth_weights`` uses (the kernel accepts 1..255 per node; small
#: weights keep the interleave rounds short, so every stretch of the array is balanced).
MAX_WEIGHT = 16


def bandwidth_weights(bandwidth: Sequence[float], *, tolerance: float = 0.05,
                      max_weight: int = MAX_WEIGHT) -> list[int]:
    """Small positive integer weights proportional to ``bandwidth`` (weighted_interleave).

    The smallest W = 1, 2, ... ``max_weight`` such that weights round(b_j / max(b) * W)
    (at least 1) give every node a share of the pages within ``tolerance`` (relative) of
    its share of the bandwidth; W = ``max_weight`` if none does.  30 and 10 GB/s give
    [3, 1]; 20 and 12 give [5, 3]; equal bandwidths give all 1 (plain interleave).
    """
    b = np.asarray(list(bandwidth), dtype=float)
    if not len(b) or not np.all(np.isfinite(b)) or (b <= 0).any():
        raise ValueError("bandwidth_weights: one positive bandwidth per node")
    want = b / b.sum()
    w = np.ones(len(b), dtype=np.int64)
    for top in range(1, max(1, int(max_weight)) + 1):
        w = np.maximum(1, np.rint(b / b.max() * top)).astype(np.int64)
        if np.all(np.abs(w / w.sum() - want) <= tolerance * want):
            break
    g = int(np.gcd.reduce(w))
    return [int(x) // g for x in w]


def node_of_page(
    policy: str,
    n_pages: int,
    nodes: Sequence[int],
    *,
    threads_nodes: Sequence[int] | None = None,
    first_touch_nodes: Sequence[int] | np.ndarray | None = None,
    block_pages: int = DEFAULT_BLOCK_PAGES,
    seed: int = 0,
    weights: Sequence[int] | None = None,
    capacity_pages: Sequence[int] | None = None,
    pages: np.ndarray | None = None,
    frame_pages: int = 1,
    first_page: int = 0,
) -> np.ndarray:
    """Node of every page 0..n_pages-1 of an array placed with ``policy``.

    - ``nodes``: the M memory nodes the policy uses, in order.
    - ``threads_nodes``: node of each compute thread in OpenMP thread-number order
      (bind_block, parallel_init: block k of the static schedule goes to thread k's node).
    - ``first_touch_nodes``: node of the thread that first wrote each page (first_touch).
    - ``block_pages``: B of cyclic_block / random_block.
    - ``seed``: random / random_block (splitmix64 stream, identical in the C runtime).
    - ``weights``: per-node integer weights of weighted_interleave (default all 1).
    - ``capacity_pages``: pages each node can hold for bind_all (default: unlimited, so
      every page goes to the first node).
    - ``pages``: evaluate only these page indexes (default 0..n_pages-1); every map is a
      function of the page index alone, so a huge array's sampled pages cost no more.
    - ``frame_pages``, ``first_page``: parallel_init on transparent huge pages of
      ``frame_pages`` base pages each, the array's page 0 being the address space's page
      ``first_page`` (:func:`frame_toucher`).
    Returns an int64 array of node ids, one per page asked for.
    """
    n_pages = int(n_pages)
    if n_pages < 0:
        raise ValueError("n_pages must be >= 0")
    nodes_a = np.asarray(list(nodes), dtype=np.int64)
    m = len(nodes_a)
    if m == 0 and policy not in ("first_touch", "bind_block", "parallel_init"):
        raise ValueError(f"{policy}: needs at least one node")
    i = np.arange(n_pages, dtype=np.int64) if pages is None else np.asarray(pages, dtype=np.int64)
    if len(i) and (i.min() < 0 or i.max() >= n_pages):
        raise ValueError("pages outside 0..n_pages-1")
    b = max(1, int(block_pages))
    if policy == "first_touch":
        if first_touch_nodes is None:
            raise ValueError("first_touch needs first_touch_nodes (the first toucher's node per page)")
        ft = np.asarray(first_touch_nodes, dtype=np.int64)
        if ft.shape != (n_pages,):
            raise ValueError(f"first_touch_nodes has shape {ft.shape}, expected ({n_pages},)")
        return ft[i]
    if policy in ("bind_block", "parallel_init"):
        if not threads_nodes:
            raise ValueError(f"{policy} needs threads_nodes (the node of each compute thread)")
        tn = np.asarray(list(threads_nodes), dtype=np.int64)
        if policy == "parallel_init" and frame_pages > 1:
            return tn[frame_toucher(n_pages, len(tn), i, frame_pages, first_page)]
        return tn[static_schedule_owner(n_pages, len(tn), i)]
    if policy == "bind_all":
        return _bind_all(i, nodes_a, capacity_pages)
    if policy == "cyclic":
        return nodes_a[i % m]
    if policy == "cyclic_block":
        return nodes_a[(i // b) % m]
    if policy == "skew_mapp":
        return nodes_a[(i + i // m + 1) % m]
    if policy == "prime_mapp":
        p = smallest_prime_at_least(m)
        v = i % p
        # Pages of virtual nodes v >= M are dealt cyclically over the real nodes, in page
        # order: the c-th such page (c counted from 0) goes to node c mod M.
        c = (i // p) * (p - m) + (v - m)
        return nodes_a[np.where(v < m, v, c % m)]
    if policy == "random":
        return nodes_a[(splitmix64(seed, i) % _U64(m)).astype(np.int64)]
    if policy == "random_block":
        return nodes_a[(splitmix64(seed, i // b) % _U64(m)).astype(np.int64)]
    if policy == "weighted_interleave":
        return _weighted(i, nodes_a, weights)
    raise ValueError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
