"""Machine topology from a profile's topology.json or from hwloc XML (docs/profile-format.md).

hwloc XML is parsed with xml.etree rather than through libhwloc, so reports and
``--target`` files work on machines without hwloc and with XML from any hwloc 2.x.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from numaprof.analyzer.model import Node, Topology
from numaprof.errors import ProfileError


def _check_distances(d: np.ndarray, n: int, where: str) -> np.ndarray:
    if d.shape != (n, n):
        raise ProfileError(f"{where}: distance matrix is {d.shape}, expected {n}x{n}")
    if (np.diag(d) <= 0).any():
        raise ProfileError(f"{where}: distance matrix has a non-positive local distance")
    return d


def load_topology_json(path: str | os.PathLike) -> Topology:
    """Read a topology.json written by the collector (docs/profile-format.md)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
        nodes = tuple(
            Node(int(n["id"]), tuple(int(c) for c in n.get("cpus", ())), int(n.get("memory_bytes", 0)))
            for n in data["nodes"]
        )
        dist = np.asarray(data.get("distances") or [[10]], dtype=float)
    except FileNotFoundError:
        raise ProfileError(f"{p}: no such topology file") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ProfileError(f"{p}: corrupted topology ({type(e).__name__}: {e})") from None
    if not nodes:
        raise ProfileError(f"{p}: topology has no NUMA nodes")
    if dist.shape == (1, 1) and len(nodes) > 1:
        # No SLIT recorded: assume the ACPI defaults (10 local, 20 remote).
        dist = np.full((len(nodes), len(nodes)), 20.0)
        np.fill_diagonal(dist, 10.0)
    _check_distances(dist, len(nodes), str(p))
    return Topology(
        nodes=nodes,
        distances=dist,
        source=str(data.get("source", "topology.json")),
        page_size=int(data.get("page_size", 4096) or 4096),
    )


def parse_cpuset(text: str) -> list[int]:
    """hwloc bitmap string ("0x00000003", "0xffffffff,0x0000000f") → sorted bit indexes."""
    text = (text or "").strip()
    if not text or text == "0x0":
        return []
    words = [w.strip() for w in text.split(",")]
    # Each comma-separated word is 32 bits, most significant first; "0xf...f" means an
    # infinite set and only appears on complete/allowed sets we do not use.
    value = 0
    for w in words:
        w = w[2:] if w.lower().startswith("0x") else w
        if w.endswith("...f") or "..." in w:
            w = w.replace("f...f", "f").replace("...", "")
        value = (value << 32) | int(w or "0", 16)
    out, i = [], 0
    while value:
        if value & 1:
            out.append(i)
        value >>= 1
        i += 1
    return out


def load_hwloc_xml(path: str | os.PathLike) -> Topology:
    """Read an hwloc 2.x XML export (``lstopo --of xml``, ``hwloc_topology_export_xml``).

    NUMA nodes come from the NUMANode objects (os_index, local_memory, cpuset → PU os
    indexes); distances from the ``distances2`` element named NUMALatency (or any
    NUMANode latency matrix; hwloc 1.x ``distances``), else 10 local / 20 remote.
    """
    p = Path(path)
    try:
        root = ET.parse(p).getroot()
    except FileNotFoundError:
        raise ProfileError(f"{p}: no such hwloc XML file") from None
    except (OSError, ET.ParseError) as e:
        raise ProfileError(f"{p}: not readable hwloc XML ({e})") from None
    if root.tag != "topology":
        raise ProfileError(f"{p}: not an hwloc topology (root element <{root.tag}>)")
    objs = list(root.iter("object"))
    pus = {int(o.get("os_index", -1)) for o in objs if o.get("type") == "PU"}
    numa = [o for o in objs if o.get("type") == "NUMANode"]
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
            vals = [float(x) for e in best.findall("u64values") for x in (e.text or "").split()]
            k = int(best.get("nbobjs", len(idx)))
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
