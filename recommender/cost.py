"""The cost model (SPEC §4.2): predicted traffic, latency and contention of a placement.

For one object, a placement (node per page) and a thread→node map, every measured access
(page, thread, weight) is replayed: it goes from the node its thread runs on to the node
holding its page.  That gives the predicted traffic matrix T[i][j].  Its cost is

    latency    = sum_ij T[i][j] * F[i][j] / sum T        (F = NUMA factor, 1.0 local)
    contention = max(1, max_j load_j / (sum_j load_j / K))   (load_j = sum_i T[i][j])
    score      = latency * contention ** CONTENTION_EXPONENT

K is the number of nodes the compute threads run on.  The busiest memory node sets the
pace of a bandwidth-bound loop, so contention multiplies the per-access latency; it is
measured against the fair share of the K nodes whose cores carry the threads, because
their memory controllers are what the threads can load (spreading pages onto nodes
without threads adds remote latency, not bandwidth the threads could saturate; with few
threads "memory contention is not high", `000_33c6b40d94544844.txt` §4.2).  The what-if
table's imbalance is max/mean over the nodes in use (SPEC §3.2's definition applied to
the nodes that run threads or serve traffic).  When the accesses carry times, contention is averaged over time
windows (traffic-weighted), so that threads hitting one node *at the same time* count even
when the whole run looks balanced (dynamic schedules, `000_33c6b40d94544844.txt` §4.1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from numaprof.analyzer.model import ObjectAccess
from numaprof.recommender.model import Prediction

#: Weight of contention in the score: 1.0 = fully bandwidth-bound (time ∝ busiest node).
#: Hook for measured bandwidth pressure once node counters are available.
CONTENTION_EXPONENT = 1.0

#: Minimum relative score difference that counts as a real difference (SPEC: ties go to
#: the simplest change).  Widened by sampling noise, see :func:`tie_tolerance`.
TIE_TOLERANCE = 0.02

#: Samples per memory node in one time window of the windowed contention.
WINDOW_SAMPLES_PER_NODE = 128
MAX_WINDOWS = 32


def tie_tolerance(weight: np.ndarray) -> float:
    """Relative score difference below which two candidates are treated as equal.

    max(2 %, 2/sqrt(n_eff)), n_eff = (sum w)^2 / sum w^2 the effective sample count: a
    difference smaller than two standard errors of a sampled share is not evidence.
    """
    w = np.asarray(weight, dtype=float)
    s2 = float((w * w).sum())
    if s2 <= 0:
        return TIE_TOLERANCE
    n_eff = float(w.sum()) ** 2 / s2
    return max(TIE_TOLERANCE, 2.0 / np.sqrt(n_eff))


def _valid(access: ObjectAccess, n_pages: int) -> np.ndarray:
    page = np.asarray(access.page)
    return (page >= 0) & (page < n_pages)


def traffic_matrix(access: ObjectAccess, thread_node: np.ndarray, page_node: np.ndarray,
                   n_nodes: int) -> np.ndarray:
    """Predicted (n_nodes, n_nodes) traffic: from the accessing thread's node to the page's node.

    ``thread_node[t]`` is the node position of Analysis.threads[t]; ``page_node[p]`` the
    node position of page p.  Accesses to pages outside the object are ignored.
    """
    ok = _valid(access, len(page_node))
    src = np.asarray(thread_node, dtype=np.int64)[np.asarray(access.thread)[ok]]
    dst = np.asarray(page_node, dtype=np.int64)[np.asarray(access.page)[ok]]
    w = np.asarray(access.weight, dtype=float)[ok]
    flat = np.bincount(src * n_nodes + dst, weights=w, minlength=n_nodes * n_nodes)
    return flat.reshape(n_nodes, n_nodes)


def imbalance(load: np.ndarray) -> float:
    """max / mean of per-node load (1.0 even; all on one of N nodes gives N)."""
    load = np.asarray(load, dtype=float)
    total = load.sum()
    if total <= 0:
        return 1.0
    return float(load.max() * len(load) / total)


def time_windows(access: ObjectAccess, n_nodes: int) -> tuple[np.ndarray, int] | None:
    """Equal-length time windows over the accesses: (window index per sample, count), or
    None without sample times or with too few samples for ``n_nodes`` nodes."""
    t = getattr(access, "time", None)
    if t is None or n_nodes < 2:
        return None
    t = np.asarray(t, dtype=np.int64)
    k = min(MAX_WINDOWS, len(t) // (WINDOW_SAMPLES_PER_NODE * n_nodes))
    if k < 2:
        return None
    lo, hi = int(t.min()), int(t.max())
    window = ((t - lo).astype(np.float64) * k / (hi - lo + 1)).astype(np.int64)
    return np.minimum(window, k - 1), k


def windowed_contention(access: ObjectAccess, thread_node: np.ndarray, page_node: np.ndarray,
                        n_nodes: int, windows: tuple[np.ndarray, int] | None) -> float | None:
    """Traffic-weighted mean over time windows of the busiest node's load relative to the
    fair share of the nodes whose threads are active in that window (at least 1).

    Counting only the nodes with active threads keeps a serial phase (one thread, which
    cannot saturate a memory node) from reading as contention.  None without windows.
    """
    if windows is None:
        return None
    window, k = windows
    ok = _valid(access, len(page_node))
    window = window[ok]
    dst = np.asarray(page_node, dtype=np.int64)[np.asarray(access.page)[ok]]
    src = np.asarray(thread_node, dtype=np.int64)[np.asarray(access.thread)[ok]]
    w = np.asarray(access.weight, dtype=float)[ok]
    load = np.bincount(window * n_nodes + dst, weights=w, minlength=k * n_nodes).reshape(k, n_nodes)
    active = np.bincount(window * n_nodes + src, minlength=k * n_nodes).reshape(k, n_nodes) > 0
    totals = load.sum(axis=1)
    keep = totals > 0
    if not keep.any():
        return None
    fair = active[keep].sum(axis=1)
    per_window = np.maximum(1.0, load[keep].max(axis=1) * fair / totals[keep])
    return float((per_window * totals[keep]).sum() / totals[keep].sum())


def contention(load: np.ndarray, active_nodes: int) -> float:
    """Busiest node's load over the fair share of ``active_nodes`` nodes, at least 1."""
    load = np.asarray(load, dtype=float)
    total = load.sum()
    if total <= 0:
        return 1.0
    return max(1.0, float(load.max() * active_nodes / total))


