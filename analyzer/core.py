"""analyze(): profile in, :class:`~numaprof.analyzer.model.Analysis` out (docs/analyzer.md).

The steps work on whole columns at a time: attribution is a binary search per sample
over sorted intervals, per-object statistics are bincounts over object ids, and only
objects (not samples) are ever visited in Python loops.
"""

from __future__ import annotations

import datetime as _dt
import math
import socket

import numpy as np

from numaprof import defaults
from numaprof.analyzer import attribution as att
from numaprof.analyzer import (
    borders,
    carved,
    counters,
    stream,
    symbols,
    varattr,
    walked,
)
from numaprof.analyzer import format as fmt
from numaprof.analyzer import sharing as sharing_
from numaprof.analyzer import threads as thr
from numaprof.analyzer.archive import Archive
from numaprof.analyzer.constants import constant_reads, constants_finding
from numaprof.analyzer.firsttouch import (
    fault_count,
    first_touches,
    regroup_touches,
)
from numaprof.analyzer.format import not_accesses
from numaprof.analyzer.hot_objects import (
    code_of,
    merge_container_sites,
    merge_into_sites,
    name_file_data,
    name_pointer_slots,
    tell_instances_apart,
    tell_library_blocks_apart,
)
from numaprof.analyzer.libstate import (
    allocated_by_library,
    library_code,
    library_functions,
    library_note,
    library_samples,
    library_stack_samples,
)
from numaprof.analyzer.model import (
    PLACING_POLICIES,
    Analysis,
    ObjectResult,
    ProfileInfo,
    Topology,
)
from numaprof.analyzer.objects import (
    Obj,
    _stack_frames,
    heap_intervals,
    mapping_intervals,
    name_object,
    outside_note,
    own_samples,
    short_intervals,
    static_intervals,
    thread_sites,
    tls_intervals,
)
from numaprof.analyzer.objresult import count_of, object_result, traffic_stats
from numaprof.analyzer.pages import (
    KernelPages,
    ObjectPagesIndex,
    PageNodeIndex,
    kernel_pages,
    numa_maps_pages,
    parse_numa_maps,
    rows_of_nodes,
)
from numaprof.analyzer.profile import CPU_UNKNOWN, Profile, open_profile
from numaprof.analyzer.runtime import runtime_note, runtime_samples
from numaprof.analyzer.topology import single_node

RULE_NAMES = fmt.RULE_NAMES
#: a gather's or scatter's sample: its address is the base register's, which names the
#: object (the array the lanes index) but not the element
RULE_VSIB_BASE = next(v for v, name in RULE_NAMES.items() if name == "vsib_base")


