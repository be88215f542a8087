"""`--target`: the machine a profile is evaluated for (SPEC §4.2).

A target is the recorded topology (no ``--target``), a preset, or an hwloc XML file.
Presets carry SLIT distances (10 = local), cores per node and memory per node; cores are
numbered node by node, as ``OMP_PLACES=cores`` enumerates them.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from numaprof.analyzer.model import Node, Topology
from numaprof.errors import UsageError

GiB = 1 << 30

# 000_33c6b40d94544844.txt Table 4: measured NUMA factor (remote / local Stream triad
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


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("2s", "two-socket server, SLIT 10/21", _uniform(2, 21.0), 16, 64 * GiB),
        # Four sockets fully connected (e.g. Xeon Scalable with three UPI links per
        # socket): every remote node is one hop, which the firmware reports as 21.
        Preset("4s", "four-socket server, fully connected, SLIT 10/21", _uniform(4, 21.0),
               16, 64 * GiB),
        Preset("8n-opteron", "8-node dual-core Opteron 875, measured factors 1.02-1.55 "
               "(000 Table 4)", tuple(tuple(10.0 * f for f in row) for row in OPTERON_TABLE4),
               2, 4 * GiB),
        # 004 §III-A: Bull Novascale, 4 nodes of 4 Itanium 2 joined by the FAME
        # Scalability Switch, NUMA factor 2 to 2.5.  The split of that range over node
        # pairs is not published; we take 2.0 inside each half of the switch, 2.5 across.
        Preset("itanium2", "4-node Itanium 2 (Bull FSS), NUMA factor 2-2.5 (004)",
               ((10.0, 20.0, 25.0, 25.0), (20.0, 10.0, 25.0, 25.0),
                (25.0, 25.0, 10.0, 20.0), (25.0, 25.0, 20.0, 10.0)), 4, 16 * GiB),
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
    ``itanium2``) → that machine; a path to an hwloc XML file → its topology.  Anything
    else raises UsageError naming the presets.
    """
    if spec is None or spec == "":
        return recorded
    if spec in PRESETS:
        return preset_topology(spec, threads)
    if os.path.isfile(spec):
        from numaprof.analyzer.topology import load_hwloc_xml

        return load_hwloc_xml(spec)
    if spec.endswith(".xml") or os.sep in spec:
        raise UsageError(f"--target {spec}: no such hwloc XML file (presets: {', '.join(PRESETS)})")
    raise UsageError(
        f"unknown --target {spec!r}: use a preset ({', '.join(PRESETS)}) or an hwloc XML file"
    )
