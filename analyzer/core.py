"""analyze(): profile in, :class:`~numaprof.analyzer.model.Analysis` out (docs/analyzer.md).

The steps work on whole columns at a time: attribution is a binary search per sample
over sorted intervals, per-object statistics are bincounts over object ids, and only
objects (not samples) are ever visited in Python loops.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import math
import os
import re
import socket
from dataclasses import dataclass

import numpy as np

from numaprof import defaults
from numaprof.analyzer import attribution as att
from numaprof.analyzer import classifier, counters, patterns, srcnames, symbols, varattr
from numaprof.analyzer import features as feat
from numaprof.analyzer import format as fmt
from numaprof.analyzer import sharing as sharing_
from numaprof.analyzer import threads as thr
from numaprof.analyzer.archive import Archive
from numaprof.analyzer.attach import KIND_ATTACH
from numaprof.analyzer.model import (
    PLACING_POLICIES,
    Analysis,
    FirstTouch,
    ObjectAccess,
    ObjectResult,
    ProfileInfo,
    Topology,
)
from numaprof.analyzer.profile import CPU_UNKNOWN, Profile, open_profile
from numaprof.analyzer.topology import single_node
from numaprof.errors import ProfileError

NO_STACK = 0xFFFFFFFF
ATTACH_SITE = "in the heap at attach"
STACK_SIZES = {8 << 20, (8 << 20) + 4096}  # glibc default thread stack (+ guard page)
PROT_WRITE = 2
MAP_NUMAPROF = 0x80000000  # mappings.flags: one of numaprof's own files (docs/profile-format.md)
_RULES = re.compile(r"^#define\s+NMP_SAMPLE_RULES\(R\)\s*\\\s*$", re.M)
_RULE = re.compile(r"^\s*R\((\w+),\s*(\w+),\s*(\d+)\)\s*(\\)?\s*$")


def _rule_names(text: str) -> dict[int, str]:
    """samples.rule value -> rule name, from NMP_SAMPLE_RULES in numaprof_format.h: the one
    list the collector's enum and its collector.json counts are generated from."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _RULES.match(line)), None)
    if start is None:
        raise fmt.FormatDefinitionError(f"{fmt.HEADER_NAME}: no NMP_SAMPLE_RULES list")
    rules = [(int(m.group(3)), m.group(2)) for m in fmt._block(lines, start, _RULE)]
    names = dict(rules)
    if len(names) != len(rules) or len(set(names.values())) != len(rules) or max(names) > 255:
        raise fmt.FormatDefinitionError(f"{fmt.HEADER_NAME}: NMP_SAMPLE_RULES repeats a rule "
                                        "or a value outside the u8 column")
    return names


RULE_NAMES = _rule_names(fmt.header_path().read_text())
SERIAL_MASTER = 0.9
FAULT_PAGES_LIMIT = 1 << 27  # base pages the huge-page faults may expand to (512 GiB of 4 KiB)


@dataclass
class _Obj:
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