def analyze(path_or_profile, *, top: int | None = None, object_name: str | None = None,
            progress=None, budget: int = stream.BUDGET) -> Analysis:
    """Analyse a profile (a path or an opened :class:`Profile`); see docs/analyzer.md.

    ``top`` keeps the N objects with most samples, ``object_name`` only objects with that
    name (or site); ``progress(step, fraction)`` is called as the work advances.  A
    profile of more than ``budget`` samples is analysed from a weighted sub-sample of
    about that many, every sample still counted (analyzer/stream.py).
    """
    prof = path_or_profile if isinstance(path_or_profile, Profile) else open_profile(path_or_profile)
    # binaries and sources as they were at record time (rebuilt or patched since?)
    archive = Archive.read(prof.path)
    step = progress or (lambda _s, _f: None)
    # what the source of the profile warned about (e.g. perf.data without cpus)
    findings: list[str] = [str(w) for w in prof.manifest.get("warnings") or []]
    step("loading", 0.0)
    # ---- objects by address: allocations, statics, mappings --------------------------
    mappings = symbols.Mappings(prof.table("mappings"))
    resolver = symbols.CodeResolver(mappings, archive)
    objs: list[Obj] = []
    heap_iv = heap_intervals(prof.table("objects"), objs, thread_sites(prof, mappings))
    # the ranges of short-lived blocks' summaries and the statics do not overlap: one
    # layer, after the recorded blocks
    static_iv = att.Intervals.concat([short_intervals(prof.table("objects"), objs),
                                      static_intervals(mappings, objs, archive),
                                      tls_intervals(prof.table("threads"), prof.table("tls_modules"), mappings, objs,
                                                    archive)])
    map_iv = mapping_intervals(prof.table("mappings"), objs)
    layers = [heap_iv, static_iv, map_iv]
    ivs = att.Intervals.concat(layers)

    s = prof.table("samples")
    sub = None  # a large profile: every sample counted, about stream.BUDGET analysed
    if len(s["time"]) > budget:
        sub = stream.subsample(s, layers, len(objs), budget, lambda f: step("sampling", 0.1 * f),
                               base_rule=RULE_VSIB_BASE)
        s = sub.table
        findings.append(f"{sub.rows} samples: every one counted; {sub.kept} analysed for patterns, "
                        "sharing and the per-sample statistics (all of an object's when it has few, "
                        "an unbiased sub-sample of the large ones, weighted)")
    n_all = sub.rows if sub is not None else len(s["time"])
    if prof.has_topology():
        topo = prof.topology()  # a damaged one is refused, not replaced by a guess
    else:
        seen = np.unique(np.asarray(s["cpu"]))
        topo = single_node(seen[seen != CPU_UNKNOWN].tolist())
        findings.append("the profile has no recorded topology: assuming one NUMA node")
    page = int(topo.page_size or 4096)
    page_shift = page.bit_length() - 1
    N = max(topo.n_nodes, 1)
    node_ids = [n.id for n in topo.nodes]
    node_index = {nid: i for i, nid in enumerate(node_ids)}  # node id → matrix row

    # ---- threads (all samples) ---------------------------------------------------------
    tt = prof.table("threads")
    s_tid = np.asarray(s["tid"]).astype(np.int64)
    tids = thr.thread_ids(tt, s_tid)
    if sub is not None:
        tids = np.union1d(tids, sub.tids)
    s_tidx = np.searchsorted(tids, s_tid).astype(np.int32)
    s_cpu = np.asarray(s["cpu"])
    step("threads", 0.1)
    threads, tfind = thr.analyze_threads(tt, tids, s_tidx, s_cpu, s["time"], topo)
    findings.extend(tfind)
    if sub is not None:
        exact = dict(zip(sub.tids.tolist(), sub.tid_counts.tolist(), strict=True))
        for th in threads:
            th.samples = exact.get(th.tid, 0)
    cpu_row = _cpu_rows(topo, int(s_cpu.max()) + 1 if n_all else 1, node_index)

    # ---- samples with a data address ----------------------------------------------------
    step("attributing", 0.2)
    addr_all = s["addr"]
    # gathers and scatters by their base register: the object, not the element (counted
    # in their object's samples, not in its pattern, pages or traffic)
    by_base = (addr_all != 0) & (np.asarray(s["rule"]) == RULE_VSIB_BASE)
    has = (addr_all != 0) & ~by_base
    with_address = int(has.sum()) if sub is None else sub.with_address
    b_addr = np.asarray(addr_all[by_base], dtype=np.uint64)
    b_pid, b_time = np.asarray(s["pid"][by_base]), np.asarray(s["time"][by_base], dtype=np.uint64)
    b_count = sub.weight[by_base] if sub is not None else None
    b_store = np.asarray(s["access"][by_base]) >= 2  # a scatter
    n_base = len(b_addr) if sub is None else int(sub.rules[RULE_VSIB_BASE])  # exact
    del by_base
    if bool(has.all()):
        sel = slice(None)
    else:
        sel = has  # a boolean mask copies the same rows without an index array
    a_addr = np.asarray(addr_all[sel], dtype=np.uint64)
    a_time = np.asarray(s["time"][sel], dtype=np.uint64)
    a_pid = np.asarray(s["pid"][sel])
    a_tidx = s_tidx[sel]
    a_trow = cpu_row[np.asarray(s_cpu[sel])]  # matrix row of the thread's node, −1 unknown
    a_access = np.asarray(s["access"][sel])
    a_ip = np.asarray(s["ip"][sel])  # the loop each access came from (pattern contexts)
    a_regs = _access_registers(prof, s, sel)
    a_weight = None
    if (prof.path / "samples.weight.col").exists():
        w_raw = np.asarray(s["weight"][sel])
        if w_raw.any():
            a_weight = np.where(w_raw > 0, w_raw, 1).astype(np.float64)
        del w_raw
    # how many samples each kept one stands for (None: 1, the whole profile is analysed)
    a_count = sub.weight[sel] if sub is not None else None
    if a_count is not None:
        a_weight = a_count if a_weight is None else a_weight * a_count
    # HITM loads (the hardware backends' and perf c2c's data source): the line was
    # modified in another core's cache, direct evidence of sharing
    a_hitm = None
    if (prof.path / "samples.data_src.col").exists():
        a_hitm = sharing_.hitm(np.asarray(s["data_src"][sel], dtype=np.uint64))
        if not a_hitm.any():
            a_hitm = None
    del sel, has
    del s_tid

    # numaprof's own work in the program: accesses by the allocation shim's code, and to
    # its record buffers (memcpy in libc writes them).  Counted, never an object.
    own = own_samples(prof.table("mappings"), a_pid, a_addr, a_ip, a_time)
    n_own = count_of(own, a_count) if own is not None else 0
    # the OpenMP runtime's work on its own state (barrier, loop-scheduling and lock
    # counters in its heap blocks and mappings): no array of the program's either
    runtime, runtimes = runtime_samples(prof.table("mappings"), _stack_frames(prof), a_pid, a_ip, a_addr, a_time,
                                        layers, ivs, objs)
    n_runtime = count_of(runtime, a_count) if runtime is not None else 0
    # and the C library's, libm's, ...: their tables, static state and stack frames
    lib, lib_functions = library_samples(prof.table("mappings"), resolver, a_regs, a_pid, a_ip, a_addr, a_time,
                                         layers, ivs, objs, prof.table("threads"), _stack_frames(prof))
    n_lib = count_of(lib, a_count) if lib is not None else 0
    drop = None
    for part in (own, runtime, lib):
        if part is not None:
            drop = part if drop is None else drop | part
    if drop is not None and drop.any():
        keep = ~drop
        n_rmw = count_of(runtime & (a_access == 3), a_count) if runtime is not None else 0
        (a_addr, a_time, a_pid, a_tidx, a_trow, a_access, a_ip, a_weight, a_count, a_hitm,
         a_regs) = _kept(keep, a_addr, a_time, a_pid, a_tidx, a_trow, a_access, a_ip, a_weight,
                         a_count, a_hitm, a_regs)
        if n_own:
            findings.append(f"{n_own} samples ({100.0 * n_own / max(with_address, 1):.1f}% of those "
                            "with an address) were numaprof's own work (the allocation shim's code "
                            "and record buffers): left out of the objects and the traffic")
        if n_runtime:
            findings.append(runtime_note(n_runtime, n_rmw, with_address, runtimes))
    del own, runtime, lib, drop

    # Priority: heap allocations, then statics, then whole mappings (which contain both).
    a_iv = att.locate_layers(a_pid, a_addr, a_time, layers)
    a_obj = _objects_at(a_iv, ivs)
    # the border between two arrays of small blocks, where the code says it is
    if borders.settle(objs, heap_iv, a_iv, a_obj, a_ip, a_addr):
        ivs = att.Intervals.concat(layers)
    # the compiler's literals, read at fixed addresses: arithmetic's samples, counted, no
    # object (analyzer/constants.py); left out after the attribution by code, whose frame
    # instances they help find (a caller's local a library reads)
    const = constant_reads(resolver, objs, a_obj, a_pid, a_ip, a_addr, a_regs)
    if a_regs is not None:
        # what only a whole mapping (or nothing) holds: named by the code's frame and
        # registers, after the heap, static and before the mapping attribution
        # and what only an attached process's heap walk holds, named by the code (analyzer/walked.py)
        on_walked = walked.walked_blocks(objs)[a_obj]
        walked_at = np.flatnonzero(on_walked)
        was_obj, was_iv = a_obj[walked_at], a_iv[walked_at]
        # and the program's code on a block a system library allocated (or the gaps
        # around such sampled blocks, which the program's unsampled blocks may fill):
        # named by the code where it can be, else left to that block (libstate)
        on_lib = (allocated_by_library(prof.table("mappings"), _stack_frames(prof), objs, resolver)[a_obj]
                  & ~library_code(prof.table("mappings"), a_pid, a_ip, a_time))
        lib_at = np.flatnonzero(on_lib)
        lib_obj, lib_iv = a_obj[lib_at], a_iv[lib_at]
        var_iv = _variable_objects(a_regs, a_pid, a_tidx, tids, a_time, a_ip, a_addr, a_obj, a_iv,
                                   len(ivs), objs, resolver, on_walked | on_lib, const)
        if len(walked_at):
            walked.settle(objs, walked_at, was_obj, was_iv, a_obj, a_iv)
        if len(lib_at):
            walked.named_or_back(objs, lib_at, lib_obj, lib_iv, a_obj, a_iv)
        del on_walked, walked_at, was_obj, was_iv, on_lib, lib_at, lib_obj, lib_iv
        # a system library's code on stack memory no variable of the program holds: its
        # callers' frames within the library (strtof's digit buffers, vfscanf's work area)
        more = library_stack_samples(prof.table("mappings"), resolver, a_pid, a_ip, a_time, objs, a_obj)
        if more is not None:
            n_more = count_of(more, a_count)
            n_lib += n_more
            lib_functions.update(library_functions(resolver, a_pid[more], a_ip[more]))
            keep = ~more
            (a_addr, a_time, a_pid, a_tidx, a_trow, a_access, a_ip, a_weight, a_count, a_hitm,
             a_regs, a_iv, a_obj, const) = _kept(keep, a_addr, a_time, a_pid, a_tidx, a_trow, a_access, a_ip,
                                                 a_weight, a_count, a_hitm, a_regs, a_iv, a_obj, const)
            del more, keep
        # one allocation holding several arrays (a workspace carved up): one object each
        heap_iv, _ = carved.split(objs, heap_iv, a_regs, a_pid, tids[a_tidx], a_time, a_ip, a_addr, a_obj,
                                  a_iv, resolver)
        ivs = att.Intervals.concat([heap_iv, static_iv, map_iv, var_iv])
    n_const = 0
    if const is not None:
        n_const = count_of(const, a_count)
        findings.append(constants_finding(resolver, n_const, with_address, a_pid[const], a_ip[const],
                                          a_regs["insn_off"][const] if a_regs is not None else None,
                                          a_count[const] if a_count is not None else None))
        (a_addr, a_time, a_pid, a_tidx, a_trow, a_access, a_ip, a_weight, a_count, a_hitm,
         a_regs, a_iv, a_obj) = _kept(~const, a_addr, a_time, a_pid, a_tidx, a_trow, a_access, a_ip,
                                      a_weight, a_count, a_hitm, a_regs, a_iv, a_obj)
    del const
    # (the register-named stack variables are not the arrays gathers index)
    b_iv = att.locate_layers(b_pid, b_addr, b_time, [heap_iv, static_iv, map_iv])

    def object_counts() -> np.ndarray:
        """Samples per object, gathers by their base included; their objects as ivs has
        them now (sites merged since move with it)."""
        return _object_counts(a_obj, a_count, n_obj) + _object_counts(_objects_at(b_iv, ivs), b_count, n_obj)

    if n_lib:
        findings.append(library_note(n_lib, with_address, lib_functions))
    outside_mask = a_obj < 0
    outside = count_of(outside_mask, a_count)
    note = outside_note(resolver, a_pid[outside_mask], a_addr[outside_mask], a_ip[outside_mask],
                        a_count[outside_mask] if a_count is not None else None, with_address)
    if note:
        findings.append(note)
    del outside_mask

    # ---- page nodes -------------------------------------------------------------------
    step("placement", 0.4)
    pkeys, pnodes = att.latest_page_nodes(prof.table("page_nodes"), page_shift)
    if N == 1:
        a_prow = np.zeros(len(a_addr), dtype=np.int16)  # one node: every page is on it
    else:
        a_prow = np.empty(len(a_addr), dtype=np.int16)
        for c in range(0, len(a_addr), att.CHUNK):
            part = slice(c, c + att.CHUNK)
            found = att.lookup_nodes(pkeys, pnodes, att.page_keys(a_pid[part], a_addr[part], page_shift))
            a_prow[part] = rows_of_nodes(found.astype(np.int64), node_index)
    numa_maps = parse_numa_maps(prof.numa_maps(), prof.path)
    # the kernel's answer per heap object: numa_maps (its own VMAs at exit), else the
    # shim's move_pages query at its release or at exit
    obj_kernel: dict[int, KernelPages] = {}
    op_index = ObjectPagesIndex(prof.table("object_pages"))

    def kernel_of(o: Obj) -> KernelPages | None:
        if o.kind != "heap" or o.part:  # the kernel's counts are for a whole block
            return None
        nm = numa_maps_pages(o, numa_maps, prof.table("objects"), page, node_index, N)
        if nm is not None:
            return KernelPages(nm[0], "numa_maps", nm[1], nm[2])
        return kernel_pages(o, op_index, prof.table("objects"), node_index, N)

    for oi, o in enumerate(objs):
        kp = kernel_of(o)
        if kp is not None:
            obj_kernel[oi] = kp
    # objects whose pages a memory policy places: where their pages are is not where they
    # were first touched, so no sample of theirs takes its node from the first touch
    policy_placed = np.zeros(len(objs) + 1, dtype=bool)
    for oi, kp in obj_kernel.items():
        policy_placed[oi] = kp.policy in PLACING_POLICIES
    if N > 1 and obj_kernel:
        # pages never located by the collector: use the node the kernel gave for the
        # object when it is one
        single = np.full(len(objs) + 1, -1, dtype=np.int64)
        for oi, kp in obj_kernel.items():
            nz = np.flatnonzero(kp.counts)
            if len(nz) == 1:
                single[oi] = nz[0]
        fill = (a_prow < 0) & (a_obj >= 0)
        a_prow[fill] = single[a_obj[fill]]

    # first touches: first fault of each page of each interval
    fault_period = int((prof.manifest.get("collector") or {}).get("fault_period") or 1)
    ft = first_touches(prof.table("faults"), ivs, heap_iv, static_iv, map_iv, page_shift,
                        f"{prof.path}/faults.page_size.col", fault_period)
    ft_rows = None
    inferred = np.zeros(len(a_addr), dtype=bool)
    if ft is not None:
        ft_rows = cpu_row[np.minimum(ft.cpu, len(cpu_row) - 1)] if len(cpu_row) else np.full(len(ft.cpu), -1)
        ft_rows = np.where(ft.cpu < len(cpu_row), ft_rows, -1)
    if N > 1 and ft is not None:
        # pages never located: under Linux's default policy a page lives on the node of
        # the cpu that first touched it; such samples are counted as inferred
        miss = np.flatnonzero((a_prow < 0) & (a_iv >= 0) & ~policy_placed[a_obj])
        if len(miss):
            fk = ft.iv.astype(np.int64) * (1 << 36) + ft.page
            fo = np.argsort(fk, kind="stable")
            fk = fk[fo]
            ivm = a_iv[miss]
            pgm = ((a_addr[miss] >> np.uint64(page_shift)) - (ivs.start[ivm] >> np.uint64(page_shift))).astype(np.int64)
            key = ivm.astype(np.int64) * (1 << 36) + pgm
            j = np.minimum(np.searchsorted(fk, key), len(fk) - 1)
            hit = (fk[j] == key) & (ft_rows[fo[j]] >= 0)
            a_prow[miss[hit]] = ft_rows[fo[j[hit]]]
            inferred[miss[hit]] = True

    # ---- global traffic -----------------------------------------------------------------
    known = (a_trow >= 0) & (a_prow >= 0)
    w_known = a_weight[known] if a_weight is not None else None
    traffic = np.bincount(a_trow[known].astype(np.int64) * N + a_prow[known], weights=w_known,
                          minlength=N * N).reshape(N, N)
    del known
    g_local, g_load, g_imb = traffic_stats(traffic)

    # ---- objects with samples --------------------------------------------------------
    step("objects", 0.5)
    n_obj = len(objs)
    o_counts = object_counts()
    hot = [int(i) for i in np.argsort(-o_counts, kind="stable") if o_counts[i] > 0]
    for oi in hot:
        name_object(objs[oi], resolver, prof)
        if objs[oi].part:
            objs[oi].name += f" ({objs[oi].part})"
    name_file_data(objs, hot, a_obj, a_pid, a_addr, a_ip, resolver)
    tell_library_blocks_apart(objs, hot, resolver, prof)
    tell_instances_apart(objs, hot, resolver, prof)
    name_pointer_slots(objs, hot)
    one_container = merge_container_sites(objs, hot, o_counts, a_obj, ivs, resolver, prof)
    for oi in one_container:  # their blocks and first touches are the merged object's now
        obj_kernel.pop(oi, None)
        kp = kernel_of(objs[oi])
        if kp is not None:
            obj_kernel[oi] = kp
    if one_container:
        if ft is not None:
            ft = regroup_touches(ft, ivs)
        o_counts = object_counts()
        hot = [int(i) for i in np.argsort(-o_counts, kind="stable") if o_counts[i] > 0]
    if merge_into_sites(objs, hot, a_obj, a_pid, a_addr, ivs):
        o_counts = object_counts()
        hot = [int(i) for i in np.argsort(-o_counts, kind="stable") if o_counts[i] > 0]
    if object_name is not None:
        hot = [oi for oi in hot if object_name in (objs[oi].name, objs[oi].site)]
    if top is not None:
        hot = hot[: max(top, 0)]

    pn_index = PageNodeIndex(pkeys, pnodes, node_index, N, page_shift)
    iv_order = np.argsort(ivs.obj, kind="stable")
    iv_bounds = np.searchsorted(ivs.obj[iv_order], np.arange(n_obj + 1))

    def iv_members(oi):
        return iv_order[iv_bounds[oi] : iv_bounds[oi + 1]]

    order = np.argsort(a_obj, kind="stable")
    bounds = np.searchsorted(a_obj[order], np.arange(-1, n_obj + 1))
    b_obj = _objects_at(b_iv, ivs)
    gathers = _object_counts(b_obj, b_count, n_obj)
    scatters = _object_counts(np.where(b_store, b_obj, -1), b_count, n_obj)
    t_origin = int(a_time.min()) if len(a_time) else 0
    n_program_threads = sum(1 for t in threads if t.samples)
    results = []
    shared = []
    for k, oi in enumerate(hot):
        step("objects", 0.5 + 0.45 * k / max(len(hot), 1))
        idx = order[bounds[oi + 1] : bounds[oi + 2]]
        results.append(object_result(
            objs[oi], oi, idx, a_addr, a_ip, a_time, a_tidx, a_trow, a_prow, a_access, a_weight, a_count, a_iv, ivs,
            N, page, with_address, ft, ft_rows, inferred, obj_kernel.get(oi), topo, node_index, threads, resolver,
            n_program_threads, t_origin, pn_index, iv_members(oi), prof.table("objects")["time"]))
        g = int(round(float(gathers[oi]))) if oi < len(gathers) else 0
        if g:
            _add_gathers(results[-1], g, int(round(float(scatters[oi]))))
        if len(idx):
            pid = int(a_pid[idx[0]])
            results[-1].access_sites = access_sites(
                a_ip[idx], lambda ip, pid=pid: _site_of(resolver, pid, ip) or code_of(resolver, pid, ip),
                results[-1].samples)
        if len(idx) > 1:
            found = sharing_.object_sharing(
                results[-1].name, a_addr[idx], a_tidx[idx], a_time[idx], a_access[idx] >= 2,
                a_ip[idx], lambda ip, pid=pid: _site_of(resolver, pid, ip),
                hitm_loads=a_hitm[idx] if a_hitm is not None else None)
            if found is not None:
                if len(idx) != results[-1].samples:  # a sub-sample of the object's samples
                    scale = results[-1].samples / len(idx)
                    found.samples, found.writes = round(found.samples * scale), round(found.writes * scale)
                shared.append(found)
    if n_base:  # shares of all the samples that name an object
        for r in results:
            r.share = r.samples / (with_address + n_base)
        top_g = sorted((r for r in results if r.gather_samples), key=lambda r: -r.gather_samples)[:4]
        where = ", ".join(f"{r.name} {r.gather_samples}" for r in top_g)
        findings.append(f"{n_base} samples are gathers or scatters: the lanes' addresses are in "
                        "vector registers, which a software sample does not hold; each is counted "
                        "in the object its base register points into"
                        + (f" ({where})" if where else "")
                        + ", in its samples and share but not in its pattern, pages or traffic")
        mostly = [r.name for r in results if r.gather_samples * 2 > r.samples]
        if mostly:
            findings.append(f"{', '.join(mostly[:6])}: accessed mostly by gathers or scatters, "
                            "whose elements are unknown: no pattern (its other samples do not "
                            "show how the loops use it)")
    step("done", 1.0)

    m = prof.manifest
    counts = m.get("counts") or {}
    rc = sub.rules if sub is not None else np.bincount(np.asarray(s["rule"]), minlength=17)
    rules = {RULE_NAMES.get(i, str(i)): int(c) for i, c in enumerate(rc) if c}
    info = ProfileInfo(
        path=str(prof.path),
        command=list(m.get("command") or []),
        backend=str(m.get("backend") or (m.get("collector") or {}).get("backend") or "unknown"),
        backend_reason=dict(m.get("backend_reason") or {}),
        samples=n_all,
        with_address=with_address,
        gather_samples=n_base,
        # busy-waiting threads (rule spin) and waits on a divide (rule divide) access no
        # memory: not counted against coverage
        address_coverage=(with_address / (n_all - not_accesses(rules))
                          if n_all > not_accesses(rules) else 0.0),
        lost=int(counts.get("lost", 0) or 0),
        # as the collector counts it: no address although the sample is a user-space
        # memory instruction (decoder failures: unreadable, undecodable, segment, ...)
        unresolved=int(counts["unresolved"]) if "unresolved" in counts else
        n_all - with_address - rules.get("no_mem", 0) - rules.get("kernel", 0)
        - not_accesses(rules) - rules.get("vsib_base", 0),
        outside_objects=outside,
        numaprof_own=n_own,
        runtime_samples=n_runtime,
        library_samples=n_lib,
        constant_samples=n_const,
        complete=prof.complete,
        incomplete_reason=prof.incomplete_reason,
        exit_status=m.get("exit_status"),
        duration_s=_duration(m, s["time"]),
        env=dict(m.get("env") or {}),
        freq=int((m.get("sampling") or {}).get("freq", 0) or 0),
        rules=rules,
        faults=fault_count(prof.table("faults")),
        throttled=int(counts.get("throttled", 0) or 0),
        host=str(m.get("host") or ""),
        attached_pid=_attached_pid(m),
    )
    more = _more_samples(results, info.freq or defaults.FREQ, info.duration_s)
    if more:
        findings.append(more)
    ranks = _processes_of_one_program(results, threads)
    if ranks:
        findings.append(ranks)
    node_counts = _node_counters(prof, topo, info.host)
    findings.extend(counters.findings(node_counts))
    if not prof.complete:
        findings.append(f"the run did not complete ({prof.incomplete_reason or 'reason unknown'}): "
                        "the profile covers only part of it")
    return Analysis(profile=info, topology=topo, objects=results, threads=threads, traffic=traffic,
                    local_fraction=g_local, load_per_node=g_load, imbalance=g_imb, findings=findings,
                    node_counters=node_counts, sharing=shared)


