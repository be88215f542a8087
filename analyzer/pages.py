"""Where each object's pages are: the kernel's numa_maps at exit, the shim's move_pages
queries at free and at exit (the object_pages table) and the collector's sampled page
locations, in that order of trust (docs/analyzer.md, "Per object")."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from numaprof.analyzer import attribution as att
from numaprof.analyzer import symbols
from numaprof.analyzer.archive import Archive
from numaprof.analyzer.format import OBJECT_PAGES_SEGMENTS
from numaprof.analyzer.objects import Obj, heap_intervals, name_object, thread_sites
from numaprof.analyzer.profile import Profile, open_profile
from numaprof.analyzer.topology import single_node
from numaprof.errors import ProfileError


def rows_of_nodes(nodes: np.ndarray, node_index: dict[int, int]) -> np.ndarray:
    if all(k == v for k, v in node_index.items()):
        return np.where((nodes >= 0) & (nodes < len(node_index)), nodes, -1)
    lut = np.full(max(node_index) + 2, -1, dtype=np.int64)
    for nid, row in node_index.items():
        lut[nid] = row
    return np.where((nodes >= 0) & (nodes <= max(node_index)), lut[np.clip(nodes, 0, max(node_index))], -1)


class PageNodeIndex:
    """Pages per node inside address ranges, from the located pages (move_pages)."""

    def __init__(self, keys, nodes, node_index, N, page_shift):
        self.keys, self.N, self.shift = keys, N, page_shift
        rows = rows_of_nodes(nodes.astype(np.int64), node_index)
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
    # pages per node row (outer) and per SEGMENTS-th of the object in address order
    # (inner), from the shim's move_pages; None when the profile has no such counts
    pages_by_segment: list[list[int]] | None = None


def kernel_object_pages(path_or_profile) -> list[ObjectPages]:
    """Every heap object of a profile whose pages the kernel located (numa_maps, or the
    shim's move_pages at release or exit), with or without samples: what a recording
    that has few data addresses (a TCG guest) still says for certain about placement."""
    prof = path_or_profile if isinstance(path_or_profile, Profile) else open_profile(path_or_profile)
    archive = Archive.read(prof.path)
    topo = prof.topology() if prof.has_topology() else single_node([0])
    page = int(topo.page_size or 4096)
    node_index = {n.id: i for i, n in enumerate(topo.nodes)}
    N = max(topo.n_nodes, 1)
    objs: list[Obj] = []
    mappings = symbols.Mappings(prof.table("mappings"))
    heap_intervals(prof.table("objects"), objs, thread_sites(prof, mappings))
    ot = prof.table("objects")
    numa_maps = parse_numa_maps(prof.numa_maps(), prof.path)
    index = ObjectPagesIndex(prof.table("object_pages"),
                             (prof.path / "object_pages.segment.col").is_file())
    resolver = symbols.CodeResolver(mappings, archive)
    out = []
    for o in objs:
        nm = numa_maps_pages(o, numa_maps, ot, page, node_index, N)
        asked = kernel_pages(o, index, ot, node_index, N)
        kp = KernelPages(nm[0], "numa_maps", nm[1], nm[2]) if nm is not None else asked
        if kp is None:
            continue
        name_object(o, resolver, prof)
        seg = asked.segments if asked is not None else None
        out.append(ObjectPages(o.name, o.site, o.kind, int(o.address), int(o.size),
                               int(np.min(np.asarray(ot["time"])[o.alloc_rows])),
                               [int(x) for x in kp.counts], kp.source, kp.policy, kp.mixed,
                               seg.astype(int).tolist() if seg is not None else None))
    return out


# ---------------------------------------------------------------------------- object_pages

POLICY_MODES = {0: "default", 1: "preferred", 2: "bind", 3: "interleave", 4: "local",
                5: "preferred_many", 6: "weighted_interleave"}
_AT_FREE, _AT_EXIT = 1, 2


@dataclass
class KernelPages:
    """An object's pages per node as the kernel answered the shim's move_pages query."""

    counts: np.ndarray  # (N,) pages per node row, scaled to the whole object when sampled
    source: str  # move_pages_at_free | move_pages_at_exit
    policy: str  # POLICY_MODES name, "" unknown
    mixed: bool
    segments: np.ndarray | None = None  # (N, SEGMENTS) the counts per segment, scaled alike


#: The shim counts an allocation's pages in this many equal parts, in address order
#: (object_pages.segment; NMP_OBJECT_PAGES_SEGMENTS in numaprof_format.h).
SEGMENTS = OBJECT_PAGES_SEGMENTS


class ObjectPagesIndex:
    """The object_pages table grouped into queries: {(pid, addr): [(time, source, rows)]}."""

    def __init__(self, op: dict, segmented: bool = False):
        self.op = op
        self.segmented = segmented  # the profile has object_pages.segment (absent: zeros)
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


def kernel_pages(o: Obj, index: ObjectPagesIndex, ot, node_index, N) -> KernelPages | None:
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
    has_seg = index.segmented
    seg = np.zeros((N, SEGMENTS), dtype=np.float64)
    modes, mixed = [], False
    for _t0, _t1, (_time, _src, rows) in use:
        asked = int(op["sampled"][rows[0]])
        pages = int(op["pages"][rows[0]])
        scale = pages / asked if asked and pages > asked else 1.0
        for r in rows:
            row = node_index.get(int(op["node"][r]))
            if row is not None:
                total[row] += int(op["count"][r]) * scale
                if has_seg:
                    seg[row, min(int(op["segment"][r]), SEGMENTS - 1)] += int(op["count"][r]) * scale
        mode = int(op["policy"][rows[0]])
        modes.append(POLICY_MODES.get(mode, ""))
        mixed |= bool(op["mixed"][rows[0]])
    placing = [m for m in modes if m not in ("", "default")]
    policy = placing[0] if placing else ("default" if "default" in modes else "")
    mixed |= len(set(modes)) > 1
    return KernelPages(np.rint(total).astype(np.int64), source, policy, mixed,
                       np.rint(seg).astype(np.int64) if has_seg else None)


# ---------------------------------------------------------------------------- numa_maps

def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


NUMA_MAPS_PAGES = 1 << 45  # pages of one mapping on one node: 128 PiB of 4 KiB pages


def parse_numa_maps(texts: dict[int, str], where=".") -> dict[int, tuple[np.ndarray, list]]:
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


def numa_maps_pages(o: Obj, nm, ot, page, node_index, N) -> tuple[np.ndarray, str, bool] | None:
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