def analyze(path_or_profile, *, top: int | None = None, object_name: str | None = None,
            progress=None) -> Analysis:
    """Analyse a profile (a path or an opened :class:`Profile`); see docs/analyzer.md.

    ``top`` keeps the N objects with most samples, ``object_name`` only objects with that
    name (or site); ``progress(step, fraction)`` is called as the work advances.
    """
    prof = path_or_profile if isinstance(path_or_profile, Profile) else open_profile(path_or_profile)
    # binaries and sources as they were at record time (rebuilt or patched since?)
    archive = Archive.read(prof.path)
    step = progress or (lambda _s, _f: None)
    # what the source of the profile warned about (e.g. perf.data without cpus)
    findings: list[str] = [str(w) for w in prof.manifest.get("warnings") or []]
    step("loading", 0.0)
    s = prof.table("samples")
    n_all = len(s["time"])
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
    s_tidx = np.searchsorted(tids, s_tid).astype(np.int32)
    s_cpu = np.asarray(s["cpu"])
    step("threads", 0.1)
    threads, tfind = thr.analyze_threads(tt, tids, s_tidx, s_cpu, s["time"], topo)
    findings.extend(tfind)
    cpu_row = _cpu_rows(topo, int(s_cpu.max()) + 1 if n_all else 1, node_index)

    # ---- samples with a data address ----------------------------------------------------
    step("attributing", 0.2)
    addr_all = s["addr"]
    has = addr_all != 0
    with_address = int(has.sum())
    if with_address == n_all:
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
    del sel, has
    del s_tid

    # numaprof's own work in the program: accesses by the allocation shim's code, and to
    # its record buffers (memcpy in libc writes them).  Counted, never an object.
    own = _own_samples(prof.table("mappings"), a_pid, a_addr, a_ip, a_time)
    n_own = int(own.sum()) if own is not None else 0
    if n_own:
        keep = ~own
        a_addr, a_time, a_pid, a_tidx = a_addr[keep], a_time[keep], a_pid[keep], a_tidx[keep]
        a_trow, a_access, a_ip = a_trow[keep], a_access[keep], a_ip[keep]
        if a_weight is not None:
            a_weight = a_weight[keep]
        if a_regs is not None:
            a_regs = {k: v[keep] for k, v in a_regs.items()}
        findings.append(f"{n_own} samples ({100.0 * n_own / max(with_address, 1):.1f}% of those "
                        "with an address) were numaprof's own work (the allocation shim's code "
                        "and record buffers): left out of the objects and the traffic")
    del own

    mappings = symbols.Mappings(prof.table("mappings"))
    resolver = symbols.CodeResolver(mappings, archive)
    objs: list[_Obj] = []
    heap_iv = _heap_intervals(prof.table("objects"), objs)
    static_iv = _static_intervals(mappings, objs, archive)
    map_iv = _mapping_intervals(prof.table("mappings"), objs)
    ivs = att.Intervals.concat([heap_iv, static_iv, map_iv])
    # Priority: heap allocations, then statics, then whole mappings (which contain both).
    a_iv = np.full(len(a_addr), -1, dtype=np.int32)
    offset = 0
    for part in (heap_iv, static_iv, map_iv):
        todo = np.flatnonzero(a_iv < 0) if offset else slice(None)
        if len(part):
            loc = att.locate(a_pid[todo], a_addr[todo], a_time[todo], part)
            a_iv[todo] = np.where(loc >= 0, loc + offset, -1)
        offset += len(part)
    if len(ivs):
        a_obj = np.where(a_iv >= 0, ivs.obj[np.maximum(a_iv, 0)], -1).astype(np.int32)
    else:
        a_obj = np.full(len(a_iv), -1, dtype=np.int32)
    if a_regs is not None:
        # what only a whole mapping (or nothing) holds: named by the code's frame and
        # registers, after the heap, static and before the mapping attribution
        var_iv = _variable_objects(a_regs, a_pid, a_tidx, tids, a_time, a_ip, a_addr, a_obj, a_iv,
                                   len(ivs), objs, resolver)
        ivs = att.Intervals.concat([heap_iv, static_iv, map_iv, var_iv])
    outside = int((a_obj < 0).sum())

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
            a_prow[part] = _rows_of_nodes(found.astype(np.int64), node_index)
    numa_maps = _parse_numa_maps(prof.numa_maps(), prof.path)
    # the kernel's answer per heap object: numa_maps (its own VMAs at exit), else the
    # shim's move_pages query at its release or at exit
    obj_kernel: dict[int, _KernelPages] = {}
    op_index = _ObjectPagesIndex(prof.table("object_pages"))
    for oi, o in enumerate(objs):
        if o.kind == "heap":
            nm = _numa_maps_pages(o, numa_maps, prof.table("objects"), page, node_index, N)
            if nm is not None:
                obj_kernel[oi] = _KernelPages(nm[0], "numa_maps", nm[1], nm[2])
            else:
                kp = _kernel_pages(o, op_index, prof.table("objects"), node_index, N)
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
    ft = _first_touches(prof.table("faults"), ivs, heap_iv, static_iv, map_iv, page_shift,
                        f"{prof.path}/faults.page_size.col")
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
    g_local, g_load, g_imb = _traffic_stats(traffic)

    # ---- objects with samples --------------------------------------------------------
    step("objects", 0.5)
    n_obj = len(objs)
    o_counts = np.bincount(a_obj[a_obj >= 0], minlength=n_obj) if n_obj else np.zeros(0, dtype=np.int64)
    hot = [int(i) for i in np.argsort(-o_counts, kind="stable") if o_counts[i] > 0]
    for oi in hot:
        _name(objs[oi], resolver, prof)
    if object_name is not None:
        hot = [oi for oi in hot if object_name in (objs[oi].name, objs[oi].site)]
    if top is not None:
        hot = hot[: max(top, 0)]

    pn_index = _PageNodeIndex(pkeys, pnodes, node_index, N, page_shift)
    iv_order = np.argsort(ivs.obj, kind="stable")
    iv_bounds = np.searchsorted(ivs.obj[iv_order], np.arange(n_obj + 1))

    def iv_members(oi):
        return iv_order[iv_bounds[oi] : iv_bounds[oi + 1]]

    order = np.argsort(a_obj, kind="stable")
    bounds = np.searchsorted(a_obj[order], np.arange(-1, n_obj + 1))
    t_origin = int(a_time.min()) if len(a_time) else 0
    n_program_threads = sum(1 for t in threads if t.samples)
    results = []
    shared = []
    for k, oi in enumerate(hot):
        step("objects", 0.5 + 0.45 * k / max(len(hot), 1))
        idx = order[bounds[oi + 1] : bounds[oi + 2]]
        results.append(_object_result(
            objs[oi], oi, idx, a_addr, a_ip, a_time, a_tidx, a_trow, a_prow, a_access, a_weight, a_iv, ivs,
            N, page, with_address, ft, ft_rows, inferred, obj_kernel.get(oi), topo, node_index, threads, resolver,
            n_program_threads, t_origin, pn_index, iv_members(oi), prof.table("objects")["time"]))
        if len(idx) > 1:
            pid = int(a_pid[idx[0]])
            found = sharing_.object_sharing(
                results[-1].name, a_addr[idx], a_tidx[idx], a_time[idx], a_access[idx] >= 2,
                a_ip[idx], lambda ip, pid=pid: _site_of(resolver, pid, ip))
            if found is not None:
                shared.append(found)
    step("done", 1.0)

    m = prof.manifest
    counts = m.get("counts") or {}
    rules = {}
    if n_all:
        rc = np.bincount(np.asarray(s["rule"]), minlength=17)
        rules = {RULE_NAMES.get(i, str(i)): int(c) for i, c in enumerate(rc) if c}
    info = ProfileInfo(
        path=str(prof.path),
        command=list(m.get("command") or []),
        backend=str(m.get("backend") or (m.get("collector") or {}).get("backend") or "unknown"),
        backend_reason=dict(m.get("backend_reason") or {}),
        samples=n_all,
        with_address=with_address,
        # busy-waiting threads (rule spin) access no memory: not counted against coverage
        address_coverage=(with_address / (n_all - rules.get("spin", 0))
                          if n_all > rules.get("spin", 0) else 0.0),
        lost=int(counts.get("lost", 0) or 0),
        # as the collector counts it: no address although the sample is a user-space
        # memory instruction (decoder failures: unreadable, undecodable, segment, ...)
        unresolved=int(counts["unresolved"]) if "unresolved" in counts else
        n_all - with_address - rules.get("no_mem", 0) - rules.get("kernel", 0)
        - rules.get("spin", 0),
        outside_objects=outside,
        numaprof_own=n_own,
        complete=prof.complete,
        incomplete_reason=prof.incomplete_reason,
        exit_status=m.get("exit_status"),
        duration_s=_duration(m, s["time"]),
        env=dict(m.get("env") or {}),
        freq=int((m.get("sampling") or {}).get("freq", 0) or 0),
        rules=rules,
        faults=len(prof.table("faults")["time"]),
        throttled=int(counts.get("throttled", 0) or 0),
        host=str(m.get("host") or ""),
    )
    more = _more_samples(results, info.freq or defaults.FREQ, info.duration_s)
    if more:
        findings.append(more)
    node_counts = _node_counters(prof, topo, info.host)
    findings.extend(counters.findings(node_counts))
    if not prof.complete:
        findings.append(f"the run did not complete ({prof.incomplete_reason or 'reason unknown'}): "
                        "the profile covers only part of it")
    return Analysis(profile=info, topology=topo, objects=results, threads=threads, traffic=traffic,
                    local_fraction=g_local, load_per_node=g_load, imbalance=g_imb, findings=findings,
                    node_counters=node_counts, sharing=shared)