def predict(policy: str, access: ObjectAccess, thread_node: np.ndarray, page_node: np.ndarray,
            factor: np.ndarray, active_nodes: Sequence[int] | None = None,
            change: str = "none", windows: tuple[np.ndarray, int] | None | bool = True) -> Prediction:
    """Predicted traffic, local fraction, imbalance and score of one placement.

    ``active_nodes``: node positions the compute threads run on (default: every node).
    The reported imbalance is max/mean over the nodes in use (those and every node that
    serves traffic), so a 2-thread program on an 8-node machine is not called unbalanced
    for leaving 6 nodes idle.
    """
    n = factor.shape[0]
    tm = traffic_matrix(access, thread_node, page_node, n)
    total = tm.sum()
    if total <= 0:
        return Prediction(policy, 1.0, 1.0, 1.0, change=change, traffic=tm)
    local = float(np.trace(tm) / total)
    latency = float((tm * factor).sum() / total)
    active = list(range(n)) if active_nodes is None else sorted(set(int(a) for a in active_nodes))
    k = max(1, len(active))
    load = tm.sum(axis=0)
    used = np.zeros(n, dtype=bool)
    used[active] = True
    used |= load > 0
    imb = imbalance(load[used])
    cont = contention(load, k)
    if windows is True:
        windows = time_windows(access, n)
    windowed = windowed_contention(access, thread_node, page_node, n, windows or None)
    if windowed is not None:
        cont = max(cont, windowed)
    score = latency * cont**CONTENTION_EXPONENT
    return Prediction(policy=policy, local_fraction=local, imbalance=imb, score=score,
                      latency=latency, contention=cont, change=change, traffic=tm)
