"""`--target`: the machine a profile is evaluated for (docs/recommender.md).

A target is the recorded topology (no ``--target``), a preset, or an hwloc XML file.
Presets carry SLIT distances (10 = local), cores per node and memory per node; cores are
numbered node by node, as ``OMP_PLACES=cores`` enumerates them.  A target carries each
node's local memory bandwidth where it is known (``Topology.node_bandwidth``): measured by
`numaprof topology --measure` on the recorded machine, or the ``Bandwidth`` memory
attribute of an hwloc ≥ 2.3 XML file.  Presets carry none.
"""

from __future__ import annotations

import dataclasses
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from numaprof.analyzer.model import Node, Topology
from numaprof.errors import ProfileError, UsageError

GiB = 1 << 30

#: Node bandwidths "differ" when the fastest node in use is more than this factor faster
#: than the slowest: below it, measured differences are within the noise of a triad run
#: and every node is taken as equally fast (weighted_interleave is then not a candidate).
BANDWIDTH_DIFFERS = 1.10

#: hwloc memory attributes are in MiB/s.
_MIB_S_TO_GB_S = (1 << 20) / 1e9

# Pousa Ribeiro et al. 2010, Table 4: measured NUMA factor (remote / local Stream triad
# time) between the 8 nodes of the dual-core Opteron 875 machine, rows = from, cols = to.
# Kept exactly as published, including its slight asymmetries (1.1974 / 1.1978).
OPTERON_TABLE4 = (
    (1.0000, 1.55, 1.2122, 1.1974, 1.2374, 1.4388, 1.3093, 1.3057),
    (1.55, 1.0000, 1.1872, 1.2959, 1.4606, 1.2284, 1.3071, 1.2589),
    (1.2122, 1.1872, 1.0000, 1.1808, 1.1632, 1.2234, 1.1795, 1.2305),
    (1.1978, 1.2959, 1.1808, 1.0000, 1.3860, 1.2576, 1.0337, 1.1648),
    (1.2374, 1.4606, 1.1632, 1.3860, 1.0000, 1.1020, 1.3877, 1.2820),
    (1.4388, 1.2284, 1.2234, 1.2576, 1.1020, 1.0000, 1.1242, 1.1318),
    (1.3093, 1.3071, 1.1795, 1.0337, 1.3877, 1.1242, 1.0000, 1.024),
    (1.3057, 1.2589, 1.2305, 1.1648, 1.2820, 1.1318, 1.024, 1.0000),
)


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    distances: tuple[tuple[float, ...], ...]
    cores_per_node: int
    memory_per_node: int


def _uniform(n: int, remote: float) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(10.0 if i == j else remote for j in range(n)) for i in range(n))


def _clustered(sockets: int, per_socket: int, within) -> tuple[tuple[float, ...], ...]:
    """SLIT of ``sockets`` sockets split into ``per_socket`` nodes each (Intel sub-NUMA
    clustering, AMD NPS): 10 local, ``within(i, j)`` between the clusters i != j of one
    socket, 21 (Intel) or the value ``within(-1, -1)`` gives between sockets."""
    n = sockets * per_socket
    rows = []
    for a in range(n):
        row = []
        for b in range(n):
            if a == b:
                row.append(10.0)
            elif a // per_socket == b // per_socket:
                row.append(float(within(a % per_socket, b % per_socket)))
            else:
                row.append(float(within(-1, -1)))
        rows.append(tuple(row))
    return tuple(rows)


def _nps4(i: int, j: int) -> int:
    # AMD EPYC, NPS4: the four quadrants of a socket; a neighbouring quadrant 11, the
    # diagonal one 12; the other socket 32, as such machines' SLIT reports them
    if i < 0:
        return 32
    return 12 if (i ^ j) == 3 else 11