def _site_of(resolver, pid: int, ip: int) -> str | None:
    sl = resolver.resolve(pid, ip & 0xFFFFFFFFFFFFFFFF)
    return sl.site if sl is not None and sl.line > 0 else None


MIN_SHARE_FOR_MORE = 0.005  # objects below this share of the samples are not worth a note
MAX_FREQ = 20000  # Hz: a rate above this costs more than a longer run


def _more_samples(results, freq: int, duration: float) -> str | None:
    """The finding for objects whose pattern needs more samples: which ones, and the
    sampling rate (or the run's length) that would give the neediest of them enough."""
    needy = [o for o in results if o.samples_needed > 0 and o.share >= MIN_SHARE_FOR_MORE
             and o.kind != "mapping"]  # a library's data, not an array of the program
    if not needy:
        return None
    # the counts are Poisson: aim three standard deviations above what is needed, so that
    # the advice is enough nearly every time, not half of it
    factor = max(_with_margin(o.samples + o.samples_needed) / o.samples for o in needy)
    names = ", ".join(f"{o.name}: {o.samples_needed} more" for o in needy[:5])
    if len(needy) > 5:
        names += f" and {len(needy) - 5} more"
    how = (f"record with --freq {int(math.ceil(freq * factor / 100.0)) * 100}"
           if freq * factor <= MAX_FREQ else "record at the highest rate (--freq 20000)")
    longer = f"a run {factor:.1f}x longer" if duration > 0 else "a longer run"
    return (f"{len(needy)} object(s) need more samples for a pattern ({names}): {how} or "
            f"{longer} (recorded at {freq} Hz)")


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


def _rows_of_nodes(nodes: np.ndarray, node_index: dict[int, int]) -> np.ndarray:
    if all(k == v for k, v in node_index.items()):
        return np.where((nodes >= 0) & (nodes < len(node_index)), nodes, -1)
    lut = np.full(max(node_index) + 2, -1, dtype=np.int64)
    for nid, row in node_index.items():
        lut[nid] = row
    return np.where((nodes >= 0) & (nodes <= max(node_index)), lut[np.clip(nodes, 0, max(node_index))], -1)


def _traffic_stats(t: np.ndarray) -> tuple[float, list[float], float]:
    total = float(t.sum())
    if total <= 0:
        return 0.0, [0.0] * len(t), 0.0
    load = t.sum(axis=0) / total
    return float(np.trace(t) / total), [float(x) for x in load], float(load.max() / load.mean())


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


def _heap_intervals(ot: dict, objs: list[_Obj]) -> att.Intervals:
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
    obj = np.empty(n, dtype=np.int64)
    groups: dict[tuple, int] = {}
    for i, (p, st, a, sz) in enumerate(zip(pid.tolist(), stack.tolist(), start.tolist(), size.tolist(), strict=True)):
        # allocations from the same call stack are one object ("site"); without a stack
        # each allocation stands alone
        key = ("heap", p, st) if st != NO_STACK else ("heap", p, -1, a, i)
        g = groups.get(key)
        if g is None:
            g = groups[key] = len(objs)
            o = _Obj("heap", key, p, a, sz, count=0, stack=st, alloc_rows=[])
            if kind[i] == KIND_ATTACH:
                # found in the heap when numaprof attached: named by the variable that
                # pointed to it then (analyzer/attach.py), if any
                o.name, o.site = str(holder[i]), ATTACH_SITE
            objs.append(o)
        o = objs[g]
        o.count += 1
        o.size = max(o.size, sz)
        o.alloc_rows.append(i)
        obj[i] = g
    return att.Intervals(pid, start, start + size, t0, t1, obj)


