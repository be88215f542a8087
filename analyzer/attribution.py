"""Attribution of sampled addresses to objects (docs/analyzer.md), vectorised.

An *interval* is one allocation, static symbol or mapping: [start, end) in a process,
alive during [t0, t1).  Objects alive at the same time never overlap, but an address
can be reused after a free, so intervals overlap across time.  Overlapping intervals
are merged into *clusters*; a sample falls in at most one cluster (one binary search),
and only inside clusters of several intervals is the time consulted to pick the
allocation alive when the sample was taken.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NEVER = np.uint64(np.iinfo(np.uint64).max)
_MAX_WALK = 64  # overlapping candidates examined per sample in a reused-address cluster
CHUNK = 1 << 21  # samples per step: bounds the temporaries of the searches


@dataclass
class Intervals:
    """Parallel arrays, one entry per allocation / symbol / mapping."""

    pid: np.ndarray  # int64
    start: np.ndarray  # uint64
    end: np.ndarray  # uint64 (exclusive)
    t0: np.ndarray  # uint64 alive from
    t1: np.ndarray  # uint64 alive until (exclusive); NEVER if never freed
    obj: np.ndarray  # int64 index of the result object it belongs to

    def __len__(self) -> int:
        return len(self.start)

    def pages(self, rows, page_shift: int) -> np.ndarray:
        """Kernel pages each of ``rows`` spans (an allocation rarely starts on a page
        boundary: the page holding its first byte counts), as int64."""
        shift = np.uint64(page_shift)
        return (((self.end[rows] - np.uint64(1)) >> shift) - (self.start[rows] >> shift)).astype(np.int64) + 1

    @staticmethod
    def empty() -> Intervals:
        u = np.zeros(0, dtype=np.uint64)
        i = np.zeros(0, dtype=np.int64)
        return Intervals(i, u, u, u, u, i)

    @staticmethod
    def whole_run(rows: list[tuple[int, int, int, int]]) -> Intervals:
        """Intervals of (pid, start, size, object) rows that exist for the whole run (the
        statics and thread-local variables of a file)."""
        if not rows:
            return Intervals.empty()
        r = np.array(rows, dtype=np.uint64)
        n = len(rows)
        return Intervals(r[:, 0].astype(np.int64), r[:, 1], r[:, 1] + r[:, 2], np.zeros(n, dtype=np.uint64),
                         np.full(n, NEVER, dtype=np.uint64), r[:, 3].astype(np.int64))

    @staticmethod
    def concat(parts: list[Intervals]) -> Intervals:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Intervals.empty()
        return Intervals(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                           ("pid", "start", "end", "t0", "t1", "obj")))


def locate(pid: np.ndarray, addr: np.ndarray, time: np.ndarray, iv: Intervals) -> np.ndarray:
    """Index into ``iv`` of the interval holding each (pid, addr, time), or −1.

    ``pid`` may be a scalar-like array of one value repeated (the common single-process
    case is detected and skips the per-pid masks).
    """
    n = len(addr)
    out = np.full(n, -1, dtype=np.int32)
    if n == 0 or len(iv) == 0:
        return out
    addr = np.asarray(addr, dtype=np.uint64)
    time = np.asarray(time, dtype=np.uint64)
    pid = np.asarray(pid)
    sample_pids = np.unique(pid[:: max(n // 4096, 1)]) if n > 65536 else np.unique(pid)
    one_pid = len(sample_pids) == 1 and (n <= 65536 or (pid == sample_pids[0]).all())
    for p in np.unique(iv.pid).tolist():
        if one_pid:
            if int(sample_pids[0]) != p:
                continue
            sel = None
        else:
            sel = np.flatnonzero(pid == p)
            if len(sel) == 0:
                continue
        members = np.flatnonzero(iv.pid == p)
        prep = _prepare(iv, members)
        if sel is None:
            for c in range(0, n, CHUNK):
                out[c : c + CHUNK] = _locate_one(addr[c : c + CHUNK], time[c : c + CHUNK], iv, prep)
        else:
            for c in range(0, len(sel), CHUNK):
                part = sel[c : c + CHUNK]
                out[part] = _locate_one(addr[part], time[part], iv, prep)
    return out


def locate_layers(pid, addr, time, layers: list[Intervals]) -> np.ndarray:
    """Index of the interval holding each (pid, addr, time) in the layers laid end to
    end, the first layer that holds it winning; −1 where none does."""
    out = np.full(len(addr), -1, dtype=np.int32)
    offset = 0
    for part in layers:
        todo = np.flatnonzero(out < 0) if offset else slice(None)
        if len(part):
            loc = locate(pid[todo], addr[todo], time[todo], part)
            out[todo] = np.where(loc >= 0, loc + offset, -1)
        offset += len(part)
    return out


def _prepare(iv: Intervals, members: np.ndarray):
    order = members[np.argsort(iv.start[members], kind="stable")]
    st, en = iv.start[order], iv.end[order]
    run_end = np.maximum.accumulate(en)
    first = np.ones(len(order), dtype=bool)
    first[1:] = st[1:] >= run_end[:-1]
    c_first = np.flatnonzero(first)
    c_start = st[c_first]
    c_end = np.maximum.reduceat(en, c_first)
    c_size = np.diff(np.append(c_first, len(order)))
    return order, c_first, c_start, c_end, c_size


def _locate_one(addr, time, iv: Intervals, prep) -> np.ndarray:
    order, c_first, c_start, c_end, c_size = prep
    out = np.full(len(addr), -1, dtype=np.int64)
    c = np.searchsorted(c_start, addr, side="right") - 1
    inside = c >= 0
    cc = np.where(inside, c, 0)
    inside &= addr < c_end[cc]
    # clusters of one interval: containment is known, check the lifetime
    single = inside & (c_size[cc] == 1)
    k = order[c_first[cc[single]]]
    alive = (time[single] >= iv.t0[k]) & (time[single] < iv.t1[k])
    idx = np.flatnonzero(single)
    out[idx[alive]] = k[alive]
    # clusters of several intervals (address reuse): latest allocation alive at that time
    multi = np.flatnonzero(inside & (c_size[cc] > 1))
    if len(multi):
        mc = cc[multi]
        srt = np.argsort(mc, kind="stable")
        multi, mc = multi[srt], mc[srt]
        bounds = np.flatnonzero(np.diff(mc)) + 1
        for grp in np.split(np.arange(len(multi)), bounds):
            s_idx = multi[grp]
            ci = int(mc[grp[0]])
            cand = order[c_first[ci] : c_first[ci] + c_size[ci]]
            a, t = addr[s_idx], time[s_idx]
            if len(cand) <= _MAX_WALK:
                out[s_idx] = _walk(cand, a, t, iv)
                continue
            # a large cluster (an address range reused by many allocations over time):
            # by slices of the address range, each with the intervals overlapping it, so
            # that the walk back in time passes only allocations near the sample
            lo, hi = int(iv.start[cand].min()), int(iv.end[cand].max())
            width = max(1, -(-(hi - lo) // -(-len(cand) // (_MAX_WALK // 2))))
            sl = (a.astype(np.int64) - lo) // width
            res = np.full(len(s_idx), -1, dtype=np.int64)
            cs, ce = iv.start[cand].astype(np.int64), iv.end[cand].astype(np.int64)
            for b in np.unique(sl).tolist():
                mine = np.flatnonzero(sl == b)
                b_lo, b_hi = lo + b * width, lo + (b + 1) * width
                sub = cand[(cs < b_hi) & (ce > b_lo)]
                res[mine] = _walk(sub, a[mine], t[mine], iv)
            out[s_idx] = res
    return out


def _walk(cand: np.ndarray, a: np.ndarray, t: np.ndarray, iv: Intervals) -> np.ndarray:
    """For each (address, time): of the intervals ``cand``, the latest allocated before
    that time that holds the address and is still alive then; −1 if none within
    _MAX_WALK allocations back."""
    cand = cand[np.argsort(iv.t0[cand], kind="stable")]
    t0s = iv.t0[cand]
    j = np.searchsorted(t0s, t, side="right") - 1
    res = np.full(len(a), -1, dtype=np.int64)
    todo = np.flatnonzero(j >= 0)
    for _ in range(min(_MAX_WALK, len(cand))):
        if len(todo) == 0:
            break
        kk = cand[j[todo]]
        hit = (a[todo] >= iv.start[kk]) & (a[todo] < iv.end[kk]) & (t[todo] < iv.t1[kk])
        res[todo[hit]] = kk[hit]
        todo = todo[~hit]
        j[todo] -= 1
        todo = todo[j[todo] >= 0]
    return res


def latest_page_nodes(pn: dict[str, np.ndarray], page_shift: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys (pid << 36 | page number) and the latest valid node of each page.

    Negative nodes (−errno from move_pages: not present, no VMA) are ignored unless a
    page never had a valid answer.
    """
    if len(pn["page"]) == 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int16)
    node = np.asarray(pn["node"]).astype(np.int16)
    ok = node >= 0
    keys = page_keys(np.asarray(pn["pid"])[ok], np.asarray(pn["page"])[ok], page_shift)
    time = np.asarray(pn["time"])[ok]
    order = np.lexsort((time, keys))
    keys, node = keys[order], node[ok][order]
    last = np.ones(len(keys), dtype=bool)
    last[:-1] = keys[1:] != keys[:-1]
    return keys[last], node[last]


def page_keys(pid, addr, page_shift: int = 12) -> np.ndarray:
    """One uint64 per (process, page): pid in the top bits, the page number below."""
    return (np.asarray(pid).astype(np.uint64) << np.uint64(36)) | (
        np.asarray(addr, dtype=np.uint64) >> np.uint64(page_shift)
    )


def lookup_nodes(keys: np.ndarray, nodes: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Node of each queried page key, −1 when the page was never located."""
    out = np.full(len(query), -1, dtype=np.int16)
    if len(keys) == 0 or len(query) == 0:
        return out
    i = np.searchsorted(keys, query)
    i = np.minimum(i, len(keys) - 1)
    hit = keys[i] == query
    out[hit] = nodes[i[hit]]
    return out