def _snc(i: int, j: int) -> int:
    # Intel sub-NUMA clustering: another cluster of the socket 12, another socket 21
    return 21 if i < 0 else 12


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("2s", "two-socket server, SLIT 10/21", _uniform(2, 21.0), 16, 64 * GiB),
        # Four sockets fully connected (e.g. Xeon Scalable with three UPI links per
        # socket): every remote node is one hop, which the firmware reports as 21.
        Preset("4s", "four-socket server, fully connected, SLIT 10/21", _uniform(4, 21.0),
               16, 64 * GiB),
        Preset("8n-opteron", "8-node dual-core Opteron 875, measured factors 1.02-1.55 "
               "(Pousa Ribeiro et al. 2010, Table 4)", tuple(tuple(10.0 * f for f in row) for row in OPTERON_TABLE4),
               2, 4 * GiB),
        # Pousa Ribeiro et al. 2009, §III-A: Bull Novascale, 4 nodes of 4 Itanium 2 joined by the FAME
        # Scalability Switch, NUMA factor 2 to 2.5.  The split of that range over node
        # pairs is not published; we take 2.0 inside each half of the switch, 2.5 across.
        Preset("itanium2", "4-node Itanium 2 (Bull FSS), NUMA factor 2-2.5 (Pousa Ribeiro et al. 2009)",
               ((10.0, 20.0, 25.0, 25.0), (20.0, 10.0, 25.0, 25.0),
                (25.0, 25.0, 10.0, 20.0), (25.0, 25.0, 20.0, 10.0)), 4, 16 * GiB),
        # Large current servers: nodes are parts of a socket (8 and 16 nodes)
        Preset("2s-snc4", "two-socket Xeon, sub-NUMA clustering SNC-4: 8 nodes, SLIT 10/12/21",
               _clustered(2, 4, _snc), 14, 64 * GiB),
        Preset("2s-nps4", "two-socket EPYC, NPS4: 8 nodes, SLIT 10/11/12/32",
               _clustered(2, 4, _nps4), 16, 96 * GiB),
        Preset("4s-snc4", "four-socket Xeon, SNC-4: 16 nodes, SLIT 10/12/21",
               _clustered(4, 4, _snc), 14, 64 * GiB),
    )
}


def preset_topology(name: str, threads: int | None = None) -> Topology:
    """The Topology of preset ``name``.

    With ``threads`` larger than the preset's cores, cores per node grow to
    ceil(threads / nodes) so every recorded thread has a core of its own.
    """
    p = PRESETS[name]
    n = len(p.distances)
    per_node = max(p.cores_per_node, math.ceil(threads / n) if threads else 0)
    nodes = tuple(
        Node(i, tuple(range(i * per_node, (i + 1) * per_node)), p.memory_per_node) for i in range(n)
    )
    return Topology(nodes=nodes, distances=np.array(p.distances, dtype=float),
                    source=f"preset: {p.description}", name=name)


def resolve_target(spec: str | None, recorded: Topology, *, threads: int | None = None) -> Topology:
    """The topology to evaluate a profile for.

    ``None`` → the recorded topology; a preset name (``2s``, ``4s``, ``8n-opteron``,
    ``itanium2``, ``2s-snc4``, ``2s-nps4``, ``4s-snc4``) → that machine; a path to an hwloc XML file → its topology.  Anything
    else raises UsageError naming the presets.
    """
    if spec is None or spec == "":
        return recorded
    if spec in PRESETS:
        return preset_topology(spec, threads)
    if os.path.isfile(spec):
        from numaprof.analyzer.topology import load_hwloc_xml

        topo = load_hwloc_xml(spec)
        bw = hwloc_node_bandwidth(spec, topo)
        return topo if bw is None else dataclasses.replace(topo, node_bandwidth=bw)
    if spec.endswith(".xml") or os.sep in spec:
        raise UsageError(f"--target {spec}: no such hwloc XML file (presets: {', '.join(PRESETS)})")
    raise UsageError(
        f"unknown --target {spec!r}: use a preset ({', '.join(PRESETS)}) or an hwloc XML file"
    )