def _static_intervals(mappings: symbols.Mappings, objs: list[_Obj], archive: Archive) -> att.Intervals:
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
                objs.append(_Obj("static", key, pid, sym.address + bias, sym.size, name=name, site=site,
                                 path=path))
            rows.append((pid, sym.address + bias, sym.size, g))
    if not rows:
        return att.Intervals.empty()
    r = np.array(rows, dtype=np.uint64)
    n = len(rows)
    return att.Intervals(r[:, 0].astype(np.int64), r[:, 1], r[:, 1] + r[:, 2], np.zeros(n, dtype=np.uint64),
                         np.full(n, att.NEVER, dtype=np.uint64), r[:, 3].astype(np.int64))


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


def _static_name(sym: symbols.StaticSymbol, base: str) -> tuple[str, str]:
    """(name, site) of a static array; gfortran's module variables ``__mod_MOD_var`` are
    named ``var``, their module goes to the site."""
    name, site = sym.name, f"{sym.section}@{base}"
    if name.startswith("__") and "_MOD_" in name:
        module, var = name[2:].split("_MOD_", 1)
        if module and var:
            return var, f"module {module} {site}"
    return name, site


def _own_samples(mt: dict, pid, addr, ip, time) -> np.ndarray | None:
    """Which samples are numaprof's own: their address or instruction is in a mapping the
    collector flagged as numaprof's (the shim library, the shim's record files)."""
    flags = np.asarray(mt["flags"])
    rows = np.flatnonzero(flags & MAP_NUMAPROF)
    if not len(rows) or not len(addr):
        return None
    start = np.asarray(mt["start"])[rows].astype(np.uint64)
    n = len(rows)
    iv = att.Intervals(np.asarray(mt["pid"])[rows].astype(np.int64), start,
                       start + np.asarray(mt["len"])[rows].astype(np.uint64),
                       np.asarray(mt["time"])[rows].astype(np.uint64),
                       np.full(n, att.NEVER, dtype=np.uint64), np.arange(n, dtype=np.int64))
    return (att.locate(pid, addr, time, iv) >= 0) | (att.locate(pid, ip, time, iv) >= 0)


def _mapping_intervals(mt: dict, objs: list[_Obj]) -> att.Intervals:
    n = len(mt["start"])
    if n == 0:
        return att.Intervals.empty()
    prot = np.asarray(mt["prot"])
    known_prot = bool(prot.any())
    rows = []
    groups: dict[tuple, int] = {}
    own = np.asarray(mt["flags"]) & MAP_NUMAPROF
    for i in range(n):
        if own[i]:
            continue  # numaprof's own file (see _own_samples)
        path = str(mt["path"][i])
        if path.startswith("//anon") or path == "/dev/zero (deleted)":
            path = ""  # perf's name for anonymous memory
        start, length = int(mt["start"][i]), int(mt["len"][i])
        pid = int(mt["pid"][i])
        if path.startswith("/") and known_prot and not int(prot[i]) & PROT_WRITE:
            continue  # code and read-only file data: not an object
        if path.startswith("[stack") or (not path and length in STACK_SIZES):
            kind, name = "stack", path or f"stack@{start:#x}"
        elif path.startswith("/"):
            kind, name = "mapping", f"{os.path.basename(path)}@{start:#x}"
        else:
            kind, name = "mapping", path or f"anon@{start:#x}"
        key = ("map", pid, start, length, path)
        g = groups.get(key)
        if g is None:
            g = groups[key] = len(objs)
            objs.append(_Obj(kind, key, pid, start, length, name=name, site=path or "anonymous mapping",
                             path=path))
        rows.append((pid, start, length, int(mt["time"][i]), g))
    if not rows:
        return att.Intervals.empty()
    r = np.array(rows, dtype=np.uint64)
    return att.Intervals(r[:, 0].astype(np.int64), r[:, 1], r[:, 1] + r[:, 2], r[:, 3],
                         np.full(len(rows), att.NEVER, dtype=np.uint64), r[:, 4].astype(np.int64))


_REGISTER_COLUMNS = ("sp", "bp", "insn_off", "base_reg", "base_off", "size")


def _access_registers(prof: Profile, s, sel) -> dict[str, np.ndarray] | None:
    """The register columns of the samples with an address (docs/profile-format.md), or
    None for a profile without them (hardware backends, older profiles)."""
    if not (prof.path / "samples.sp.col").exists():
        return None
    sp = np.asarray(s["sp"][sel])
    if not sp.any():
        return None
    out = {"sp": sp}
    for col in _REGISTER_COLUMNS[1:]:
        out[col] = np.asarray(s[col][sel])
    return out


