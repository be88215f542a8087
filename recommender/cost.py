"""The cost model (docs/recommender.md): predicted traffic, latency and contention of a placement.

For one object, a placement (node per page) and a thread→node map, every measured access
(page, thread, weight) is replayed: it goes from the node its thread runs on to the node
holding its page.  That gives the predicted traffic matrix T[i][j].  Its cost is

    latency    = sum_ij T[i][j] * F[i][j] / sum T           (F = NUMA factor, 1.0 local)
    contention = max(1, max_j (load_j / r_j) / max_i demand_i)
                 (load_j = sum_i T[i][j], demand_i = sum_j T[i][j], r_j = node j's bandwidth
                  over the mean of the nodes in use: all 1 unless the target's node
                  bandwidths differ, see targets.relative_bandwidth)
    score      = latency * contention                           (no node counters)
    score      = latency * (1 + beta * (contention - 1))        (bandwidth pressure beta)

The busiest memory node sets the pace of a bandwidth-bound loop, so contention multiplies
the per-access latency.  It compares the busiest memory node's load with the busiest
thread node's own demand: when every thread reads locally the two are equal and there is
no contention however uneven the threads' work; when all threads are served by one node
(master-thread initialisation) it is the number of thread nodes.  Spreading pages onto
nodes without threads adds remote latency but never lowers contention below 1 (with few
threads "memory contention is not high", Pousa Ribeiro et al. 2010, §4.2).  When the
accesses carry times, contention is also taken per time window (traffic-weighted mean),
so that threads hitting one node *at the same time* count even when the whole run looks
balanced (dynamic schedules, Pousa Ribeiro et al. 2010, §4.1); a serial phase demands
from one node only and is no contention.  The what-if table's imbalance is max/mean load
over the nodes in use (the definition of docs/analyzer.md applied to the nodes that run threads or
serve traffic).

Node bandwidths.  A node serves its load in load_j / bandwidth_j, so where the target's
nodes differ in bandwidth (by more than 10 %), each node's load is divided by its
bandwidth relative to the mean of the nodes in use; equal placements then load the slow
node's controllers longest, and weighted_interleave (pages in proportion to bandwidth)
evens the time out.

Bandwidth pressure (beta).  Multiplying by contention assumes the loop is bandwidth-bound
all the time.  When the node counters give the run's memory bandwidth per node and each
node's measured peak (``Analysis.node_counters``, recorded machine only), the run is
modelled as two kinds of time: streaming at the memory controllers, which stretches with
the busiest node's load, and everything else (compute, latency-bound chasing), which does
not.  With u_even = sum_j bw_j / sum_{j in use} peak_j (the nodes' utilisation had the
traffic been spread evenly), u_busy = max_j bw_j / peak_j, and S = 0.8 the utilisation
from which a node counts as saturated (analyzer/counters.py):

    s     = u_even / S * min(1, S / u_busy)    streaming time of an even placement,
                                               as a share of the measured run's time
    b     = min(1, u_busy / S)                 the measured run's streaming time share
    beta  = s / (1 - b + s)                    streaming share of a contention-free run

and a placement with contention c takes (1 - beta) + beta * c of the contention-free time.
A run at 10 % of its peak on one node of two gets beta = 0.07 (a busy node costs 7 % per
unit of contention), a run whose busiest node is at or above 80 % of its peak beta = 1
(the busiest node paces the run).  Without counters the score is latency * contention,
the same as beta = 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from numaprof.analyzer import counters
from numaprof.analyzer.model import NodeCounters, ObjectAccess, Topology
from numaprof.recommender.model import BandwidthPressure, Prediction

#: Share of a node's measured peak from which its memory counts as saturated (the
#: streaming phases of a bandwidth-bound loop run at about this share of the triad peak).
SATURATED = counters.SATURATED

#: Minimum relative score difference that counts as a real difference (ties go to
#: the simplest change).  Widened by sampling noise, see :class:`Ties`.
TIE_TOLERANCE = 0.02

#: Samples per memory node in one time window of the windowed contention.
WINDOW_SAMPLES_PER_NODE = 128
MAX_WINDOWS = 32


class Replay:
    """One object's measured accesses, prepared once and replayed under every placement.

    Everything that does not depend on the placement (valid samples, the accessing
    threads' nodes, weights, time windows and which nodes have active threads in each
    window) is computed here, so each candidate costs one gather and two bincounts.
    """

    def __init__(self, access: ObjectAccess, thread_node: np.ndarray, n_nodes: int,
                 n_pages: int | None = None, windows: tuple[np.ndarray, int] | None | bool = True):
        n = self.n = int(n_nodes)
        n_pages = int(access.n_pages if n_pages is None else n_pages)
        page = np.asarray(access.page)
        ok = (page >= 0) & (page < n_pages)
        every = bool(ok.all())
        self.page = page if every else page[ok]
        thread = np.asarray(access.thread)
        thread = thread if every else thread[ok]
        self.src_row = np.asarray(thread_node, dtype=np.int32)[thread] * np.int32(n)
        w = np.asarray(access.weight, dtype=np.float64)
        w = w if every else w[ok]
        # unweighted samples (all 1.0, often a broadcast view) need no weights in bincount
        self.w = None if (w.strides == (0,) and w.size and w[0] == 1.0) or np.all(w == 1.0) else w
        if windows is True:
            windows = time_windows(access, n)
        self.window_row = None
        if windows:
            window, k = windows
            window = np.asarray(window) if every else np.asarray(window)[ok]
            self.k = k
            self.window_row = window.astype(np.int32) * np.int32(n)
            src = self.src_row // np.int32(n)
            demand = np.bincount(self.window_row + src, weights=self.w, minlength=k * n)
            self.demand_max = demand.reshape(k, n).max(axis=1)

    def traffic(self, page_node: np.ndarray | None) -> np.ndarray:
        """Predicted (N, N) traffic for a placement (node position per page); None: a copy
        on every node (replicate), each access served by its thread's own node."""
        n = self.n
        if page_node is None:
            dst = self.src_row // np.int32(n)
            self._dst = dst
            return np.bincount(self.src_row + dst, weights=self.w, minlength=n * n).reshape(n, n)
        dst = np.asarray(page_node, dtype=np.int32)[self.page]
        self._dst = dst
        return np.bincount(self.src_row + dst, weights=self.w, minlength=n * n).reshape(n, n)

    def latency_per_sample(self, page_node: np.ndarray, factor: np.ndarray) -> np.ndarray:
        """NUMA factor of every replayed access under a placement."""
        dst = np.asarray(page_node, dtype=np.int32)[self.page]
        return np.asarray(factor, dtype=np.float64).ravel()[self.src_row + dst]

    def n_eff(self) -> float:
        """Effective number of samples, (sum w)^2 / sum w^2."""
        if self.w is None:
            return float(len(self.page))
        s2 = float((self.w * self.w).sum())
        return float(self.w.sum()) ** 2 / s2 if s2 > 0 else 0.0

    def windowed_contention(self, speed: np.ndarray | None = None) -> float | None:
        """Contention per time window (busiest memory node's load over the busiest thread
        node's demand in that window), traffic-weighted mean, for the placement last passed
        to traffic().  A serial phase demands from one node only, so it is no contention.
        ``speed``: relative bandwidth per node (loads are divided by it)."""
        if self.window_row is None:
            return None
        n, k = self.n, self.k
        load = np.bincount(self.window_row + self._dst, weights=self.w,
                           minlength=k * n).reshape(k, n)
        totals = load.sum(axis=1)
        keep = totals > 0
        if not keep.any():
            return None
        busy = load[keep] if speed is None else load[keep] / speed
        per_window = np.maximum(1.0, busy.max(axis=1) / self.demand_max[keep])
        return float((per_window * totals[keep]).sum() / totals[keep].sum())

    def predict(self, policy: str, page_node: np.ndarray | None, factor: np.ndarray,
                active_nodes: Sequence[int] | None = None, change: str = "none", *,
                speed: np.ndarray | None = None, pressure: float | None = None) -> Prediction:
        """Predicted traffic, local fraction, imbalance and score of one placement.

        ``active_nodes``: node positions the compute threads run on (default: every node).
        The reported imbalance is max/mean over the nodes in use (those and every node
        that serves traffic), so a 2-thread program on an 8-node machine is not called
        unbalanced for leaving 6 nodes idle.  ``speed``: each node's bandwidth relative to
        the nodes in use (None: all equal); ``pressure``: the bandwidth pressure beta
        (None: fully bandwidth-bound, the model without node counters).
        """
        n = self.n
        tm = self.traffic(page_node)
        total = tm.sum()
        if total <= 0:
            return Prediction(policy, 1.0, 1.0, 1.0, change=change, traffic=tm)
        local = float(np.trace(tm) / total)
        latency = float((tm * factor).sum() / total)
        active = list(range(n)) if active_nodes is None else sorted({int(a) for a in active_nodes})
        load = tm.sum(axis=0)
        used = np.zeros(n, dtype=bool)
        used[active] = True
        used |= load > 0
        imb = imbalance(load[used])
        cont = contention(load if speed is None else load / speed, tm.sum(axis=1))
        windowed = self.windowed_contention(speed)
        if windowed is not None:
            cont = max(cont, windowed)
        score = latency * contention_cost(cont, pressure)
        return Prediction(policy=policy, local_fraction=local, imbalance=imb, score=score,
                          latency=latency, contention=cont, change=change, traffic=tm)