def _attached_pid(manifest: dict) -> int | None:
    attach = manifest.get("attach")
    pid = attach.get("pid") if isinstance(attach, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def _add_gathers(r: ObjectResult, g: int, scatters: int) -> None:
    """Counts an object's ``g`` gather and scatter samples (rule vsib_base) in its samples
    and read/write mix.  When they are most of its samples, the others (an initialisation
    loop, a few scalar accesses) do not show how the array is accessed: no pattern from
    them, and no "needs more samples" either (more would be gathers too)."""
    n = r.samples
    r.samples = n + g
    r.gather_samples = g
    r.reads = (r.reads * n + g - scatters) / (n + g)
    r.writes = (r.writes * n + scatters) / (n + g)
    r.rmw = r.rmw * n / (n + g)
    if g > n:
        r.pattern, r.pattern_confidence, r.samples_needed, r.pattern_tentative = "unknown", 0.0, 0, False
        r.phases = []


def _objects_at(iv: np.ndarray, ivs: att.Intervals) -> np.ndarray:
    """The object of each interval index (−1: none)."""
    if not len(ivs):
        return np.full(len(iv), -1, dtype=np.int32)
    return np.where(iv >= 0, ivs.obj[np.maximum(iv, 0)], -1).astype(np.int32)


def _object_counts(a_obj: np.ndarray, a_count: np.ndarray | None, n_obj: int) -> np.ndarray:
    if not n_obj:
        return np.zeros(0, dtype=np.int64)
    on = a_obj >= 0
    return np.bincount(a_obj[on], weights=None if a_count is None else a_count[on], minlength=n_obj)


ACCESS_SITES = 3  # source lines kept per object


def access_sites(ips: np.ndarray, site_of, samples: int, top: int = ACCESS_SITES) -> list[tuple[str, int]]:
    """The ``top`` source lines (``site_of(ip)``) of the sampled instructions ``ips`` with
    the most samples, counted in ``samples`` (the object's count, of which ``ips`` may
    be a sub-sample); instructions without a line are left out."""
    if not len(ips):
        return []
    uniq, counts = np.unique(ips, return_counts=True)
    by_site: dict[str, int] = {}
    for ip, c in zip(uniq.tolist(), counts.tolist(), strict=True):
        site = site_of(ip)
        if site is not None:
            by_site[site] = by_site.get(site, 0) + c
    scale = samples / len(ips)
    ranked = sorted(by_site.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [(site, int(round(c * scale))) for site, c in ranked]


def _site_of(resolver, pid: int, ip: int) -> str | None:
    sl = resolver.resolve(pid, ip & 0xFFFFFFFFFFFFFFFF)
    return sl.site if sl is not None and sl.line > 0 else None


MIN_SHARE_FOR_MORE = 0.005  # objects below this share of the samples are not worth a note
MAX_FREQ = 20000  # Hz: a rate above this costs more than a longer run


def _processes_of_one_program(results, threads) -> str | None:
    """The finding for a profile of several processes of one program with arrays of their
    own (`numaprof record -- mpirun -np 4 ./app`): each object is one process's, named
    alike; the per-rank recording gives each rank a report and the job one answer."""
    comm = {t.pid: t.comm for t in threads}
    by_prog: dict[str, set[int]] = {}
    for o in results:
        if o.kind in ("heap", "static") and o.pid and comm.get(o.pid):
            by_prog.setdefault(comm[o.pid], set()).add(o.pid)
    if not by_prog:
        return None
    prog, pids = max(by_prog.items(), key=lambda kv: len(kv[1]))
    if len(pids) < 2:
        return None
    return (f"{len(pids)} processes of {prog} in one profile (MPI ranks?): each object is one "
            f"process's, shown with its pid; for a report per rank and one answer for the job, "
            f"record each rank: mpirun -np {len(pids)} numaprof record -o prof.%r -- ./{prog} ..., "
            "then numaprof report prof.*")


def _more_samples(results, freq: int, duration: float) -> str | None:
    """The finding for objects whose pattern needs more samples, or whose random or
    irregular answer needs more to be firm: which ones, and the sampling rate (or the
    run's length) that would give the neediest of them enough."""
    needy = [o for o in results if o.samples_needed > 0 and o.share >= MIN_SHARE_FOR_MORE
             and o.kind != "mapping"]  # a library's data, not an array of the program
    if not needy:
        return None
    # the counts are Poisson: aim three standard deviations above what is needed, so that
    # the advice is enough nearly every time, not half of it
    factor = max(_with_margin(o.samples + o.samples_needed) / o.samples for o in needy)
    unknown = [o for o in needy if o.pattern == "unknown"]
    tentative = [o for o in needy if o.pattern != "unknown"]
    parts = []
    if unknown:
        parts.append(f"{len(unknown)} object(s) need more samples for a pattern "
                     f"({_named_counts(unknown)})")
    if tentative:
        parts.append(f"{len(tentative)} object(s) with a tentative pattern (marked ?) need more "
                     f"samples to tell random from irregular ({_named_counts(tentative)})")
    how = (f"record with --freq {int(math.ceil(freq * factor / 100.0)) * 100}"
           if freq * factor <= MAX_FREQ else "record at the highest rate (--freq 20000)")
    longer = f"a run {factor:.1f}x longer" if duration > 0 else "a longer run"
    return f"{'; '.join(parts)}: {how} or {longer} (recorded at {freq} Hz)"


def _named_counts(objs) -> str:
    names = ", ".join(f"{o.name}: {o.samples_needed} more" for o in objs[:5])
    return names + (f" and {len(objs) - 5} more" if len(objs) > 5 else "")


def _with_margin(n: float) -> float:
    return n + 3.0 * math.sqrt(n)


def _node_counters(prof: Profile, topo, host: str) -> list:
    """Per-node counter deltas; the measured peak bandwidth only for a profile recorded on
    this host (the measurement cache is this machine's)."""
    if not prof.has_table("counters"):
        return []
    peak = None
    if host and host == socket.gethostname():
        from numaprof.analyzer import measure

        m = measure.load_cached(topo)
        peak = counters.peak_from_measurement(m) if m is not None else None
    return counters.node_counters(prof.table("counters"), topo, peak)


# ------------------------------------------------------------------------------ helpers

def _cpu_rows(topo: Topology, ncpu: int, node_index: dict[int, int]) -> np.ndarray:
    m = topo.node_of_cpu()
    size = max([ncpu, *(c + 1 for c in m)], default=1)
    rows = np.full(size, -1, dtype=np.int16)
    for c, nd in m.items():
        rows[c] = node_index.get(nd, -1)
    if topo.n_nodes == 1:
        rows[:] = 0  # a cpu missing from a one-node topology is still on that node
    return rows




def _duration(manifest: dict, times) -> float:
    try:
        a = _dt.datetime.fromisoformat(str(manifest["start_time"]).replace("Z", "+00:00"))
        b = _dt.datetime.fromisoformat(str(manifest["end_time"]).replace("Z", "+00:00"))
        if b >= a:
            return (b - a).total_seconds()
    except (KeyError, ValueError, TypeError):
        pass
    if len(times) < 2:
        return 0.0
    return float(int(times[len(times) - 1]) - int(times[0])) / 1e9


_REGISTER_COLUMNS = ("insn_off", "base_reg", "base_off", "size")
#: samples.bp_sp where rbp was no frame pointer (too far from rsp to store)
BP_SP_UNKNOWN = -(2**31)


def _access_registers(prof: Profile, s, sel) -> dict[str, np.ndarray] | None:
    """The register columns of the samples with an address (docs/profile-format.md), or
    None for a profile without them (hardware backends, older profiles).  ``bp`` is rbp:
    ``sp + bp_sp``, 0 where it was not stored; profiles written before ``bp_sp`` have
    rbp itself."""
    if not (prof.path / "samples.sp.col").exists():
        return None
    sp = np.asarray(s["sp"][sel])
    if not sp.any():
        return None
    out = {"sp": sp}
    for col in _REGISTER_COLUMNS:
        out[col] = np.asarray(s[col][sel])
    if (prof.path / "samples.index_reg.col").exists():
        out["index_reg"] = np.asarray(s["index_reg"][sel])
    if (prof.path / "samples.bp.col").exists():
        out["bp"] = np.asarray(s["bp"][sel])
    else:
        d = np.asarray(s["bp_sp"][sel]).astype(np.int64)
        out["bp"] = np.where(d == BP_SP_UNKNOWN, 0, sp.astype(np.int64) + d).astype(np.uint64)
    return out


def _kept(keep: np.ndarray, *columns):
    """The per-sample ``columns`` (arrays, None, or a dict of arrays: the registers) with
    only the samples ``keep`` selects."""
    return tuple(None if c is None else {k: v[keep] for k, v in c.items()} if isinstance(c, dict)
                 else c[keep] for c in columns)


def _variable_objects(regs, a_pid, a_tidx, tids, a_time, a_ip, a_addr, a_obj, a_iv, n_iv, objs: list[Obj],
                      resolver, also: np.ndarray, never: np.ndarray | None = None) -> att.Intervals:
    """Samples on no object or only on a whole mapping (and the samples ``also``; not
    those ``never``, whose frames still tell where other samples' locals are),
    attributed to variables by their frame and registers (analyzer/varattr.py): their
    objects are appended to ``objs``, a_obj and a_iv updated in place (the instances are
    intervals numbered from n_iv on); returns the instances."""
    kinds = np.array([o.kind in ("stack", "mapping") for o in objs] + [True])
    stacks = np.array([o.kind == "stack" for o in objs] + [False])
    cand = kinds[a_obj] | also  # a_obj -1 picks the last entry: no object
    if never is not None:
        cand &= ~never
    if not cand.any():
        return att.Intervals.empty()
    # an address on the stack mapping that holds the sample's stack pointer is on the
    # sampled thread's own stack, where that mapping is one thread's: glibc maps each
    # thread's stack apart; a mapping that holds the stack pointers of several threads
    # (stacks carved out of one region, a stack reused by a later thread) says nothing
    lo = np.array([o.address for o in objs] + [0], dtype=np.uint64)[a_obj]
    hi = lo + np.array([o.size for o in objs] + [0], dtype=np.uint64)[a_obj]
    sp = np.asarray(regs["sp"]).astype(np.uint64)
    own_stack = stacks[a_obj] & (sp >= lo) & (sp < hi)
    tid_of = np.asarray(tids[a_tidx]).astype(np.int64)
    pairs = np.unique(np.stack([a_obj[own_stack].astype(np.int64), tid_of[own_stack]]), axis=1)
    shared = np.flatnonzero(np.bincount(pairs[0], minlength=len(objs) + 1) > 1)
    own_stack &= ~np.isin(a_obj, shared)
    samples = varattr.Samples(pid=a_pid, tid=tids[a_tidx], time=a_time, ip=a_ip, addr=a_addr,
                              size=regs["size"], sp=regs["sp"], bp=regs["bp"], insn_off=regs["insn_off"],
                              base_reg=regs["base_reg"], base_off=regs["base_off"], region=a_obj,
                              own_stack=own_stack)
    va = varattr.attribute(samples, cand, stacks[a_obj], resolver)
    if not len(va.sample):
        return att.Intervals.empty()
    first = len(objs)
    for k, vo in enumerate(va.objects):
        mine = va.inst_obj == k
        starts = va.inst_start[mine]
        objs.append(Obj(vo.kind, ("var", *vo.key), int(va.inst_pid[mine][0]) if mine.any() else 0,
                         int(starts.min()) if len(starts) else 0,
                         int((va.inst_end[mine] - starts).max()) if len(starts) else 0,
                         count=int(mine.sum()), name=vo.name, site=vo.site, attribution=vo.attribution,
                         thread_private=vo.thread_private))
    a_obj[va.sample] = first + va.inst_obj[va.instance]
    a_iv[va.sample] = n_iv + va.instance
    n = len(va.inst_start)
    return att.Intervals(va.inst_pid, va.inst_start, va.inst_end, np.zeros(n, dtype=np.uint64),
                         np.full(n, att.NEVER, dtype=np.uint64), first + va.inst_obj)