def _variable_objects(regs, a_pid, a_tidx, tids, a_time, a_ip, a_addr, a_obj, a_iv, n_iv, objs: list[_Obj],
                      resolver) -> att.Intervals:
    """Samples on no object or only on a whole mapping, attributed to variables by their
    frame and registers (analyzer/varattr.py): their objects are appended to ``objs``,
    a_obj and a_iv updated in place (the instances are intervals numbered from n_iv on);
    returns the instances."""
    kinds = np.array([o.kind in ("stack", "mapping") for o in objs] + [True])
    stacks = np.array([o.kind == "stack" for o in objs] + [False])
    cand = kinds[a_obj]  # a_obj -1 picks the last entry: no object
    if not cand.any():
        return att.Intervals.empty()
    samples = varattr.Samples(pid=a_pid, tid=tids[a_tidx], time=a_time, ip=a_ip, addr=a_addr,
                              size=regs["size"], sp=regs["sp"], bp=regs["bp"], insn_off=regs["insn_off"],
                              base_reg=regs["base_reg"], base_off=regs["base_off"], region=a_obj)
    va = varattr.attribute(samples, cand, stacks[a_obj], resolver)
    if not len(va.sample):
        return att.Intervals.empty()
    first = len(objs)
    for k, vo in enumerate(va.objects):
        mine = va.inst_obj == k
        starts = va.inst_start[mine]
        objs.append(_Obj(vo.kind, ("var", *vo.key), int(va.inst_pid[mine][0]) if mine.any() else 0,
                         int(starts.min()) if len(starts) else 0,
                         int((va.inst_end[mine] - starts).max()) if len(starts) else 0,
                         count=int(mine.sum()), name=vo.name, site=vo.site, attribution=vo.attribution,
                         thread_private=vo.thread_private))
    a_obj[va.sample] = first + va.inst_obj[va.instance]
    a_iv[va.sample] = n_iv + va.instance
    n = len(va.inst_start)
    return att.Intervals(va.inst_pid, va.inst_start, va.inst_end, np.zeros(n, dtype=np.uint64),
                         np.full(n, att.NEVER, dtype=np.uint64), first + va.inst_obj)


def _name(o: _Obj, resolver: symbols.CodeResolver, prof: Profile) -> None:
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
    if site.line > 0:
        var, named_at = _assigned(site, roots, resolver.archive)
        # an allocation wrapper (it returns the block): its caller's variable names the
        # array, up to a few wrappers deep (xmalloc inside new_grid inside main)
        callers = itertools.islice(resolver.user_frames(o.pid, ips), 1, 4)  # resolved only if needed
        cur, at = var, named_at
        while at is not None and srcnames.returns_allocation(
                str(at[0]), at[1].line, cur, symbols.source_language(at[1].file), resolver.archive):
            caller = next(callers, None)
            if caller is None:
                break
            cur, at = _assigned(caller, roots, resolver.archive)  # `return xmalloc(n)` passes it on again
            if cur is not None:
                var, named_at, o.site = cur, at, caller.site
        if var is not None:
            # a member of the object a member function works on: `Mesh::m_pos`
            var = srcnames.member_name(str(named_at[0]), named_at[1], var,
                                       symbols.source_language(named_at[1].file), resolver.archive)
    o.name = var or o.site


