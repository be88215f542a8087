"""Arrays carved out of one allocation (docs/analyzer.md, "Arrays carved out of one
allocation").

Codes that allocate one workspace and lay several arrays out in it (`x = work; y = x + n;
z = y + n`: LAPACK-style work arrays, arena and pool allocators, a solver's one
`malloc` for all its vectors) would give one object, with one pattern and one placement,
for arrays their authors see apart.  The code tells them apart: each sampled access is
named by the pointer variable its base register held (analyzer/varattr.py, register
attribution, as perf's data-type profiling names an access by its register's type).
When those variables' offsets in the block fall in disjoint ranges, each range is an
array of its own, named ``block (variable)``; variables whose ranges overlap are one
array read through several names (`x` in one function, `s->x` in another) and stay
together.  Any overlap of two large ranges (one loop over the whole workspace through
`work`) leaves the block whole.

The parts' bounds are estimates: a boundary is taken halfway between the last sampled
offset of one range and the first of the next, so its error is about the distance
between two samples of the array (1/samples of the array's length).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numaprof.analyzer import attribution as att
from numaprof.analyzer import varattr
from numaprof.analyzer.objects import Obj

MIN_BLOCK_SAMPLES = 100  # samples a block needs before it is looked at
MIN_NAMED = 0.5  # the code must name at least this share of the block's samples
NAME_MIN_SHARE = 0.02  # a variable with less of the named samples joins no ranges
PART_MIN_SAMPLES = 10  # named samples a range needs to be an array of its own
RARE_PART_MIN_SAMPLES = 3  # ... or a rare variable's range clear of every other one
ALIGN = 8  # bytes: boundaries fall on the alignment of the arrays' elements
LOOK = 16384  # samples of a block named by code, at most (evenly spread over its samples)

CARVED = "carved"  # ObjectResult.attribution of a part


@dataclass
class Part:
    label: str  # the variable most of its samples were read through
    start: int  # offset in the block
    end: int


def split(objs: list[Obj], heap_iv: att.Intervals, regs, a_pid, a_tid, a_time, a_ip, a_addr, a_obj, a_iv,
          resolver) -> tuple[att.Intervals, int]:
    """Splits the heap blocks whose samples the code names by disjoint ranges of
    variables into one object per range.  ``a_obj`` and ``a_iv`` are updated in place
    (the intervals after the heap layer move up by the number of intervals added); returns
    the new heap layer and that number."""
    n_heap = len(heap_iv)
    counts = np.bincount(a_obj[a_obj >= 0], minlength=len(objs)) if len(a_obj) else np.zeros(len(objs), int)
    cands = {}
    by_obj = np.argsort(heap_iv.obj, kind="stable")
    bounds = np.searchsorted(heap_iv.obj[by_obj], np.arange(len(objs) + 1))
    for oi, o in enumerate(objs):
        if (o.kind != "heap" or o.sample_period or o.attribution != "address" or not o.alloc_rows
                or counts[oi] < MIN_BLOCK_SAMPLES):
            continue
        rows = np.sort(by_obj[bounds[oi]:bounds[oi + 1]])
        sizes = (heap_iv.end[rows] - heap_iv.start[rows]).astype(np.int64)
        if len(rows) and sizes[0] > 0 and (sizes == sizes[0]).all():  # one allocation made over again
            cands[oi] = rows
    if not cands:
        return heap_iv, 0
    cand = np.isin(a_obj, np.fromiter(cands, dtype=a_obj.dtype))
    cand &= (a_iv >= 0) & (a_iv < n_heap)
    # the ranges need a few thousand samples of a block, not millions: every k-th
    where = np.flatnonzero(cand)
    where = where[np.argsort(a_obj[where], kind="stable")]
    cuts = np.searchsorted(a_obj[where], np.fromiter(sorted(cands), dtype=np.int64), side="left")
    ends = np.searchsorted(a_obj[where], np.fromiter(sorted(cands), dtype=np.int64), side="right")
    for lo, hi in zip(cuts.tolist(), ends.tolist(), strict=True):
        mine = where[lo:hi]
        if len(mine) > LOOK:
            cand[mine] = False
            cand[mine[:: -(-len(mine) // LOOK)]] = True
    samples = varattr.Samples(pid=a_pid, tid=a_tid, time=a_time, ip=a_ip, addr=a_addr, size=regs["size"],
                              sp=regs["sp"], bp=regs["bp"], insn_off=regs["insn_off"],
                              base_reg=regs["base_reg"], base_off=regs["base_off"], region=a_obj)
    va = varattr.attribute(samples, cand, np.zeros(len(a_addr), dtype=bool), resolver)
    if not len(va.sample):
        return heap_iv, 0
    looked = np.bincount(a_obj[cand], minlength=len(objs))
    var_of = va.inst_obj[va.instance]
    by_code = [vo.attribution in (varattr.REGISTER, varattr.TYPE) for vo in va.objects]
    named = va.sample[np.asarray(by_code, dtype=bool)[var_of]] if by_code else va.sample[:0]
    named_var = var_of[np.asarray(by_code, dtype=bool)[var_of]] if by_code else var_of[:0]
    size = np.asarray(regs["size"]).astype(np.int64)
    labels = sorted({vo.name for vo in va.objects})  # one range per name, whichever variable
    name_of = np.array([labels.index(vo.name) for vo in va.objects], dtype=np.int64)
    plans: dict[int, list[Part]] = {}
    order = np.argsort(a_obj[named], kind="stable")  # each block's named samples, one slice
    named, named_var = named[order], named_var[order]
    held = a_obj[named]
    for oi, rows in cands.items():
        lo, hi = np.searchsorted(held, oi, side="left"), np.searchsorted(held, oi, side="right")
        if hi - lo < MIN_NAMED * looked[oi]:
            continue
        m = named[lo:hi]
        off = (a_addr[m] - heap_iv.start[a_iv[m]]).astype(np.int64)
        block = int(heap_iv.end[rows[0]] - heap_iv.start[rows[0]])
        parts = plan(name_of[named_var[lo:hi]], labels, off, np.maximum(size[m], 1), block)
        if parts:
            plans[oi] = parts
    if not plans:
        return heap_iv, 0
    return _apply(objs, heap_iv, plans, cands, a_obj, a_iv, a_addr)


def plan(name: np.ndarray, labels: list[str], off: np.ndarray, size: np.ndarray, block: int) -> list[Part]:
    """The parts of one block from its named samples (each one's variable, an index
    into ``labels``, its offset in the block and its access size); [] when it stays
    whole."""
    total = len(name)
    if total == 0:
        return []
    k = len(labels)
    count = np.bincount(name, minlength=k)
    lo = np.full(k, np.iinfo(np.int64).max)
    hi = np.full(k, np.iinfo(np.int64).min)
    np.minimum.at(lo, name, off)
    np.maximum.at(hi, name, off + size)
    ranges = {labels[j]: [int(lo[j]), int(hi[j]), int(count[j]), labels[j]] for j in np.flatnonzero(count).tolist()}
    common = [r for r in ranges.values() if r[2] >= NAME_MIN_SHARE * total]
    clusters = _join(common)
    # a rare variable joins nothing, but one clear of every other range is an array too
    # (an index array read in order, whose loads seldom miss the cache)
    rare = [r for r in ranges.values() if r[2] < NAME_MIN_SHARE * total
            and not any(r[0] < c[1] and c[0] < r[1] for c in clusters)]
    if rare:
        clusters = _join(common + rare)
    # such a range is an array with fewer samples too: the timer's samples go to the
    # accesses that stall, and an index array read in order next to a gathered table
    # gets a few in thousands (3-8 of 2900 for `col` beside `t` on an AMD EPYC VM);
    # without it the table's part ran on to the block's end over the index array
    clear = {id(c) for c in clusters if len(c[3]) == 1 and
             next(iter(c[3])) in {r[3] for r in rare} and c[2] >= RARE_PART_MIN_SAMPLES}
    big = [c for c in clusters if c[2] >= PART_MIN_SAMPLES or id(c) in clear]
    if len(big) < 2:
        return []
    parts = []
    for j, c in enumerate(big):
        start = 0 if j == 0 else _boundary(big[j - 1][1], c[0])
        end = _last_end(start, c, block) if j == len(big) - 1 else _boundary(c[1], big[j + 1][0])
        label = max(c[3].items(), key=lambda kv: (kv[1], kv[0]))[0]
        parts.append(Part(label, start, end))
    if len({p.label for p in parts}) < len(parts) or any(p.end <= p.start for p in parts):
        return []
    return parts


def _join(ranges: list) -> list[list]:
    """[lo, hi, samples, {name: samples}] of the variables' ranges, overlapping ones
    joined, in address order."""
    clusters: list[list] = []
    for lo, hi, n, name in sorted(ranges, key=lambda r: r[0]):
        if clusters and lo < clusters[-1][1]:
            c = clusters[-1]
            c[1], c[2] = max(c[1], hi), c[2] + n
            c[3][name] = n
        else:
            clusters.append([lo, hi, n, {name: n}])
    return clusters


def _last_end(start: int, c: list, block: int) -> int:
    """Where the last part ends: at the block's end, unless the bytes past its last
    sampled one outnumber its own (a pool allocator's reserve, YAKL's LinearAllocator
    holding 1-3 MiB arrays in a 3 GiB block): then a sample spacing past that byte."""
    hi = c[1]
    if block - hi <= hi - start:
        return block
    step = -(-(hi - start) // max(c[2], 1))
    end = hi + step + (-(hi + step)) % ALIGN
    return min(block, end)


def _boundary(hi: int, lo: int) -> int:
    mid = (hi + lo) // 2
    return max(hi, min(lo, mid - mid % ALIGN)) if lo > hi else lo


def _apply(objs, heap_iv, plans, cands, a_obj, a_iv, a_addr) -> tuple[att.Intervals, int]:
    n_heap = len(heap_iv)
    new = {f: [] for f in ("pid", "start", "end", "t0", "t1", "obj")}
    start = heap_iv.start.copy()
    end = heap_iv.end.copy()
    moves = []  # (object, its intervals, cuts, the part objects, the first new interval)
    added = 0
    for oi, parts in plans.items():
        o = objs[oi]
        rows = cands[oi]
        part_objs = [oi]
        for j, p in enumerate(parts[1:], start=1):
            objs.append(Obj("heap", (*o.key, "part", j), o.pid, o.address + p.start, p.end - p.start,
                            count=o.count, stack=o.stack, alloc_rows=o.alloc_rows, attribution=CARVED,
                            part=p.label))
            part_objs.append(len(objs) - 1)
        o.size, o.attribution, o.part = parts[0].end, CARVED, parts[0].label
        first = n_heap + added
        for k in rows.tolist():
            for j, p in enumerate(parts[1:], start=1):
                new["pid"].append(heap_iv.pid[k])
                new["start"].append(heap_iv.start[k] + np.uint64(p.start))
                new["end"].append(heap_iv.start[k] + np.uint64(p.end))
                new["t0"].append(heap_iv.t0[k])
                new["t1"].append(heap_iv.t1[k])
                new["obj"].append(part_objs[j])
            end[k] = start[k] + np.uint64(parts[0].end)
        added += len(rows) * (len(parts) - 1)
        moves.append((oi, rows, np.array([p.start for p in parts[1:]], dtype=np.int64), part_objs, first))
    out = att.Intervals(
        np.concatenate([heap_iv.pid, np.asarray(new["pid"], dtype=np.int64)]),
        np.concatenate([start, np.asarray(new["start"], dtype=np.uint64)]),
        np.concatenate([end, np.asarray(new["end"], dtype=np.uint64)]),
        np.concatenate([heap_iv.t0, np.asarray(new["t0"], dtype=np.uint64)]),
        np.concatenate([heap_iv.t1, np.asarray(new["t1"], dtype=np.uint64)]),
        np.concatenate([heap_iv.obj, np.asarray(new["obj"], dtype=np.int64)]))
    later = a_iv >= n_heap
    a_iv[later] += added
    for oi, rows, cuts, part_objs, first in moves:
        mine = np.flatnonzero((a_obj == oi) & (a_iv >= 0) & (a_iv < n_heap))
        k = a_iv[mine]
        j = np.searchsorted(cuts, (a_addr[mine] - heap_iv.start[k]).astype(np.int64), side="right")
        go = j > 0
        pos = np.searchsorted(rows, k[go])  # the interval's place among the object's
        a_obj[mine[go]] = np.asarray(part_objs, dtype=a_obj.dtype)[j[go]]
        a_iv[mine[go]] = first + pos * len(cuts) + (j[go] - 1)
    return out, added
