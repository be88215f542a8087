"""The program's objects and their names: heap allocations (the allocation shim's records,
or the heap read when attaching), static symbols from the ELF files, and the mappings
left over (stacks, anonymous memory, libraries), each as address intervals over time
that samples and faults are attributed to (docs/analyzer.md, "Attribution", "Names")."""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from numaprof.analyzer import attribution as att
from numaprof.analyzer import srcnames, staticvars, symbols, tls
from numaprof.analyzer.archive import Archive
from numaprof.analyzer.attach import KIND_ATTACH
from numaprof.analyzer.profile import Profile
from numaprof.analyzer.sourcelang import site_language

NO_STACK = 0xFFFFFFFF
ATTACH_SITE = "in the heap at attach"
ATTACH_LATE_SITE = "in the heap when sampling stopped"  # allocated while attached
STACK_SIZES = {8 << 20, (8 << 20) + 4096}  # glibc default thread stack (+ guard page)
PROT_WRITE, PROT_EXEC = 2, 4
MAP_NUMAPROF = 0x80000000  # mappings.flags: one of numaprof's own files (docs/profile-format.md)


@dataclass
class Obj:
    kind: str  # heap | static | stack | mapping
    key: tuple
    pid: int
    address: int
    size: int
    count: int = 1
    stack: int = NO_STACK
    name: str = ""
    site: str = ""
    path: str = ""
    alloc_rows: list | None = None  # objects-table rows (heap)
    attribution: str = "address"  # address | frame | register | type (analyzer/varattr.py)
    thread_private: bool = False
    # the read-only data of a loaded ELF file at no symbol (its .rodata: the compiler's
    # constants and literals): page-cache pages no placement moves, read from the caches
    read_only: bool = False
    # > 0: some of its allocations are known only from a sample of the small ones (one in
    # about this many bytes); size and count are then estimates
    sample_period: int = 0
    # such an object's intervals (index in the heap intervals: its sampled blocks and the
    # gaps between them) -> the instance they belong to (one call of the code that built
    # the array, _instances)
    iv_instance: dict | None = None
    # gaps between its sampled blocks and another site's, split halfway: its half (index
    # in the heap intervals) -> the other site's half (analyzer/borders.py moves the
    # border to where the accesses say)
    iv_border: dict | None = None
    # one of the arrays carved out of one allocation (analyzer/carved.py): the variable
    # that names it in the block's name, ``block (variable)``
    part: str = ""
    # a static whose symbol may be a function's static local (``u1.3``): the ELF file
    # whose DWARF names it, looked up only if it has samples (name_object)
    dwarf: symbols.ElfInfo | None = None
    # the name is a variable of the allocating function itself, written on the
    # allocation's line (`double *tmp = malloc(n)`, a Fortran automatic array), whichever
    # caller reached it: the same array from every call stack (hot_objects)
    site_local: bool = False
    # the arrays its allocation statement allocates, itself among them (Fortran
    # `allocate(q(n), w(n), flux(n, g))`): the others are other arrays (hot_objects)
    line_names: tuple = ()


def thread_sites(prof: Profile, mappings: symbols.Mappings) -> dict[int, int]:
    """Call stacks that are one allocation site run by several threads -> the stack that
    stands for them (absent: the stack stands for itself).

    Code run by a thread pool reaches the allocation through the pool's entry on the
    workers (`worker._omp_fn.0` <- gomp_thread_start <- start_thread) and through the
    parallel region's caller on the thread that started it (`worker._omp_fn.0` <-
    GOMP_parallel <- solve <- main): two call stacks for one line of the program.  A
    stack's site frames are its frames up to the first system-library frame (libgomp,
    libc) after the program's own code; stacks with the same site frames are one site
    when one of them goes on only through system libraries (a thread's entry), so that
    two different callers of one function through, say, qsort stay two sites."""
    ot = prof.table("objects")
    if not len(ot["stack"]):
        return {}
    frames = _stack_frames(prof)
    pid_of = dict(zip(np.asarray(ot["stack"]).astype(np.int64).tolist(),
                      np.asarray(ot["pid"]).astype(np.int64).tolist(), strict=True))
    groups: dict[tuple, list[tuple[int, bool]]] = {}
    for st, pid in pid_of.items():
        ips = frames.get(st)
        if st == NO_STACK or not ips:
            continue
        system = [_in_system_library(mappings, pid, ip) for ip in ips]
        user = next((k for k, s in enumerate(system) if not s), None)
        if user is None:
            continue
        cut = next((k for k in range(user, len(ips)) if system[k]), None)
        if cut is None:
            continue
        groups.setdefault((pid, tuple(ips[:cut])), []).append((st, all(system[cut:])))
    out = {}
    for members in groups.values():
        if len(members) > 1 and any(entry for _, entry in members):
            first = min(st for st, _ in members)
            out.update((st, first) for st, _ in members if st != first)
    return out


def _in_system_library(mappings: symbols.Mappings, pid: int, ip: int) -> bool:
    m = mappings.find(pid, ip - 1)
    return m is not None and symbols.is_system_library(m[3])


