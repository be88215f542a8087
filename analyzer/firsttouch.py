"""First touches: which thread and cpu first touched each page of each object, from the
page-fault records (docs/analyzer.md, "Per object")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numaprof.analyzer import attribution as att
from numaprof.analyzer.model import (
    FirstTouch,
)
from numaprof.analyzer.profile import ADDRESS_SPACE
from numaprof.errors import ProfileError

SERIAL_MASTER = 0.9
FAULT_PAGES_LIMIT = 1 << 27  # base pages the huge-page faults (and the runs' faults) may expand to


@dataclass
class Touches:
    iv: np.ndarray  # interval of each first-touched page
    page: np.ndarray  # page index inside the interval
    tid: np.ndarray
    cpu: np.ndarray
    ip: np.ndarray
    pid: np.ndarray
    obj: np.ndarray  # object id
    inferred: np.ndarray | None = None  # bool per page: its fault was not recorded (period > 1)
    size: np.ndarray | None = None  # bytes of the page the placing fault mapped (0: a base page)


#: With one fault in `period` recorded, a page between two recorded first touches of the
#: same allocation takes the toucher of the nearer one, when they are at most this many
#: periods apart (in pages of the faults' size); likewise the pages before the first and
#: after the last, up to the allocation's ends.  The records of one array are `period` of
#: its pages apart on average, but a loop first-touching several arrays in lockstep
#: makes them come in bursts: 71 pages apart at most, 10 in the median, for
#: examples/spmv's colidx (five arrays in one loop, period 17).
FILL_PERIODS = 16


def first_touches(ft: dict, ivs, heap_iv, static_iv, map_iv, page_shift,
                   where="faults", period: int = 1) -> Touches | None:
    """The first touch of each page of each interval: the earliest recorded fault there.

    With ``period`` > 1 (one fault in `period` recorded, per thread and cpu) the pages in
    between are inferred from their recorded neighbours (:func:`_fill`): a thread that
    first-touches a block touches it page after page, so its recorded faults fall every
    `period` pages of its block."""
    if len(ft["time"]) == 0 or len(ivs) == 0:
        return None
    ft = fault_records(ft, where)
    row, addr = fault_pages(ft, page_shift, where)
    time = np.asarray(ft["time"], dtype=np.uint64)[row]
    pid = np.asarray(ft["pid"])[row]
    where = att.locate_layers(pid, addr, time, [heap_iv, static_iv, map_iv]).astype(np.int64)
    ok = np.flatnonzero(where >= 0)
    if len(ok) == 0:
        return None
    iv = where[ok]
    pg = ((addr[ok] >> np.uint64(page_shift)) - (ivs.start[iv] >> np.uint64(page_shift))).astype(np.int64)
    order = np.lexsort((time[ok], pg, iv))
    iv, pg, ok = iv[order], pg[order], ok[order]
    first = np.ones(len(ok), dtype=bool)
    first[1:] = (iv[1:] != iv[:-1]) | (pg[1:] != pg[:-1])
    iv, pg, ok = iv[first], pg[first], ok[first]
    inferred = None
    if period > 1:
        size = ft.get("page_size")
        unit = np.ones(len(ok), dtype=np.int64)
        if size is not None and len(size):
            unit = np.maximum(np.asarray(size, dtype=np.int64)[row[ok]] >> page_shift, 1)
        n_pages = ivs.pages(iv, page_shift)
        # a first page shared with what lies before (an allocator's header) was touched
        # before this interval existed
        lo = (ivs.start[iv] & np.uint64((1 << page_shift) - 1) != 0).astype(np.int64)
        iv, pg, ok, inferred = _fill(iv, pg, ok, unit * period * FILL_PERIODS, n_pages, lo)
    # grouped by object so that each object's first touches are one slice
    by_obj = np.argsort(ivs.obj[iv], kind="stable")
    iv, pg, ok = iv[by_obj], pg[by_obj], ok[by_obj]
    obj = ivs.obj[iv]
    r = row[ok]
    size = ft.get("page_size")
    size = (np.asarray(size, dtype=np.int64)[r] if size is not None and len(size) else None)
    return Touches(iv, pg, np.asarray(ft["tid"])[r].astype(np.int64), np.asarray(ft["cpu"])[r].astype(np.int64),
                   np.asarray(ft["ip"])[r].astype(np.uint64), pid[ok].astype(np.int64), obj,
                   None if inferred is None else inferred[by_obj], size)


def regroup_touches(ft: Touches, ivs) -> Touches:
    """The first touches grouped by object again after intervals changed object
    (``ivs.obj``: sites merged into one)."""
    obj = ivs.obj[ft.iv]
    o = np.argsort(obj, kind="stable")
    return Touches(ft.iv[o], ft.page[o], ft.tid[o], ft.cpu[o], ft.ip[o], ft.pid[o], obj[o],
                   None if ft.inferred is None else ft.inferred[o],
                   None if ft.size is None else ft.size[o])


def _fill(iv, pg, ok, limit, n_pages, lo):
    """Recorded first touches (sorted by interval, then page) with the pages between
    them: a page takes the record (``ok``) of the nearer recorded neighbour in its
    interval when the two are at most ``limit`` pages apart (the larger of theirs); the
    pages before an interval's first record (from its page ``lo``) and after its last,
    when they are within its limit of the interval's ends.  Returns iv, page, record,
    inferred (bool), sorted."""
    n = len(iv)
    same = np.zeros(n, dtype=bool)
    same[1:] = iv[1:] == iv[:-1]
    gap = np.zeros(n, dtype=np.int64)  # pages between record k-1 and record k
    gap[1:] = pg[1:] - pg[:-1] - 1
    between = same & (gap > 0) & (gap <= np.maximum(limit, np.r_[limit[:1], limit[:-1]]))
    head = ~same & (pg > lo) & (pg - lo <= limit)  # first record of its interval
    last = np.r_[~same[1:], True]
    tail_n = np.where(last, n_pages - 1 - pg, 0)
    tail = last & (tail_n > 0) & (tail_n <= limit)
    parts_iv, parts_pg, parts_ok = [iv], [pg], [ok]
    k = np.flatnonzero(between)
    if len(k):
        g = gap[k]
        start = pg[k - 1] + 1
        rel = np.arange(int(g.sum())) - np.repeat(np.cumsum(g) - g, g)
        near_prev = rel < np.repeat((g + 1) // 2, g)
        parts_iv.append(np.repeat(iv[k], g))
        parts_pg.append(np.repeat(start, g) + rel)
        parts_ok.append(np.where(near_prev, np.repeat(ok[k - 1], g), np.repeat(ok[k], g)))
    for sel, first, count in ((np.flatnonzero(head), lambda s: lo[s], lambda s: pg[s] - lo[s]),
                              (np.flatnonzero(tail), lambda s: pg[s] + 1, lambda s: tail_n[s])):
        if len(sel):
            c = count(sel)
            rel = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
            parts_iv.append(np.repeat(iv[sel], c))
            parts_pg.append(np.repeat(first(sel), c) + rel)
            parts_ok.append(np.repeat(ok[sel], c))
    inferred = np.concatenate([np.zeros(n, dtype=bool), np.ones(sum(len(x) for x in parts_iv[1:]), dtype=bool)])
    iv, pg, ok = np.concatenate(parts_iv), np.concatenate(parts_pg), np.concatenate(parts_ok)
    order = np.lexsort((pg, iv))
    return iv[order], pg[order], ok[order], inferred[order]


#: A row of repeats (`stride` 0: one page faulted again and again by one thread and
#: instruction) is laid out as at most this many faults, spread over its span: its page's
#: first toucher is known, the times of the repeats between are not (the collector
#: counts them, docs/profile-format.md).
REPEAT_POINTS = 16


def fault_records(ft: dict, where="faults") -> dict:
    """The faults table with its runs (docs/profile-format.md, "faults") laid out: one row
    per recorded fault, the k-th of a run at its first page + k x `stride`, its time
    spread evenly over the run's `span`; a row of repeats of one page (`stride` 0) as at
    most REPEAT_POINTS of them (fault_count counts them all)."""
    run = ft.get("run")
    if run is None or len(run) == 0:
        return ft
    n = np.maximum(np.asarray(run, dtype=np.int64), 1)
    if (n == 1).all():
        return ft
    stride = np.asarray(ft["stride"], dtype=np.uint64)
    n = np.where(stride == 0, np.minimum(n, REPEAT_POINTS), n)
    total = int(n.sum())
    if total > FAULT_PAGES_LIMIT:
        raise ProfileError(f"{where}: the runs of faults hold {total} faults, more than the "
                           f"{FAULT_PAGES_LIMIT} the analyzer handles")
    if ((n - 1).astype(np.uint64) * stride > np.uint64(ADDRESS_SPACE)).any():
        raise ProfileError(f"{where}: a run of faults reaches beyond the address space")
    rows = np.repeat(np.arange(len(n)), n)
    k = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
    out = {col: np.asarray(v)[rows] for col, v in ft.items() if len(v) == len(n)}
    out["addr"] = out["addr"].astype(np.uint64) + k.astype(np.uint64) * stride[rows]
    span = np.asarray(ft["span"], dtype=np.float64)[rows]
    out["time"] = out["time"].astype(np.uint64) + (span * k / np.maximum(n[rows] - 1, 1)).astype(np.uint64)
    out["run"] = np.ones(total, dtype=np.uint32)
    return out


def fault_count(ft: dict) -> int:
    """Recorded faults: a row stands for its run's."""
    run = ft.get("run")
    if run is None or len(run) == 0:
        return len(ft["time"])
    return int(np.maximum(np.asarray(run, dtype=np.int64), 1).sum())