def hwloc_node_bandwidth(path: str | os.PathLike, topo: Topology) -> np.ndarray | None:
    """Local memory bandwidth per node of ``topo`` (GB/s, NaN where unknown) from the
    memory attributes of an hwloc ≥ 2.3 XML export, or None when it has none.

    hwloc stores ``<memattr name="Bandwidth">`` with one ``<memattr_value>`` per (target
    NUMA node, initiator): ``value`` in MiB/s, the target by ``target_obj_gp_index``, the
    initiator as ``initiator_cpuset`` or an object (``initiator_obj_gp_index``).  A node's
    local bandwidth is the best value among initiators whose cpus overlap the node's
    (the best of all initiators for a node without cpus).  Without ``Bandwidth``, the mean
    of ``ReadBandwidth`` and ``WriteBandwidth`` is used (hwloc's own convention).
    """
    from numaprof.analyzer.topology import parse_cpuset

    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None  # load_hwloc_xml has already refused what it could not read
    objs = list(root.iter("object"))
    cpus_of_gp = {o.get("gp_index"): set(parse_cpuset(o.get("cpuset", ""))) for o in objs}
    node_of_gp = {o.get("gp_index"): int(o.get("os_index", -1)) for o in objs
                  if o.get("type") == "NUMANode"}
    node_cpus = {n.id: set(n.cpus) for n in topo.nodes}

    def local_values(name: str) -> dict[int, float]:
        found: dict[int, list[tuple[bool, float]]] = {}
        for attr in root.iter("memattr"):
            if attr.get("name") != name:
                continue
            for v in attr.iter("memattr_value"):
                if v.get("target_obj_type", "NUMANode") != "NUMANode":
                    continue
                node = node_of_gp.get(v.get("target_obj_gp_index"))
                if node is None or node not in node_cpus:
                    continue
                try:
                    value = float(v.get("value", "")) * _MIB_S_TO_GB_S
                except ValueError:
                    raise ProfileError(f"{path}: corrupted memattr {name} value "
                                       f"{v.get('value')!r}") from None
                if "initiator_cpuset" in v.attrib:
                    init = set(parse_cpuset(v.get("initiator_cpuset", "")))
                else:
                    init = cpus_of_gp.get(v.get("initiator_obj_gp_index"), set())
                found.setdefault(node, []).append((bool(init & node_cpus[node]), value))
        out = {}
        for node, vals in found.items():
            local = [x for is_local, x in vals if is_local]
            out[node] = max(local or [x for _, x in vals])
        return out

    bw = local_values("Bandwidth")
    if not bw:
        rd, wr = local_values("ReadBandwidth"), local_values("WriteBandwidth")
        bw = {k: (rd[k] + wr[k]) / 2 for k in rd if k in wr}
    if not bw:
        return None
    return np.array([bw.get(n.id, np.nan) for n in topo.nodes], dtype=float)


def relative_bandwidth(topo: Topology, positions) -> np.ndarray | None:
    """Each node's bandwidth relative to the mean over ``positions`` (the nodes in use),
    one entry per node of ``topo``; None when the bandwidth of a node in use is unknown
    or all of them are within ``BANDWIDTH_DIFFERS`` of each other (equally fast)."""
    bw = None if topo.node_bandwidth is None else np.asarray(topo.node_bandwidth, dtype=float)
    positions = sorted({int(p) for p in positions})
    if bw is None or bw.shape != (topo.n_nodes,) or len(positions) < 2:
        return None
    used = bw[positions]
    if not np.all(np.isfinite(used)) or (used <= 0).any():
        return None
    if used.max() <= BANDWIDTH_DIFFERS * used.min():
        return None
    rel = bw / used.mean()
    # nodes not in use with unknown bandwidth: the mean (they serve no traffic unless a
    # policy puts pages there, and then nothing says they are slower)
    return np.where(np.isfinite(rel) & (rel > 0), rel, 1.0)