def _assigned(site, roots: list[str], archive: Archive):
    """(name, (source path, site)) of the variable the allocation at ``site`` is assigned
    to; (None, (path, site)) when the line assigns nothing; (None, None) without source.
    ``site.call`` tells which array of a Fortran ``allocate`` statement the call made."""
    src = srcnames.find_source(site.file, [r for r in roots if r], archive)
    if src is None:
        return None, None
    return (srcnames.assigned_name(str(src), site.line, site.column, symbols.source_language(site.file),
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


@dataclass
class _FirstTouch:
    iv: np.ndarray  # interval of each first-touched page
    page: np.ndarray  # page index inside the interval
    tid: np.ndarray
    cpu: np.ndarray
    ip: np.ndarray
    pid: np.ndarray
    obj: np.ndarray  # object id


def _first_touches(ft: dict, ivs, heap_iv, static_iv, map_iv, page_shift,
                   where="faults") -> _FirstTouch | None:
    if len(ft["time"]) == 0 or len(ivs) == 0:
        return None
    row, addr = _fault_pages(ft, page_shift, where)
    n = len(row)
    time = np.asarray(ft["time"], dtype=np.uint64)[row]
    pid = np.asarray(ft["pid"])[row]
    where = np.full(n, -1, dtype=np.int64)
    offset = 0
    for part in (heap_iv, static_iv, map_iv):
        todo = np.flatnonzero(where < 0)
        if len(part) and len(todo):
            loc = att.locate(pid[todo], addr[todo], time[todo], part)
            where[todo] = np.where(loc >= 0, loc + offset, -1)
        offset += len(part)
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
    # grouped by object so that each object's first touches are one slice
    by_obj = np.argsort(ivs.obj[iv], kind="stable")
    iv, pg, ok = iv[by_obj], pg[by_obj], ok[by_obj]
    obj = ivs.obj[iv]
    r = row[ok]
    return _FirstTouch(iv, pg, np.asarray(ft["tid"])[r].astype(np.int64), np.asarray(ft["cpu"])[r].astype(np.int64),
                       np.asarray(ft["ip"])[r].astype(np.uint64), pid[ok].astype(np.int64), obj)


def _fault_pages(ft: dict, page_shift: int, where="faults") -> tuple[np.ndarray, np.ndarray]:
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


def _first_touch_of(oi, ft: _FirstTouch | None, topo, n_program_threads, resolver) -> FirstTouch:
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
    )


def _object_result(o: _Obj, oi, idx, a_addr, a_ip, a_time, a_tidx, a_trow, a_prow, a_access, a_weight, a_iv, ivs,
                   N, page, with_address, ft, ft_rows, inferred, kernel, topo, node_index, threads, resolver,
                   n_program_threads, t_origin, pn_index, members, alloc_times) -> ObjectResult:
    n = len(idx)
    iv = a_iv[idx]
    off = (a_addr[idx] - ivs.start[iv]).astype(np.int64)
    span = (ivs.end[iv] - ivs.start[iv]).astype(np.float64)
    pos = np.minimum(off / np.maximum(span, 1), np.nextafter(1.0, 0))
    # page numbers as the kernel sees them (an allocation rarely starts on a page
    # boundary): what first touch, move_pages and the recommender's policies act on
    shift = np.uint64(page.bit_length() - 1)
    pg = ((a_addr[idx] >> shift) - (ivs.start[iv] >> shift)).astype(np.int64)
    acc = a_access[idx]
    known_acc = np.count_nonzero(acc)
    reads = float(np.count_nonzero(acc == 1) / known_acc) if known_acc else 0.0
    stores = float(np.count_nonzero(acc == 2) / known_acc) if known_acc else 0.0
    rmw = float(np.count_nonzero(acc == 3) / known_acc) if known_acc else 0.0
    w = a_weight[idx] if a_weight is not None else None
    trow, prow = a_trow[idx], a_prow[idx]
    known = (trow >= 0) & (prow >= 0)
    traffic = np.bincount(trow[known].astype(np.int64) * N + prow[known], weights=None if w is None else w[known],
                          minlength=N * N).reshape(N, N)
    local, load, imb = _traffic_stats(traffic)
    # pages per node: the kernel's answer for the whole object (numa_maps, or move_pages
    # at its release or at exit), else the located pages, else the nodes of the first
    # touches (right only under the default policy)
    if kernel is not None:
        pages_by_node, pages_source = [int(x) for x in kernel.counts], kernel.source
    else:
        pages_by_node, pages_source = [int(x) for x in pn_index.pages(members, ivs, page)], "move_pages"
    page_key = iv.astype(np.int64) * (1 << 36) + pg
    features, windows = feat.object_features(a_time[idx], a_tidx[idx], pos, page_key, a_ip[idx])
    pattern, conf = patterns.classify(features)
    needed = classifier.samples_needed(features) if pattern == "unknown" else 0
    first_touch = _first_touch_of(oi, ft, topo, n_program_threads, resolver)
    if kernel is None and first_touch.pages and (
            sum(pages_by_node) == 0 or (N == 1 and first_touch.pages > sum(pages_by_node))):
        lo, hi = np.searchsorted(ft.obj, oi), np.searchsorted(ft.obj, oi, side="right")
        rows = ft_rows[lo:hi]
        pages_by_node = [int(x) for x in np.bincount(rows[rows >= 0], minlength=N)[:N]]
        pages_source = "first_touch"
    if sum(pages_by_node) == 0:
        pages_source = "none"
    spans = ((ivs.end[members] - np.uint64(1)) >> shift) - (ivs.start[members] >> shift) + np.uint64(1)
    n_pages = max(1, int(spans.max()) if len(members) else -(-int(o.size) // page))
    access = ObjectAccess(page=pg.astype(np.int64), thread=a_tidx[idx].astype(np.int32),
                          # unweighted samples share one read-only 1.0 instead of n copies
                          weight=w if w is not None else np.broadcast_to(np.float64(1.0), (n,)),
                          write=acc >= 2, n_pages=n_pages,
                          time=(a_time[idx] - np.uint64(t_origin)).astype(np.int64))
    return ObjectResult(
        name=o.name or f"{o.kind}@{o.address:#x}",
        site=o.site,
        kind=o.kind,
        address=int(o.address),
        size=int(o.size),
        samples=n,
        share=n / with_address if with_address else 0.0,
        pattern=pattern,
        pattern_confidence=conf,
        samples_needed=needed,
        reads=reads,
        writes=stores + rmw,
        rmw=rmw,
        first_touch=first_touch,
        pages_by_node=pages_by_node,
        traffic=traffic,
        local_fraction=local,
        load_per_node=load,
        imbalance=imb,
        count=o.count,
        threads=int(len(np.unique(a_tidx[idx]))),
        phases=patterns.phases(windows, t_origin, pattern),
        features=features,
        access=access,
        unplaced_samples=int(n - known.sum()),
        inferred_samples=int(inferred[idx].sum()),
        pages_source=pages_source,
        alloc_time=(int(np.min(np.asarray(alloc_times)[o.alloc_rows]))
                    if o.alloc_rows else 0),
        pages_policy=kernel.policy if kernel is not None else "",
        pages_policy_mixed=kernel.mixed if kernel is not None else False,
        attribution=o.attribution,
        thread_private=o.thread_private,
    )


class _PageNodeIndex:
    """Pages per node inside address ranges, from the located pages (move_pages)."""

    def __init__(self, keys, nodes, node_index, N, page_shift):
        self.keys, self.N, self.shift = keys, N, page_shift
        rows = _rows_of_nodes(nodes.astype(np.int64), node_index)
        onehot = np.zeros((len(keys) + 1, N), dtype=np.int64)
        ok = rows >= 0
        onehot[1:][ok, rows[ok]] = 1
        self.cum = np.cumsum(onehot, axis=0)

    def pages(self, members, ivs, page) -> np.ndarray:
        if len(self.keys) == 0 or len(members) == 0:
            return np.zeros(self.N, dtype=np.int64)
        t1 = ivs.t1[members]
        alive = members[t1 == att.NEVER]
        # reused addresses: pages are where the allocations alive at the end put them
        use = alive if len(alive) else members
        lo = att.page_keys(ivs.pid[use], ivs.start[use], self.shift)
        hi = att.page_keys(ivs.pid[use], ivs.end[use] - np.uint64(1), self.shift)
        a = np.searchsorted(self.keys, lo)
        b = np.searchsorted(self.keys, hi, side="right")
        return (self.cum[b] - self.cum[a]).sum(axis=0)


@dataclass
class ObjectPages:
    """A heap object's pages by node as the kernel reported them, sampled or not."""

    name: str
    site: str
    kind: str
    address: int
    size: int
    alloc_time: int
    pages_by_node: list[int]
    pages_source: str  # numa_maps | move_pages_at_exit | move_pages_at_free
    pages_policy: str
    pages_policy_mixed: bool


def kernel_object_pages(path_or_profile) -> list[ObjectPages]:
    """Every heap object of a profile whose pages the kernel located (numa_maps, or the
    shim's move_pages at release or exit), with or without samples: what a recording
    that has few data addresses (a TCG guest) still says for certain about placement."""
    prof = path_or_profile if isinstance(path_or_profile, Profile) else open_profile(path_or_profile)
    symbols.use_archive(prof.path)
    topo = prof.topology() if prof.has_topology() else single_node([0])
    page = int(topo.page_size or 4096)
    node_index = {n.id: i for i, n in enumerate(topo.nodes)}
    N = max(topo.n_nodes, 1)
    objs: list[_Obj] = []
    _heap_intervals(prof.table("objects"), objs)
    ot = prof.table("objects")
    numa_maps = _parse_numa_maps(prof.numa_maps(), prof.path)
    index = _ObjectPagesIndex(prof.table("object_pages"))
    resolver = symbols.CodeResolver(symbols.Mappings(prof.table("mappings")))
    out = []
    for o in objs:
        nm = _numa_maps_pages(o, numa_maps, ot, page, node_index, N)
        kp = _KernelPages(nm[0], "numa_maps", nm[1], nm[2]) if nm is not None else \
            _kernel_pages(o, index, ot, node_index, N)
        if kp is None:
            continue
        _name(o, resolver, prof)
        out.append(ObjectPages(o.name, o.site, o.kind, int(o.address), int(o.size),
                               int(np.min(np.asarray(ot["time"])[o.alloc_rows])),
                               [int(x) for x in kp.counts], kp.source, kp.policy, kp.mixed))
    return out


# ---------------------------------------------------------------------------- object_pages

POLICY_MODES = {0: "default", 1: "preferred", 2: "bind", 3: "interleave", 4: "local",
                5: "preferred_many", 6: "weighted_interleave"}
_AT_FREE, _AT_EXIT = 1, 2


@dataclass
class _KernelPages:
    """An object's pages per node as the kernel answered the shim's move_pages query."""

    counts: np.ndarray  # (N,) pages per node row, scaled to the whole object when sampled
    source: str  # move_pages_at_free | move_pages_at_exit
    policy: str  # POLICY_MODES name, "" unknown
    mixed: bool


class _ObjectPagesIndex:
    """The object_pages table grouped into queries: {(pid, addr): [(time, source, rows)]}."""

    def __init__(self, op: dict):
        self.op = op
        self.by_key: dict[tuple[int, int], list] = {}
        n = len(op.get("addr", ()))
        if not n:
            return
        pid, addr, time = (np.asarray(op[c]).astype(np.uint64) for c in ("pid", "addr", "time"))
        order = np.lexsort((time, addr, pid))
        k = np.stack([pid[order], addr[order], time[order]], axis=1)
        starts = np.flatnonzero(np.r_[True, np.any(k[1:] != k[:-1], axis=1)])
        ends = np.r_[starts[1:], n]
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            r = order[a:b]
            key = (int(k[a, 0]), int(k[a, 1]))
            self.by_key.setdefault(key, []).append((int(k[a, 2]), int(op["source"][r[0]]), r))

    def query(self, pid: int, addr: int, t0: int, t1: int | None):
        """The query of the allocation alive over [t0, t1] (t1 None: alive at exit): the
        latest made at its release, or the one made at exit."""
        best = None
        for time, source, rows in self.by_key.get((pid, addr), ()):
            if time < t0:
                continue
            if t1 is None and source == _AT_EXIT:
                return time, source, rows
            if t1 is not None and source == _AT_FREE and time <= t1:
                best = (time, source, rows)
        return best


def _kernel_pages(o: _Obj, index: _ObjectPagesIndex, ot, node_index, N) -> _KernelPages | None:
    """Pages per node of a heap object from the shim's move_pages queries.

    The allocations alive at exit are summed when they were asked at exit; otherwise
    those alive when the last released one was made (one generation of a site that
    allocates again and again).  Counts of a sampled query are scaled to the object."""
    if not index.by_key or not o.alloc_rows:
        return None
    found = []  # (t0, t1 or None, query)
    for r in o.alloc_rows:
        t0, ft = int(ot["time"][r]), int(ot["free_time"][r])
        q = index.query(int(ot["pid"][r]), int(ot["addr"][r]), t0, ft or None)
        if q is not None:
            found.append((t0, ft or None, q))
    if not found:
        return None
    alive = [f for f in found if f[1] is None]
    if alive:
        use, source = alive, "move_pages_at_exit"
    else:
        last_t0 = max(found, key=lambda f: f[2][0])[0]
        use = [f for f in found if f[0] <= last_t0 < f[1] or f[0] == last_t0]
        source = "move_pages_at_free"
    op = index.op
    total = np.zeros(N, dtype=np.float64)
    modes, mixed = [], False
    for _t0, _t1, (_time, _src, rows) in use:
        asked = int(op["sampled"][rows[0]])
        pages = int(op["pages"][rows[0]])
        scale = pages / asked if asked and pages > asked else 1.0
        for r in rows:
            row = node_index.get(int(op["node"][r]))
            if row is not None:
                total[row] += int(op["count"][r]) * scale
        mode = int(op["policy"][rows[0]])
        modes.append(POLICY_MODES.get(mode, ""))
        mixed |= bool(op["mixed"][rows[0]])
    placing = [m for m in modes if m not in ("", "default")]
    policy = placing[0] if placing else ("default" if "default" in modes else "")
    mixed |= len(set(modes)) > 1
    return _KernelPages(np.rint(total).astype(np.int64), source, policy, mixed)


# ---------------------------------------------------------------------------- numa_maps

def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


NUMA_MAPS_PAGES = 1 << 45  # pages of one mapping on one node: 128 PiB of 4 KiB pages


def _parse_numa_maps(texts: dict[int, str], where=".") -> dict[int, tuple[np.ndarray, list]]:
    """{pid: (sorted VMA starts, [(start, {node: pages}, page_bytes, policy)])}.

    Lines that do not start with a hex address are skipped; a line whose page counts or
    page size are not the kernel's numbers (a page size that is not a power of two up to
    1 GiB, more pages than any address space holds) raises ProfileError naming the file
    and line.  ``N<k>=`` of a node id that is not a Linux one (0..1023) is ignored."""
    out = {}
    for pid, text in texts.items():
        rows = []
        for lineno, line in enumerate(text.splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            try:
                start = int(parts[0], 16)
            except ValueError:
                continue
            nodes: dict[int, int] = {}
            kps = 4096
            for p in parts[2:]:
                if p.startswith("N") and "=" in p:
                    k, v = p[1:].split("=", 1)
                    if _digits(k) and _digits(v) and len(k) <= 4 and int(k) < 1024:
                        if len(v) > 15 or int(v) > NUMA_MAPS_PAGES:
                            raise ProfileError(f"{where}/numa_maps.{pid} line {lineno}: "
                                               f"{p[:40]} pages is beyond any address space")
                        nodes[int(k)] = int(v)
                elif p.startswith("kernelpagesize_kB="):
                    v = p.split("=", 1)[1]
                    kb = int(v) if _digits(v) and len(v) <= 8 else 0
                    if kb < 4 or kb > (1 << 20) or kb & (kb - 1):
                        raise ProfileError(f"{where}/numa_maps.{pid} line {lineno}: "
                                           f"{p[:40]} is not a page size")
                    kps = kb * 1024
            if start >= 1 << 64:
                continue
            rows.append((start, nodes, kps, _numa_maps_policy(parts)))
        rows.sort(key=lambda r: r[0])
        out[pid] = (np.array([r[0] for r in rows], dtype=np.uint64), rows)
    return out


def _numa_maps_pages(o: _Obj, nm, ot, page, node_index, N) -> tuple[np.ndarray, str, bool] | None:
    """Pages per node of a heap object from numa_maps, when each of its allocations that
    was alive at exit has VMAs of its own (large allocations are mmap'd by malloc; mbind
    splits one VMA into several, one per policy), with the policy they report and whether
    it differs between them."""
    if not nm or not o.alloc_rows:
        return None
    total = np.zeros(N, dtype=np.int64)
    matched = False
    policies: list[str] = []
    for r in o.alloc_rows:
        if int(ot["free_time"][r]):
            continue
        entry = nm.get(int(ot["pid"][r]))
        if entry is None:
            continue
        starts, rows = entry
        a, size = int(ot["addr"][r]), int(ot["size"][r])
        i = int(np.searchsorted(starts, np.uint64(a), side="right")) - 1
        if i < 0:
            return None
        # the first VMA must begin within a page before the allocation; those that begin
        # inside it are pieces of it (split by mbind or mprotect)
        j = int(np.searchsorted(starts, np.uint64(a + size), side="left"))
        if a - rows[i][0] >= 2 * page:
            return None
        pieces = rows[i:j]
        pages = sum(sum(nodes.values()) * kps // page for _, nodes, kps, _ in pieces)
        # no more pages than the allocation (plus its header page): the counts are its own
        if pages > -(-size // page) + 2:
            return None
        for _, nodes, kps, policy in pieces:
            for nid, cnt in nodes.items():
                row = node_index.get(nid)
                if row is not None:
                    total[row] += cnt * kps // page
            policies.append(policy)
        matched = True
    if not matched:
        return None
    modes = [mode for mode, _ in policies]
    placing = [m for m in modes if m not in ("", "default")]
    mode = placing[0] if placing else ("default" if "default" in modes else "")
    return total, mode, len(set(policies)) > 1


# numa_maps policy words (the kernel's mpol_to_str) -> POLICY_MODES names
_NUMA_MAPS_POLICIES = {"default": "default", "prefer": "preferred", "bind": "bind",
                       "interleave": "interleave", "local": "local",
                       "weighted": "weighted_interleave"}


def _numa_maps_policy(parts: list[str]) -> tuple[str, str]:
    """The policy of a numa_maps line ("prefer:1", "interleave=static:0-3", "prefer (many)
    :0-1", "weighted interleave:0-1"): its POLICY_MODES name ("" unknown) and its text
    with the nodes (two VMAs of one mode may prefer different nodes)."""
    if len(parts) < 2:
        return "", ""
    word = re.split(r"[:=]", parts[1], maxsplit=1)[0]
    if len(parts) > 2 and parts[1] in ("prefer", "weighted"):  # a two-word name
        text = parts[1] + " " + parts[2]
        if word == "prefer" and parts[2].startswith("(many)"):
            return "preferred_many", text
        return _NUMA_MAPS_POLICIES.get(word, ""), text
    return _NUMA_MAPS_POLICIES.get(word, ""), parts[1]