def fault_pages(ft: dict, page_shift: int, where="faults") -> tuple[np.ndarray, np.ndarray]:
    """(fault row, page address) per base page a fault placed: one page per fault, and
    every base page of a huge page for a fault that mapped one (`page_size` 2 MiB: one
    first touch placed 512 pages)."""
    addr = np.asarray(ft["addr"], dtype=np.uint64)
    rows = np.arange(len(addr))
    size = ft.get("page_size")
    if size is None or len(size) == 0:
        return rows, addr
    size = np.asarray(size, dtype=np.uint64)  # checked by Profile.table: 0 or 4 KiB..1 GiB
    per = np.where(size > np.uint64(1 << page_shift), size >> np.uint64(page_shift), 1).astype(np.int64)
    if (per == 1).all():
        return rows, addr
    if int(per.sum()) > FAULT_PAGES_LIMIT:
        raise ProfileError(f"{where}: the faults placed {int(per.sum())} base pages, more "
                           f"than the {FAULT_PAGES_LIMIT} the analyzer handles")
    start = np.where(per > 1, addr & ~(np.maximum(size, np.uint64(1)) - np.uint64(1)), addr)
    rep = np.repeat(rows, per)
    within = (np.arange(len(rep)) - np.repeat(np.cumsum(per) - per, per)).astype(np.uint64)
    return rep, start[rep] + (within << np.uint64(page_shift))