class Ties:
    """Decides whether two candidates' predicted costs differ by more than sampling noise.

    Both are replayed on the *same* samples, so their latency terms are compared paired:
    the per-access difference of NUMA factors has a standard error, and a difference
    within two of them (or within 2 %) is no evidence.  Contention is compared against
    the noise of a sampled max/mean over K nodes, about 1.5 * sqrt((K - 1) / n).  A
    candidate ties with the reference when both terms tie, or when the whole scores are
    within 2 %.  Without enough samples for that (n < 2), everything within 2 % ties.
    """

    def __init__(self, replay: Replay, pages: dict[str, np.ndarray], factor: np.ndarray,
                 active_nodes: int, replays: dict[str, Replay] | None = None,
                 pressure: float | None = None):
        # ``replays``: candidates replayed with other accessing threads for the same samples
        # (parallel_init: the initialisation loop run by the compute threads)
        self.replay, self.pages, self.factor = replay, pages, factor
        self.replays = replays or {}
        self.pressure = pressure
        n = replay.n_eff()
        self.cont_noise = max(TIE_TOLERANCE, 1.5 * np.sqrt(max(active_nodes - 1, 1) / n)) if n >= 2 else None

    def __call__(self, p: Prediction, ref: Prediction) -> bool:
        if p.score <= ref.score * (1.0 + TIE_TOLERANCE):
            return True
        if self.cont_noise is None or p.policy not in self.pages or ref.policy not in self.pages:
            return False
        # contention counts in the score with weight beta: compare the terms as scored
        beta = 1.0 if self.pressure is None else self.pressure
        if (abs(beta * (p.contention - ref.contention))
                > self.cont_noise * contention_cost(ref.contention, self.pressure)):
            return False
        r = self.replay
        rp = self.replays.get(p.policy, r)
        rr = self.replays.get(ref.policy, r)
        d = (rp.latency_per_sample(self.pages[p.policy], self.factor)
             - rr.latency_per_sample(self.pages[ref.policy], self.factor))
        if r.w is None:
            mean = float(d.mean())
            se = float(d.std()) / np.sqrt(len(d)) if len(d) else 0.0
        else:
            total = float(r.w.sum())
            mean = float((r.w * d).sum() / total)
            se = float(np.sqrt((r.w * r.w * (d - mean) ** 2).sum())) / total
        return abs(mean) <= max(TIE_TOLERANCE * ref.latency, 2.0 * se)