def heap_intervals(ot: dict, objs: list[Obj], sites: dict[int, int] | None = None) -> att.Intervals:
    """The heap allocations as intervals, one object per allocation site (call stack;
    ``sites``: stacks that are one site, thread_sites)."""
    sites = sites or {}
    n = len(ot["addr"])
    if n == 0:
        return att.Intervals.empty()
    pid = np.asarray(ot["pid"]).astype(np.int64)
    start = np.asarray(ot["addr"]).astype(np.uint64)
    size = np.asarray(ot["size"]).astype(np.uint64)
    t0 = np.asarray(ot["time"]).astype(np.uint64)
    ft = np.asarray(ot["free_time"]).astype(np.uint64)
    t1 = np.where(ft > 0, ft, att.NEVER)
    stack = np.asarray(ot["stack"]).astype(np.int64)
    kind = np.asarray(ot["kind"])
    holder = ot["holder"]
    # allocations one row stands for: a block freed and allocated again by its thread at
    # the same address is one row (numaprof-collect's shim conversion); older profiles: 1
    col = ot.get("instances")
    instances = np.maximum(np.asarray(col).astype(np.int64), 1) if col is not None and len(col) == n \
        else np.ones(n, dtype=np.int64)
    summary = _summary_rows(ot, n)
    obj = np.empty(n, dtype=np.int64)
    groups: dict[tuple, int] = {}
    for i, (p, st, a, sz) in enumerate(zip(pid.tolist(), stack.tolist(), start.tolist(), size.tolist(), strict=True)):
        st = sites.get(st, st)
        # allocations from the same call stack are one object ("site"); without a stack
        # each allocation stands alone
        key = ("heap", p, st) if st != NO_STACK else ("heap", p, -1, a, i)
        g = groups.get(key)
        if g is None:
            g = groups[key] = len(objs)
            o = Obj("heap", key, p, a, sz, count=0, stack=st, alloc_rows=[])
            if kind[i] == KIND_ATTACH:
                # found in the heap when numaprof attached: named by the variable that
                # pointed to it then (analyzer/attach.py), if any
                o.name, o.site = str(holder[i]), ATTACH_LATE_SITE if t0[i] else ATTACH_SITE
            objs.append(o)
        o = objs[g]
        o.count += int(instances[i])
        o.size = max(o.size, sz)
        o.alloc_rows.append(i)
        obj[i] = g
    period = np.asarray(ot["sample_period"]).astype(np.int64)
    # a summary of short-lived blocks holds no address of its own (short_intervals)
    exact = att.Intervals(pid, start, np.where(summary, start, start + size), t0, t1, obj)
    if not (period > 0).any():
        return exact
    _estimate_sampled_sites(objs, obj, period > 0, period, size.astype(np.int64), t0, t1,
                            instances, summary)
    sampled = (period > 0) & ~summary
    if not sampled.any():
        return exact
    inst = _instances(pid, obj, sampled, t0)
    fills, fill_inst, halves = _site_fills(exact, sampled, period, inst)
    for k in np.flatnonzero(sampled).tolist():
        o = objs[obj[k]]
        o.iv_instance = o.iv_instance if o.iv_instance is not None else {}
        o.iv_instance[k] = int(inst[k])
    for k, (g, u) in enumerate(zip(fills.obj.tolist(), fill_inst.tolist(), strict=True)):
        objs[g].iv_instance[n + k] = u
    for a, b in halves:
        o = objs[int(fills.obj[a])]
        o.iv_border = o.iv_border if o.iv_border is not None else {}
        o.iv_border[n + a] = n + b
    return att.Intervals.concat([exact, fills])


#: A site's sampled blocks start a new instance (another call of the code building the
#: array: the next level of a multigrid, the next time step's temporary) after at least
#: this many sampled blocks of other sites were allocated since its last one ...
INSTANCE_BREAK = 4
#: ... and after more than the site's interleaving explains: the expected number of
#: breaks found in one instance by chance is at most this.
INSTANCE_FALSE_BREAKS = 0.05