def first_touch_of(oi, ft: Touches | None, topo, n_program_threads, resolver) -> FirstTouch:
    if ft is None:
        return FirstTouch(0, [], 0.0, None, [], 0, False)
    sel = slice(int(np.searchsorted(ft.obj, oi)), int(np.searchsorted(ft.obj, oi, side="right")))
    pages = sel.stop - sel.start
    if pages == 0:
        return FirstTouch(0, [], 0.0, None, [], 0, False)
    tids, tcounts = np.unique(ft.tid[sel], return_counts=True)
    top = int(np.argmax(tcounts))
    master = float(tcounts[top] / pages)
    cpu_node = topo.node_of_cpu()
    lut = np.full(max([int(ft.cpu[sel].max()) + 1, *(c + 1 for c in cpu_node)]), -1, dtype=np.int64)
    for c, nd in cpu_node.items():
        lut[c] = nd
    nodes, ncounts = np.unique(lut[ft.cpu[sel]], return_counts=True)
    node_list = [int(n) for n in nodes[np.argsort(-ncounts, kind="stable")] if n >= 0]
    sites: dict[str, int] = {}
    ips, icounts = np.unique(np.stack([ft.pid[sel], ft.ip[sel].astype(np.int64)]), axis=1, return_counts=True)
    for (p, ip), c in zip(ips.T.tolist(), icounts.tolist(), strict=True):
        sl = resolver.resolve(int(p), int(ip) & 0xFFFFFFFFFFFFFFFF)
        key = sl.site if sl is not None else f"{int(ip) & 0xFFFFFFFFFFFFFFFF:#x}"
        sites[key] = sites.get(key, 0) + c
    site_list = [k for k, _ in sorted(sites.items(), key=lambda kv: -kv[1])][:5]
    return FirstTouch(
        threads=len(tids),
        nodes=node_list,
        master_fraction=master,
        master_tid=int(tids[top]),
        sites=site_list,
        pages=pages,
        serial=master >= SERIAL_MASTER and n_program_threads >= 2,
        inferred_pages=int(ft.inferred[sel].sum()) if ft.inferred is not None else 0,
        **_huge(ft, sel, topo),
    )


def _huge(ft: Touches, sel: slice, topo) -> dict:
    """huge_pages (of the object's first-touched base pages, those a fault mapping a
    larger page placed: a transparent huge page goes whole to its first toucher's node)
    and huge_page_size (the most common such page's bytes), for FirstTouch."""
    if ft.size is None:
        return {}
    size = ft.size[sel]
    big = size > int(topo.page_size or 4096)
    if not big.any():
        return {}
    sizes, counts = np.unique(size[big], return_counts=True)
    return {"huge_pages": int(big.sum()), "huge_page_size": int(sizes[np.argmax(counts)])}