def traffic_matrix(access: ObjectAccess, thread_node: np.ndarray, page_node: np.ndarray,
                   n_nodes: int) -> np.ndarray:
    """Predicted (n_nodes, n_nodes) traffic: from the accessing thread's node to the page's node.

    ``thread_node[t]`` is the node position of Analysis.threads[t]; ``page_node[p]`` the
    node position of page p.  Accesses to pages outside the object are ignored.
    """
    return Replay(access, thread_node, n_nodes, len(page_node), windows=None).traffic(page_node)


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


def contention_cost(cont: float, pressure: float | None) -> float:
    """The factor contention puts on the score: ``cont`` itself without node counters
    (fully bandwidth-bound), else (1 - beta) + beta * cont for bandwidth pressure beta."""
    if pressure is None:
        return cont
    return 1.0 + pressure * (cont - 1.0)


def bandwidth_pressure(node_counters: Sequence[NodeCounters], target: Topology,
                       active: Sequence[int]) -> BandwidthPressure | None:
    """The run's bandwidth pressure beta from the node counters (see the module docstring),
    or None when they do not give it: a node of ``target`` without memory-controller
    bandwidth, or a node in use (``active``: positions) or one that carried at least 1 %
    of the bytes without a measured peak."""
    by_id = {c.node: c for c in node_counters}
    ids = [n.id for n in target.nodes]
    if len(ids) < 2 or any(by_id.get(i) is None or by_id[i].bandwidth_gbs is None for i in ids):
        return None
    bw = np.array([max(float(by_id[i].bandwidth_gbs), 0.0) for i in ids])
    peak = np.array([float(by_id[i].peak_gbs) if by_id[i].peak_gbs else np.nan for i in ids])
    total = float(bw.sum())
    in_use = np.zeros(len(ids), dtype=bool)
    in_use[sorted({int(a) for a in active})] = True
    carried = bw >= 0.01 * total if total > 0 else np.zeros(len(ids), dtype=bool)
    if not np.all(np.isfinite(peak[in_use | carried])):
        return None
    known = np.isfinite(peak)
    util = np.where(known, bw / np.where(known, peak, 1.0), 0.0)
    busiest = int(np.argmax(util))
    u_busy = float(util[busiest])
    u_even = total / float(peak[in_use].sum())
    if u_busy <= 0:
        beta = 0.0
    else:
        s = u_even / SATURATED * min(1.0, SATURATED / u_busy)
        b = min(1.0, u_busy / SATURATED)
        beta = float(np.clip(s / (1.0 - b + s), 0.0, 1.0))
    return BandwidthPressure(beta=beta, busiest_node=ids[busiest], busiest_gbs=float(bw[busiest]),
                             busiest_peak_gbs=float(peak[busiest]), busiest_share=u_busy,
                             even_share=u_even, total_gbs=total)


def contention(load: np.ndarray, demand: np.ndarray) -> float:
    """Busiest memory node's load over the busiest thread node's demand, at least 1.

    ``load[j]``: traffic served by memory node j; ``demand[i]``: traffic issued by the
    threads of node i.  With every access local the two are equal (1.0, however uneven the
    threads' work); all threads served by one node give the number of thread nodes.
    """
    load = np.asarray(load, dtype=float)
    top = float(np.max(demand)) if len(demand) else 0.0
    if load.sum() <= 0 or top <= 0:
        return 1.0
    return max(1.0, float(load.max()) / top)


def predict(policy: str, access: ObjectAccess, thread_node: np.ndarray, page_node: np.ndarray,
            factor: np.ndarray, active_nodes: Sequence[int] | None = None,
            change: str = "none", *, speed: np.ndarray | None = None,
            pressure: float | None = None) -> Prediction:
    """Predicted traffic, local fraction, imbalance and score of one placement of ``access``
    (see :meth:`Replay.predict`; build a Replay to score several placements)."""
    replay = Replay(access, thread_node, factor.shape[0], len(page_node))
    return replay.predict(policy, page_node, factor, active_nodes, change, speed=speed,
                          pressure=pressure)