def _break_threshold(gaps: np.ndarray) -> int:
    """How many other sites' sampled blocks between two of a site's make a new instance.

    Blocks allocated in one loop with other sites' blocks (`vals[i] = new double[27];
    inds[i] = new int[27]`) are sampled in proportion to their bytes, so the number of
    other sites' sampled blocks between two of this site's is geometric, with a mean m
    set by the site's share of the bytes: P(gap = 0) = 1 / (m + 1), which the few real
    breaks (gaps of whole other arrays) barely move.  A gap longer than any such run is
    likely to be among the site's gaps (false breaks <= INSTANCE_FALSE_BREAKS) is a
    break."""
    if not len(gaps):
        return INSTANCE_BREAK
    zero = float(np.mean(gaps == 0))
    m = (1.0 - zero) / zero if zero > 0 else float(np.mean(np.sort(gaps)[:max(1, len(gaps) * 9 // 10)]))
    if m <= 0:
        return INSTANCE_BREAK
    t = np.log(INSTANCE_FALSE_BREAKS / len(gaps)) / np.log(m / (m + 1.0))
    return max(INSTANCE_BREAK, int(np.ceil(t)))


def _instances(pid, obj, sampled, t0) -> np.ndarray:
    """Instance number of each sampled block within its site (-1 for the others).

    An array of small blocks is built in a burst of allocations from one call stack; a
    second array from the same call stack (`lv->u = grid_alloc(n)` in a loop over
    levels) is another burst, with other sites' blocks allocated in between (the level's
    f and r).  Interleaving (`a[i] = malloc(..); b[i] = malloc(..)` in one loop) does
    not break an instance (_break_threshold)."""
    inst = np.full(len(obj), -1, dtype=np.int64)
    for p in np.unique(pid[sampled]).tolist():
        rows = np.flatnonzero(sampled & (pid == p))
        rows = rows[np.argsort(t0[rows], kind="stable")]
        site_of = obj[rows].astype(np.int64)
        for site in np.unique(site_of).tolist():
            at = np.flatnonzero(site_of == site)  # positions in the allocation order
            gaps = np.diff(at) - 1  # other sites' sampled blocks in between
            new = np.r_[0, (gaps >= _break_threshold(gaps)).astype(np.int64)]
            inst[rows[at]] = np.cumsum(new)
    return inst


def _summary_rows(ot: dict, n: int) -> np.ndarray:
    """Rows that summarise a site's short-lived blocks (extent > 0; profiles before the
    column have none)."""
    col = ot.get("extent")
    if col is None or len(col) != n:
        return np.zeros(n, dtype=bool)
    return np.asarray(col).astype(np.uint64) > 0


def short_intervals(ot: dict, objs: list[Obj]) -> att.Intervals:
    """The address ranges of the summaries of short-lived blocks (objects rows with an
    extent), each its site's from the first allocation to the last release it counts.

    The allocation shim does not record a block that lives less than about a sampling
    period one by one; it counts it in its site's summary with the lowest address and
    the end of the highest block of the site's blocks (docs/record.md).  A sample that
    falls in no recorded block but inside such a range, while the site was allocating
    there, is the site's: the attribution is by range, below the exact blocks and the
    statics and above the mappings, so a block of another site in the range that was
    recorded keeps its samples."""
    n = len(ot["addr"])
    summary = _summary_rows(ot, n)
    if not summary.any():
        return att.Intervals.empty()
    owner = np.full(n, -1, dtype=np.int64)
    for g, o in enumerate(objs):
        if o.kind == "heap" and o.alloc_rows:
            owner[o.alloc_rows] = g
    rows = np.flatnonzero(summary & (owner >= 0))
    start = np.asarray(ot["addr"]).astype(np.uint64)[rows]
    extent = np.asarray(ot["extent"]).astype(np.uint64)[rows]
    end = np.where(start <= np.uint64(att.NEVER) - extent, start + extent, np.uint64(att.NEVER))
    t1 = np.asarray(ot["free_time"]).astype(np.uint64)[rows]
    for g in np.unique(owner[rows]).tolist():
        o = objs[g]
        if all(summary[r] for r in o.alloc_rows):
            o.attribution = "short_lived"
    return att.Intervals(np.asarray(ot["pid"]).astype(np.int64)[rows], start, end,
                         np.asarray(ot["time"]).astype(np.uint64)[rows],
                         np.where(t1 > 0, t1, att.NEVER), owner[rows])


def _estimate_sampled_sites(objs, obj, sampled, period, size, t0, t1, instances=None,
                            summary=None) -> None:
    """Size and allocation count of the sites known from sampled small allocations.

    A small allocation of s bytes is recorded with probability about s / period (the
    shim's countdown over the bytes a thread allocates), so each recorded one stands for
    period / s allocations, period bytes in all (the estimate heap profilers make,
    e.g. tcmalloc's sampled heap profile).  Size: the most bytes the site had live at
    once; count: the allocations it made.
    """
    n = len(obj)
    instances = np.ones(n, dtype=np.int64) if instances is None else instances
    summary = np.zeros(n, dtype=bool) if summary is None else summary
    weight = np.where(sampled, np.maximum(period, size), size)  # bytes each row stands for
    count = np.where(sampled, np.maximum(period / np.maximum(size, 1), 1.0), 1.0) * instances
    for g in np.unique(obj[sampled]).tolist():
        rows = np.flatnonzero(obj == g)
        o = objs[g]
        o.sample_period = int(period[rows].max())
        o.attribution = "allocation_sample"
        o.count = int(round(float(count[rows].sum())))
        # live bytes over time: + at each allocation, - at each release (a summary's
        # short-lived blocks are left out: their lifetimes are not known one by one)
        rows = rows[~summary[rows]]
        if len(rows):
            o.size = _most_live(weight[rows], t0[rows], t1[rows])


def _most_live(weight: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> int:
    """The most bytes live at once: + at each allocation, - at each release."""
    times = np.concatenate([t0, t1])
    delta = np.concatenate([weight, -weight])
    order = np.lexsort((delta, times))  # a release before an allocation at one time
    return int(np.cumsum(delta[order]).max())


#: Sampled blocks of one site further apart than this many sampling periods are not
#: taken to hold the site's blocks between them.
FILL_GAP_PERIODS = 4
#: Blocks looked at past a sampled one for its neighbour alive at the same time.
FILL_SCAN = 256


def _site_fills(iv: att.Intervals, sampled: np.ndarray, period: np.ndarray,
                inst: np.ndarray) -> tuple[att.Intervals, np.ndarray, list[tuple[int, int]]]:
    """The heap between sampled small blocks, as their sites', the instance of the
    block each gap takes its site from (``inst``: per block), and the pairs of fills that
    are the two halves of one gap.

    An array built from many small allocations (a row per malloc) was allocated by one
    call stack in a loop, and the allocator laid its blocks out one after another; only
    some were sampled.  For each sampled block, the next recorded block in address order
    alive at the same time (its neighbour), if no more than FILL_GAP_PERIODS sampling
    periods away, bounds a gap of unsampled blocks:
      - both blocks of one site: the gap is the site's;
      - of two sites, one of them a lone block between two blocks of the other (the row
        pointers `g[i] = malloc(...)` allocated between the rows of a grid): the gap is
        the other's (unless the accesses say the lone block is an array of its own, too
        small to be sampled twice: analyzer/borders.py);
      - otherwise it is split halfway, each half to the site of the block beside it (until
        the accesses say where the border is, analyzer/borders.py).
    A gap is the site's from the first of its two blocks' allocations (the blocks between
    were allocated after it, before the second) until the first of their releases.  An
    unsampled block of another site in a gap is counted as the gap's site's: the price of
    not recording every small allocation.
    """
    rows = []
    halves = []
    for p in np.unique(iv.pid[sampled]).tolist():
        m = np.flatnonzero(iv.pid == p)
        order = m[np.argsort(iv.start[m], kind="stable")]
        st, en = iv.start[order].astype(np.int64), iv.end[order].astype(np.int64)
        a0, a1, ob = iv.t0[order], iv.t1[order], iv.obj[order]
        sm, per, ins = sampled[order], period[order], inst[order]
        n = len(order)
        nxt = np.full(n, -1, dtype=np.int64)
        for i in np.flatnonzero(sm).tolist():
            limit = en[i] + FILL_GAP_PERIODS * per[i]
            j = i + 1
            while j < n and j - i <= FILL_SCAN and st[j] < limit:
                if a0[j] < a1[i] and a0[i] < a1[j] and st[j] >= en[i]:  # alive at the same time
                    nxt[i] = j
                    break
                j += 1
        prv = np.full(n, -1, dtype=np.int64)
        for i in np.flatnonzero(nxt >= 0)[::-1].tolist():
            prv[nxt[i]] = i
        # the site of each block's neighbour after it and before it (-1: none)
        after = np.where(nxt >= 0, ob[np.maximum(nxt, 0)], -1)
        before = np.where(prv >= 0, ob[np.maximum(prv, 0)], -1)
        for i in np.flatnonzero(nxt >= 0).tolist():
            j = int(nxt[i])
            lo, hi = en[i], st[j]
            t0, t1 = min(a0[i], a0[j]), min(a1[i], a1[j])
            if hi <= lo:
                continue
            if ob[i] == ob[j]:
                if sm[j]:
                    rows.append((p, lo, hi, t0, t1, ob[i], ins[i]))
            elif after[j] == ob[i]:
                rows.append((p, lo, hi, t0, t1, ob[i], ins[i]))  # j: a lone block inside i's site
                if sm[j]:  # ... or the end of another array (borders.py decides)
                    rows.append((p, hi, hi, t0, t1, ob[j], ins[j]))
                    halves.append((len(rows) - 2, len(rows) - 1))
            elif before[i] == ob[j]:
                rows.append((p, lo, lo, t0, t1, ob[i], ins[i]))  # i: a lone block inside j's site
                rows.append((p, lo, hi, t0, t1, ob[j], ins[j]))  # ... or the start of another array
                halves.append((len(rows) - 2, len(rows) - 1))
            else:
                mid = lo + (hi - lo) // 2
                rows.append((p, lo, mid, t0, t1, ob[i], ins[i]))
                if sm[j]:
                    rows.append((p, mid, hi, t0, t1, ob[j], ins[j]))
                    halves.append((len(rows) - 2, len(rows) - 1))
    if not rows:
        return att.Intervals.empty(), np.zeros(0, dtype=np.int64), []
    # built column by column: a row mixes int64 addresses and uint64 times
    cols = list(zip(*rows, strict=True))
    u64 = [np.array([int(x) for x in c], dtype=np.uint64) for c in cols[1:5]]
    return (att.Intervals(np.array(cols[0], dtype=np.int64), *u64, np.array(cols[5], dtype=np.int64)),
            np.array(cols[6], dtype=np.int64), halves)


def static_intervals(mappings: symbols.Mappings, objs: list[Obj], archive: Archive) -> att.Intervals:
    rows = []
    groups: dict[tuple, int] = {}
    seen: set[tuple[int, str]] = set()
    for pid, (start, _, pgoff, path) in mappings.files():
        if (pid, path) in seen:
            continue
        info = symbols.elf_info(path, archive)
        if info is None or not info.objects:
            continue
        bias = info.load_bias(start, pgoff)
        if bias is None:
            continue
        seen.add((pid, path))
        base = os.path.basename(path)
        commons = info.common_blocks() if any(o.section.startswith(".bss") for o in info.objects) else {}
        for sym in _split_commons(info.objects, commons):
            if not 0 <= sym.address + bias <= (1 << 64) - sym.size:
                continue  # a mapping or symbol no process could have (damaged or crafted)
            key = ("static", path, sym.name, sym.address)
            g = groups.get(key)
            if g is None:
                g = groups[key] = len(objs)
                name, site = _static_name(sym, base)
                if "_MOD_" in sym.name and staticvars.is_descriptor(info, sym.address):
                    # a module's allocatable array: the symbol is its descriptor, the
                    # elements are a heap object of the same name
                    name += " (descriptor)"
                # (every gcc binary has a `completed.0`: the DWARF is read only for
                # such a symbol that was sampled)
                objs.append(Obj("static", key, pid, sym.address + bias, sym.size, name=name, site=site,
                                 path=path, dwarf=info if "." in sym.name else None))
            rows.append((pid, sym.address + bias, sym.size, g))
    return att.Intervals.whole_run(rows)


def _split_commons(objects: list[symbols.StaticSymbol], commons: dict) -> list[symbols.StaticSymbol]:
    """Replace each Fortran COMMON block symbol by its member arrays (from DWARF); a
    member extends to the next one, the last to the end of the block."""
    if not commons:
        return objects
    out = []
    for sym in objects:
        members = commons.get(sym.name)
        if not members or not all(sym.address <= a < sym.address + sym.size for _, a in members):
            out.append(sym)
            continue
        ends = [a for _, a in members[1:]] + [sym.address + sym.size]
        block = sym.name.rstrip("_")
        for (name, addr), end in zip(members, ends, strict=True):
            if end > addr:
                out.append(symbols.StaticSymbol(name, addr, end - addr, f"/{block}/ {sym.section}", sym.writable))
    return out


def tls_intervals(tt: dict, mt: dict, mappings: symbols.Mappings, objs: list[Obj],
                  archive: Archive) -> att.Intervals:
    """The program's thread-local variables, its libraries' too (analyzer/tls.py): one
    object each, with an instance per thread whose pointer the collector recorded;
    thread-private.  ``tt`` the threads table, ``mt`` tls_modules."""
    pointers = tls.thread_pointers(tt)
    recorded = tls.module_offsets(mt, mappings)
    rows: list[tuple[int, int, int, int]] = []
    groups: dict[tuple, int] = {}
    seen: set[tuple[int, str]] = set()
    for pid, (_, _, _, path) in mappings.files():
        if pid not in pointers or (pid, path) in seen:
            continue
        seen.add((pid, path))
        info = symbols.elf_info(path, archive)
        found = tls.layout(info, recorded.get((pid, path))) if info is not None else None
        if found is None:
            continue
        base = os.path.basename(path)
        for p, lo, size, sym in tls.rows(pointers, pid, *found):
            key = ("tls", path, sym.name)
            g = groups.get(key)
            if g is None:
                name, site = _static_name(sym, base)
                g = groups[key] = len(objs)
                objs.append(Obj("static", key, p, lo, size, count=0, name=name, site=site, path=path,
                                thread_private=True))
            objs[g].count += 1
            rows.append((p, lo, size, g))
    return att.Intervals.whole_run(rows)


def _static_name(sym: symbols.StaticSymbol, base: str) -> tuple[str, str]:
    """(name, site) of a static array; gfortran's module variables ``__mod_MOD_var`` are
    named ``var``, their module goes to the site."""
    name, site = sym.name, f"{sym.section}@{base}"
    if name.startswith("__") and "_MOD_" in name:
        module, var = name[2:].split("_MOD_", 1)
        if module and var:
            return var, f"module {module} {site}"
    return name, site


def _name_static_local(o: Obj) -> None:
    """A function's static local (``u1.3`` in gcc's symbol table) is named as its DWARF
    declares it, the function goes to the site."""
    info, o.dwarf = o.dwarf, None
    found = staticvars.source_name(info, o.key[3])
    if found is not None:
        var, function = found
        o.name, o.site = var, f"in {function} {o.site}" if function else o.site


def own_samples(mt: dict, pid, addr, ip, time) -> np.ndarray | None:
    """Which samples are numaprof's own: their address or instruction is in a mapping the
    collector flagged as numaprof's (the shim library, the shim's record files)."""
    flags = np.asarray(mt["flags"])
    rows = np.flatnonzero(flags & MAP_NUMAPROF)
    if not len(rows) or not len(addr):
        return None
    iv = mapping_rows(mt, rows)
    return (att.locate(pid, addr, time, iv) >= 0) | (att.locate(pid, ip, time, iv) >= 0)


def mapping_rows(mt: dict, rows: np.ndarray) -> att.Intervals:
    """Intervals of the mappings-table rows ``rows``, each from its time to the end."""
    start = np.asarray(mt["start"])[rows].astype(np.uint64)
    n = len(rows)
    return att.Intervals(np.asarray(mt["pid"])[rows].astype(np.int64), start,
                         start + np.asarray(mt["len"])[rows].astype(np.uint64),
                         np.asarray(mt["time"])[rows].astype(np.uint64),
                         np.full(n, att.NEVER, dtype=np.uint64), np.arange(n, dtype=np.int64))


def mapping_intervals(mt: dict, objs: list[Obj]) -> att.Intervals:
    n = len(mt["start"])
    if n == 0:
        return att.Intervals.empty()
    prot = np.asarray(mt["prot"])
    known_prot = bool(prot.any())
    rows = []
    groups: dict[tuple, int] = {}
    own = np.asarray(mt["flags"]) & MAP_NUMAPROF
    # The brk heap is first seen as an anonymous mapping at the heap's start, then as
    # [heap] again each time it grows (hundreds of rows in a program that allocates row
    # by row): one object and one interval, from the first row's time to its largest
    # extent (overlapping intervals would count its pages once a row).
    heap_starts = {(int(p), int(a)) for p, a, path in zip(mt["pid"], mt["start"], mt["path"], strict=True)
                   if str(path) == "[heap]"}
    heaps: dict[int, list[int]] = {}  # object -> [pid, start, length, time]
    # files a process executes code of: their other read-only mappings are their constants
    images = ({(int(p), str(path)) for p, path, pr in zip(mt["pid"], mt["path"], prot, strict=True)
               if int(pr) & PROT_EXEC} if known_prot else set())
    for i in range(n):
        if own[i]:
            continue  # numaprof's own file (see own_samples)
        path = str(mt["path"][i])
        if path.startswith("//anon") or path == "/dev/zero (deleted)":
            path = ""  # perf's name for anonymous memory
        start, length = int(mt["start"][i]), int(mt["len"][i])
        pid = int(mt["pid"][i])
        heap = (not path or path == "[heap]") and (pid, start) in heap_starts
        if heap:
            path = "[heap]"
        read_only = False
        if path.startswith("/") and known_prot and not int(prot[i]) & PROT_WRITE:
            if int(prot[i]) & PROT_EXEC or (pid, path) not in images:
                continue  # code, and a file the program maps read-only itself: not an object
            read_only = True  # an ELF image's constants (.rodata, .eh_frame)
        if path.startswith("[stack") or (not path and length in STACK_SIZES):
            kind, name = "stack", path or f"stack@{start:#x}"
        elif path.startswith("/"):
            kind, name = "mapping", f"{os.path.basename(path)}@{start:#x}"
        else:
            kind, name = "mapping", path or f"anon@{start:#x}"
        key = ("map", pid, start, path) if heap else ("map", pid, start, length, path)
        g = groups.get(key)
        if g is None:
            g = groups[key] = len(objs)
            objs.append(Obj(kind, key, pid, start, length, name=name, site=path or "anonymous mapping",
                             path=path, read_only=read_only))
        if heap:
            h = heaps.setdefault(g, [pid, start, length, int(mt["time"][i])])
            h[2], h[3] = max(h[2], length), min(h[3], int(mt["time"][i]))
            objs[g].size = h[2]
            continue
        rows.append((pid, start, length, int(mt["time"][i]), g))
    rows.extend((pid, start, length, time, g) for g, (pid, start, length, time) in heaps.items())
    if not rows:
        return att.Intervals.empty()
    r = np.array(rows, dtype=np.uint64)
    return att.Intervals(r[:, 0].astype(np.int64), r[:, 1], r[:, 1] + r[:, 2], r[:, 3],
                         np.full(len(rows), att.NEVER, dtype=np.uint64), r[:, 4].astype(np.int64))


def name_object(o: Obj, resolver: symbols.CodeResolver, prof: Profile) -> None:
    if o.dwarf is not None:
        _name_static_local(o)
    if o.name or o.kind != "heap":
        return
    fallback = f"heap@{o.address:#x}"
    if o.stack == NO_STACK:
        o.name, o.site = fallback, o.site or "?"
        return
    frames = _stack_frames(prof)
    ips = frames.get(o.stack, [])
    roots = [str(prof.manifest.get("cwd") or ""), str(prof.path.parent)]
    site = resolver.allocation_site(o.pid, ips)  # the user's frame (symbols.py)
    if site is None:
        o.name, o.site = fallback, "?"
        return
    o.site = site.site
    var = None
    if site.function.startswith("numaprof_replicate") or site.file.endswith("numaprof_place.h"):
        o.name = _replica_name(resolver, o, ips, roots)
        return
    if site.line > 0:
        var, named_at = _assigned(site, roots, resolver.archive)
        first = var
        # an allocation wrapper (it returns the block): its caller's variable names the
        # array, up to a few wrappers deep (xmalloc inside new_grid inside main)
        # (a wrapper that builds a grid row by row, `g[i][j] = calloc(...)` returning g,
        # names the rows after its caller's variable: `lv->u[][]`)
        # (an out-parameter, `v.values = new double[n]` in `InitializeVector(Vector &v,
        # int n)`, names the array after what its caller passes: `InitializeVector(b, n)`
        # -> `b.values`, at that call; a caller passing the same name keeps the site)
        callers = itertools.islice(resolver.user_frames(o.pid, ips), 1, 4)  # resolved only if needed
        cur, at, rows, suffix = var, named_at, "", ""
        while at is not None:
            part = srcnames.returned_part(str(at[0]), at[1].line, cur, site_language(at[1].file, at[1].function),
                                          resolver.archive)
            if part is None:
                passed = _passed_from_caller(cur, at, callers, roots, resolver.archive)
                if passed is None:
                    break
                if passed[0] != cur:  # the site is where the name is written (patches use both)
                    o.site = passed[1][1].site
                cur, at = passed
                var, named_at, suffix = cur, at, rows
                continue
            rows = part + rows
            caller = next(callers, None)
            if caller is None:
                break
            cur, at = _assigned(caller, roots, resolver.archive)  # `return xmalloc(n)` passes it on again
            if cur is not None:
                var, named_at, o.site, suffix = cur, at, caller.site, rows
        if var is not None:
            o.line_names = srcnames.allocated_names(
                str(named_at[0]), named_at[1].line, site_language(named_at[1].file, named_at[1].function),
                resolver.archive)
            # a member of the object a member function works on: `Mesh::m_pos`
            var = srcnames.member_name(str(named_at[0]), named_at[1], var,
                                       site_language(named_at[1].file, named_at[1].function), resolver.archive) + suffix
            local = var == first and _LOCAL_NAME.fullmatch(var) is not None
            var = element_name(var, o.count)
            o.site_local = local
        elif named_at is not None and ips:
            var = _compiler_temporary(resolver, o.pid, ips[0], site, named_at[0])
            o.site_local = var is not None  # one statement's, whoever called
    o.name = var or o.site


_LOCAL_NAME = re.compile(r"[A-Za-z_]\w*")
TEMPORARY_TEXT = 40  # characters of a statement kept in a compiler temporary's name


def _compiler_temporary(resolver, pid: int, ip: int, site, src) -> str | None:
    """``(temporary) where (pc <= zero)``: a block the compiled code of a Fortran statement
    that allocates nothing itself mallocs directly -- gfortran's temporary for a WHERE
    mask, an array expression whose sides overlap, an array-valued function's result --
    named by the statement.  Not a block a library allocated for the statement (its frame
    comes first: libgfortran's buffers for an OPEN), nor an ALLOCATE it did not read."""
    if site_language(site.file, site.function) != "fortran":
        return None
    first = resolver.resolve(pid, ip, return_address=True)
    if first is None or (first.file, first.line) != (site.file, site.line):
        return None
    text = " ".join(_source_line(src, site.line).split("!", 1)[0].split())
    if not text or re.search(r"\ballocate\b", text, re.IGNORECASE):
        return None
    if len(text) > TEMPORARY_TEXT:
        text = text[: TEMPORARY_TEXT - 1].rstrip() + "…"
    return f"(temporary) {text}"


def call_result_name(resolver, pid: int, ret_ip: int) -> tuple[str, str] | None:
    """(name, site) of the block a call in the program's code returned (runtime return
    address ``ret_ip``), for accesses through the returned pointer that no variable's
    location names and no tracked block holds: the variable the call's line assigns it
    to, or the Fortran statement whose compiler temporary it is (``(temporary) where
    (den < 0.3d0)``, gfortran's WHERE mask), as a block from that call is named when the
    allocation shim sampled it (name_object); None when the line names nothing."""
    site = resolver.allocation_site(pid, [ret_ip])
    if site is None or site.line <= 0:
        return None
    var, named_at = _assigned(site, [], resolver.archive)
    if var is None and named_at is not None:
        var = _compiler_temporary(resolver, pid, ret_ip, site, named_at[0])
    return (var, site.site) if var else None


def _passed_from_caller(name: str | None, at, callers, roots: list[str], archive: Archive):
    """(name, (source path, caller)) of an array the function at ``at`` allocated into
    its parameter (srcnames.through_parameter), named by the caller's argument; None
    when the name is not reached through a parameter or the caller's call is not read."""
    if name is None:
        return None
    lang = site_language(at[1].file, at[1].function)
    via = srcnames.through_parameter(str(at[0]), at[1].line, name, lang, archive)
    if via is None:
        return None
    caller = next(callers, None)
    if caller is None:
        return None
    src = srcnames.find_source(caller.file, [r for r in roots if r], archive)
    if src is None:
        return None
    got = srcnames.through_argument(str(src), caller.line, caller.column, at[1].function, via,
                                    site_language(caller.file, caller.function), archive, caller.body_call)
    return None if got is None else (got, (src, caller))


_REPLICATE_CALL = re.compile(r"\bnumaprof_replicate\s*\(\s*([A-Za-z_][\w.>-]*)")


def _replica_name(resolver, o, ips, roots: list[str]) -> str:
    """The copies numaprof_replicate (numaprof_place.h) maps for each node: named after
    the pointer its caller passed (``table (copies)``), read from the caller's line."""
    for frame in itertools.islice(resolver.user_frames(o.pid, ips), 1, 4):
        if frame.file.endswith("numaprof_place.h"):
            continue
        src = srcnames.find_source(frame.file, [r for r in roots if r], resolver.archive)
        m = _REPLICATE_CALL.search(_source_line(src, frame.line))
        if m:
            return f"{m.group(1)} (copies)"
        break
    return "numaprof_replicate copies"


def _source_line(path, line: int) -> str:
    """Line ``line`` (1-based) of the source file ``path``; "" when it cannot be read."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines() if path else []
    except OSError:
        return ""
    return lines[line - 1] if 0 < line <= len(lines) else ""


_ANY_SUBSCRIPT = re.compile(r"\[([^\[\]]*)\]")


def element_name(name: str, count: int) -> str:
    """The name of a site's blocks when it made ``count`` allocations: every element's
    (`m_rows[i].push_back(e)` or `a[i] = malloc(n)` in a loop builds `m_rows[]`, `a[]`);
    a constant subscript stays (`bufs[0]`, the same element again and again)."""
    if count <= 1:
        return name
    # innermost subscripts first, each made bracket-free so that the one holding it is
    # seen next (`cells[size_t(x[i] * n) % n]` -> `cells[]`)
    out = name
    while True:
        step = _ANY_SUBSCRIPT.sub(lambda m: f"\x00{m.group(1)}\x01" if m.group(1).strip().isdigit() else "\x02", out)
        if step == out:
            return out.replace("\x02", "[]").replace("\x00", "[").replace("\x01", "]")
        out = step


def _assigned(site, roots: list[str], archive: Archive):
    """(name, (source path, site)) of the variable the allocation at ``site`` is assigned
    to; (None, (path, site)) when the line assigns nothing; (None, None) without source.
    ``site.call`` tells which array of a Fortran ``allocate`` statement the call made."""
    src = srcnames.find_source(site.file, [r for r in roots if r], archive)
    if src is None:
        return None, None
    return (srcnames.assigned_name(str(src), site.line, site.column, site_language(site.file, site.function),
                                   call=site.call, archive=archive), (src, site))


def _stack_frames(prof: Profile) -> dict[int, list[int]]:
    cached = getattr(prof, "_nmp_frames", None)
    if cached is not None:
        return cached
    sf = prof.table("stack_frames")
    out: dict[int, list[int]] = {}
    if len(sf["stack"]):
        order = np.lexsort((np.asarray(sf["depth"]), np.asarray(sf["stack"])))
        for st, ip in zip(np.asarray(sf["stack"])[order].tolist(), np.asarray(sf["ip"])[order].tolist(),
                          strict=True):
            out.setdefault(st, []).append(ip)
    prof._nmp_frames = out
    return out


#: Samples with an address outside every object above this share of those with an address
#: get a finding saying where they went.
OUTSIDE_NOTE_SHARE = 0.05
#: The most distinct addresses looked up for that finding (the rest are counted by page).
OUTSIDE_LOOKUPS = 20000


def outside_note(resolver: symbols.CodeResolver, pid: np.ndarray, addr: np.ndarray, ip: np.ndarray,
                 weight: np.ndarray | None, with_address: int) -> str | None:
    """Where the samples with a data address but no object went, when they are a notable
    share of those with an address: the file and section they read (data with no symbol
    of its own: the constants and literals a compiler emits into .rodata), or no mapping
    at all; each with the code that made most of them.  None below OUTSIDE_NOTE_SHARE."""
    w = np.ones(len(addr)) if weight is None else np.asarray(weight, dtype=np.float64)
    total = float(w.sum())
    if not len(addr) or total < OUTSIDE_NOTE_SHARE * max(with_address, 1):
        return None
    keys = np.asarray(addr, dtype=np.uint64)
    if len(np.unique(keys)) > OUTSIDE_LOOKUPS:
        keys = keys & ~np.uint64(0xFFF)  # the page tells the mapping and, mostly, the section
    pid = np.asarray(pid).astype(np.int64)
    pairs, inverse = np.unique(np.stack([pid, keys.astype(np.int64)]), axis=1, return_inverse=True)
    places = [_place(resolver, int(p), int(a) & 0xFFFFFFFFFFFFFFFF) for p, a in pairs.T.tolist()]
    names = sorted(set(places))
    place_of = np.array([names.index(p) for p in places])[inverse.ravel()]  # per sample
    totals = np.bincount(place_of, weights=w, minlength=len(names))
    parts = []
    for g in np.argsort(-totals, kind="stable").tolist():
        place, n = names[g], float(totals[g])
        rows = np.flatnonzero(place_of == g)
        if n < OUTSIDE_NOTE_SHARE * max(with_address, 1) or len(parts) == 3:
            break
        ips, inv = np.unique(np.stack([pid[rows], np.asarray(ip)[rows].astype(np.int64)]), axis=1,
                             return_inverse=True)
        top = int(np.argmax(np.bincount(inv.ravel(), weights=w[rows])))
        sl = resolver.resolve(int(ips[0, top]), int(ips[1, top]) & 0xFFFFFFFFFFFFFFFF)
        site = f", most from {sl.site}" if sl is not None and sl.line > 0 else ""
        parts.append(f"{n:.0f} {place}{site}")
    if not parts:
        return None
    return (f"{total:.0f} samples ({100.0 * total / max(with_address, 1):.0f}% of those with an "
            f"address) are in no object: " + "; ".join(parts))


def _place(resolver: symbols.CodeResolver, pid: int, addr: int) -> str:
    """What holds a data address in no object, in words."""
    m = resolver.mappings.find(pid, addr)
    if m is None:
        return "at addresses in no mapping the collector saw"
    base = os.path.basename(m[3]) or m[3]
    found = resolver.elf_address(pid, addr) if m[3].startswith("/") else None
    sec = found[0].section_at(found[1]) if found is not None else None
    if sec is None:
        return f"in {base}"
    name, writable = sec
    if writable:
        return f"in {base}'s {name}, at no symbol"
    return (f"in {base}'s read-only {name}, at no symbol (constants and literals the "
            f"compiler put there)")
