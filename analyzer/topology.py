"""Machine topology from a profile's topology.json or from hwloc XML (docs/profile-format.md).

hwloc XML is parsed with xml.etree rather than through libhwloc, so reports and
``--target`` files work on machines without hwloc and with XML from any hwloc 2.x.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from numaprof.analyzer import profile_io
from numaprof.analyzer.model import Node, Topology
from numaprof.errors import ProfileError

# Limits (docs/profile-format.md): Linux numbers at most 1024 NUMA nodes (MAX_NUMNODES
# with the largest NODES_SHIFT, 10) and a profile's cpu column is 16 bits (65535: unknown).
MAX_NODES = 1024
MAX_CPUS = 65535
MAX_DISTANCE = 1e6
PAGE_SIZES = (1 << 12, 1 << 30)


def _check_distances(d: np.ndarray, n: int, where: str) -> np.ndarray:
    if d.shape != (n, n):
        raise ProfileError(f"{where}: distance matrix is {d.shape}, expected {n}x{n}")
    if not np.isfinite(d).all() or (d <= 0).any() or (d > MAX_DISTANCE).any():
        raise ProfileError(f"{where}: distance matrix has a value that is not a positive "
                           f"number up to {MAX_DISTANCE:g}")
    return d


def check_topology(nodes, page_size, where: str) -> None:
    """Refuses a topology beyond the documented limits: 1 to 1024 nodes with ids 0..1023,
    each once; cpu ids 0..65534, at most 65535 in all; memory sizes that fit 63 bits; a
    page size that is a power of two from 4 KiB to 1 GiB."""
    if not nodes:
        raise ProfileError(f"{where}: topology has no NUMA nodes")
    if len(nodes) > MAX_NODES:
        raise ProfileError(f"{where}: {len(nodes)} NUMA nodes, more than the {MAX_NODES} "
                           "Linux supports")
    ids = [n.id for n in nodes]
    bad = next((i for i in ids if not 0 <= i < MAX_NODES), None)
    if bad is not None:
        raise ProfileError(f"{where}: node id {bad} is not a Linux node id (0..{MAX_NODES - 1})")
    if len(set(ids)) != len(ids):
        raise ProfileError(f"{where}: a node id appears twice")
    total = sum(len(n.cpus) for n in nodes)
    if total > MAX_CPUS:
        raise ProfileError(f"{where}: {total} cpus, more than the {MAX_CPUS} a profile can hold")
    bad = next((c for n in nodes for c in n.cpus if not 0 <= c < MAX_CPUS), None)
    if bad is not None:
        raise ProfileError(f"{where}: cpu id {bad} beyond 0..{MAX_CPUS - 1}")
    bad = next((n.memory_bytes for n in nodes if not 0 <= n.memory_bytes < 2**63), None)
    if bad is not None:
        raise ProfileError(f"{where}: memory size {bad} is not a byte count")
    lo, hi = PAGE_SIZES
    if not lo <= page_size <= hi or page_size & (page_size - 1):
        raise ProfileError(f"{where}: page size {page_size} is not a power of two from "
                           f"{lo} to {hi}")


def _int(value, where: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProfileError(f"{where}: {what} is {value!r:.40}, expected an integer")
    return value


def load_topology_json(path: str | os.PathLike) -> Topology:
    """Read a topology.json written by the collector (docs/profile-format.md); a file
    beyond the limits of :func:`check_topology` is refused."""
    p = Path(path)
    try:
        data = profile_io.read_json(p)
    except FileNotFoundError:
        raise ProfileError(f"{p}: no such topology file") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise ProfileError(f"{p}: corrupted topology (no list of nodes)")
    if len(data["nodes"]) > MAX_NODES:
        raise ProfileError(f"{p}: {len(data['nodes'])} NUMA nodes, more than the {MAX_NODES} "
                           "Linux supports")
    nodes = []
    for n in data["nodes"]:
        if not isinstance(n, dict):
            raise ProfileError(f"{p}: corrupted topology (a node is {n!r:.40})")
        cpus = profile_io.get_list(n, "cpus", p, where="a node's cpus")
        if len(cpus) > MAX_CPUS:
            raise ProfileError(f"{p}: a node has {len(cpus)} cpus, more than {MAX_CPUS}")
        nodes.append(Node(_int(n.get("id"), str(p), "a node id"),
                          tuple(_int(c, str(p), "a cpu id") for c in cpus),
                          _int(n.get("memory_bytes", 0) or 0, str(p), "memory_bytes")))
    page_size = _int(data.get("page_size", 4096) or 4096, str(p), "page_size")
    check_topology(nodes, page_size, str(p))
    raw = data.get("distances") or [[10]]
    if not isinstance(raw, list) or len(raw) != len(nodes) and raw != [[10]]:
        raise ProfileError(f"{p}: distance matrix is not {len(nodes)}x{len(nodes)}")
    try:
        dist = np.asarray(raw, dtype=float)
    except (ValueError, TypeError) as e:
        raise ProfileError(f"{p}: corrupted distance matrix ({e})") from None
    if dist.shape == (1, 1) and len(nodes) > 1:
        # No SLIT recorded: assume the ACPI defaults (10 local, 20 remote).
        dist = np.full((len(nodes), len(nodes)), 20.0)
        np.fill_diagonal(dist, 10.0)
    _check_distances(dist, len(nodes), str(p))
    return Topology(
        nodes=tuple(nodes),
        distances=dist,
        source=str(data.get("source", "topology.json")),
        page_size=page_size,
    )


def parse_cpuset(text: str) -> list[int]:
    """hwloc bitmap string ("0x00000003", "0xffffffff,0x0000000f") → sorted bit indexes.

    At most 2048 words (65536 bits, the cpus a profile can name); a longer or malformed
    bitmap raises ValueError."""
    text = (text or "").strip()
    if not text or text == "0x0":
        return []
    words = [w.strip() for w in text.split(",")]
    if len(words) > MAX_CPUS // 32 + 1:
        raise ValueError(f"a cpuset of {len(words)} words")
    # Each comma-separated word is 32 bits, most significant first; "0xf...f" means an
    # infinite set and only appears on complete/allowed sets we do not use.
    value = 0
    for w in words:
        w = w[2:] if w.lower().startswith("0x") else w
        if w.endswith("...f") or "..." in w:
            w = w.replace("f...f", "f").replace("...", "")
        if len(w) > 8:
            raise ValueError(f"cpuset word {w[:20]!r} of more than 32 bits")
        value = (value << 32) | int(w or "0", 16)
    bits = bin(value)[2:][::-1]
    return [i for i, b in enumerate(bits) if b == "1"]


def load_hwloc_xml(path: str | os.PathLike, *, follow: bool = True) -> Topology:
    """Read an hwloc 2.x XML export (``lstopo --of xml``, ``hwloc_topology_export_xml``).

    NUMA nodes come from the NUMANode objects (os_index, local_memory, cpuset → PU os
    indexes); distances from the ``distances2`` element named NUMALatency (or any
    NUMANode latency matrix; hwloc 1.x ``distances``), else 10 local / 20 remote.
    The file must be a regular file of at most 64 MiB (``follow=False``, for a profile's
    own topology.xml: not a symbolic link either), and within the limits of
    :func:`check_topology`.
    """
    p = Path(path)
    try:
        data = profile_io.read_bytes(p, profile_io.TEXT_LIMIT, follow=follow)
    except FileNotFoundError:
        raise ProfileError(f"{p}: no such hwloc XML file") from None
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise ProfileError(f"{p}: not readable hwloc XML ({e})") from None
    if root.tag != "topology":
        raise ProfileError(f"{p}: not an hwloc topology (root element <{root.tag:.40}>)")
    try:
        return _hwloc_topology(root, p)
    except (ValueError, TypeError, OverflowError) as e:
        raise ProfileError(f"{p}: corrupted hwloc XML ({e})") from None


def _hwloc_topology(root, p: Path) -> Topology:
    objs = list(root.iter("object"))
    pus = {int(o.get("os_index", -1)) for o in objs if o.get("type") == "PU"}
    numa = [o for o in objs if o.get("type") == "NUMANode"]
    if len(numa) > MAX_NODES or len(pus) > MAX_CPUS:
        raise ProfileError(f"{p}: {len(numa)} NUMA nodes and {len(pus)} cpus, more than the "
                           f"{MAX_NODES} and {MAX_CPUS} supported")
    page_size = 4096
    nodes = []
    if not numa:
        # hwloc 1.x or a machine without NUMA info: one node with all PUs.
        machine = next((o for o in objs if o.get("type") == "Machine"), None)
        mem = int(machine.get("local_memory", 0)) if machine is not None else 0
        nodes.append(Node(0, tuple(sorted(pus)), mem))
    for o in numa:
        cpus = parse_cpuset(o.get("cpuset", ""))
        if pus:
            cpus = [c for c in cpus if c in pus]
        nodes.append(Node(int(o.get("os_index", len(nodes))), tuple(cpus), int(o.get("local_memory", 0))))
        sizes = [int(pt.get("size", 0)) for pt in o.findall("page_type") if int(pt.get("count", 0) or 0)]
        if sizes:
            page_size = min(sizes)
    check_topology(nodes, page_size, str(p))
    nodes.sort(key=lambda n: n.id)
    index = {n.id: i for i, n in enumerate(nodes)}
    n = len(nodes)
    dist = np.full((n, n), 20.0)
    np.fill_diagonal(dist, 10.0)
    best = None
    for d in root.iter("distances2"):
        if d.get("type") != "NUMANode":
            continue
        kind = int(d.get("kind", "0") or 0)
        latency = bool(kind & 4) or d.get("name") == "NUMALatency"  # HWLOC_DISTANCES_KIND_MEANS_LATENCY
        if latency and (best is None or d.get("name") == "NUMALatency"):
            best = d
    if best is not None:
        try:
            idx = [int(x) for e in best.findall("indexes") for x in (e.text or "").split()]
            k = int(best.get("nbobjs", len(idx)))
            if k != len(idx) or k > MAX_NODES:
                raise ValueError(f"{len(idx)} indexes for {k} objects")
            vals = [float(x) for e in best.findall("u64values") for x in (e.text or "").split()]
            if best.get("indexing", "os") != "os":
                # gp indexes: map to NUMANode os_index through gp_index.
                gp = {int(o.get("gp_index", -1)): int(o.get("os_index", -1)) for o in numa}
                idx = [gp.get(i, -1) for i in idx]
            m = np.asarray(vals, dtype=float).reshape(k, k)
        except (ValueError, TypeError) as e:
            raise ProfileError(f"{p}: corrupted distances2 element ({e})") from None
        for a in range(k):
            for b in range(k):
                if idx[a] in index and idx[b] in index:
                    dist[index[idx[a]], index[idx[b]]] = m[a, b]
    if best is None:
        v1 = _v1_distances(root, n)
        if v1 is not None:
            dist = v1
    _check_distances(dist, n, str(p))
    version = root.get("version", "")
    hv = next((i.get("value") for i in root.iter("info") if i.get("name") == "hwlocVersion"), None)
    src = f"hwloc {hv}" if hv else f"hwloc XML {version}".strip()
    return Topology(nodes=tuple(nodes), distances=dist, source=src, name=p.name, page_size=page_size)


def _v1_distances(root, n: int) -> np.ndarray | None:
    """hwloc 1.x: <distances nbobjs=N latency_base=B><latency value=v/>...: B × v, the
    NUMA nodes in logical (os index) order."""
    for d in root.iter("distances"):
        try:
            k = int(d.get("nbobjs", 0))
            base = float(d.get("latency_base", 1) or 1)
            vals = [float(e.get("value", "nan")) for e in d.findall("latency")]
        except ValueError:
            continue
        if k == n and len(vals) == k * k:
            m = np.asarray(vals).reshape(k, k) * base
            if np.all(np.isfinite(m)):
                return np.round(m, 6)
    return None


def single_node(cpus: list[int], page_size: int = 4096) -> Topology:
    """A one-node topology over the given cpus (when a profile recorded none)."""
    return Topology(
        nodes=(Node(0, tuple(sorted(set(cpus))), 0),),
        distances=np.array([[10.0]]),
        source="assumed (no topology in the profile)",
        page_size=page_size,
    )
