"""The virtual machine's NUMA topology: nodes, cpus, memory and the SLIT distance matrix.

Built from `numaprof lab` options (a preset, --nodes, --distance I,J=D, ...) and validated
against the rules QEMU (`-numa dist`) and Linux (ACPI SLIT) apply, so that an inconsistent
topology is refused with one line before a guest is booted, and the guest shows exactly
the matrix that was asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from numaprof.errors import UsageError
from numaprof.recommender.targets import PRESETS as TARGET_PRESETS

LOCAL_DISTANCE = 10
# Linux's REMOTE_DISTANCE: what the kernel assumes between two nodes when firmware gives no
# SLIT.  Used for node pairs that neither a preset nor --distance sets.
DEFAULT_REMOTE_DISTANCE = 20
# ACPI SLIT entries are one byte and 255 means "unreachable"; Linux rejects the whole SLIT
# (and falls back to 10/20) if an off-diagonal entry is <= 10.
MAX_DISTANCE = 254
MAX_NODES = 16  # a TCG guest with more would take minutes to boot on a 2-core machine
MAX_CPUS = 64
MIN_MEM_PER_NODE = 256 << 20  # 8 nodes x 128M hung at boot (6.1 kernel, TCG); 256M works



def slit_from_factors(factors) -> tuple[tuple[int, ...], ...]:
    """NUMA factors x 10, rounded half up to SLIT integers; off-diagonal raised to >= 11.

    Two Opteron pairs (factor 1.024 and 1.0337) round to 10, which the SLIT forbids off the
    diagonal (Linux would discard the whole table), so they become 11: the smallest remote
    distance there is.
    """
    n = len(factors)
    out = []
    for i in range(n):
        row = []
        for j in range(n):
            d = int(factors[i][j] * 10 + 0.5 + 1e-9)
            row.append(LOCAL_DISTANCE if i == j else max(d, LOCAL_DISTANCE + 1))
        out.append(tuple(row))
    return tuple(out)


# The lab boots the machines `suggest --target` evaluates for: one definition of each
# preset (recommender/targets.py), its distances rounded to the SLIT integers a guest's
# firmware table can carry.
PRESETS: dict[str, tuple[tuple[int, ...], ...]] = {
    name: slit_from_factors(tuple(tuple(d / LOCAL_DISTANCE for d in row) for row in p.distances))
    for name, p in TARGET_PRESETS.items()
}


@dataclass(frozen=True)
class LabTopology:
    """A validated guest topology.  Node i owns cpus i*C .. i*C+C-1 (C = cpus_per_node)."""

    nodes: int
    cpus_per_node: int
    mem_per_node: int  # bytes
    distances: tuple[tuple[int, ...], ...]  # row = from, column = to, SLIT units

    @property
    def total_cpus(self) -> int:
        return self.nodes * self.cpus_per_node

    @property
    def total_mem(self) -> int:
        return self.nodes * self.mem_per_node

    def cpus_of(self, node: int) -> range:
        return range(node * self.cpus_per_node, (node + 1) * self.cpus_per_node)

    def is_symmetric(self) -> bool:
        d = self.distances
        return all(d[i][j] == d[j][i] for i in range(self.nodes) for j in range(self.nodes))


_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)
_DISTANCE = re.compile(r"^\s*(\d+)\s*,\s*(\d+)\s*=\s*(\d+)\s*$")


def parse_size(text: str) -> int:
    """'512M', '1G', '1GiB', '2048' (MiB, as QEMU's -m) -> bytes."""
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"--mem-per-node: cannot read size {text!r} (examples: 512M, 1G)")
    value, unit = int(m.group(1)), (m.group(2) or "M").upper()
    return value << {"K": 10, "M": 20, "G": 30, "T": 40}[unit]


def parse_distance(text: str) -> tuple[int, int, int]:
    """'I,J=D' -> (I, J, D)."""
    m = _DISTANCE.match(text)
    if not m:
        raise UsageError(f"--distance: cannot read {text!r}; the form is I,J=D (e.g. 0,1=21)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def build_topology(
    nodes: int | None = None,
    cpus_per_node: int = 1,
    mem_per_node: str | int = "512M",
    distances: tuple[str, ...] | list[str] = (),
    preset: str | None = None,
) -> LabTopology:
    """Combines a preset, --nodes and --distance I,J=D into one validated topology.

    A --distance I,J=D also sets J,I unless J,I is given too (then the matrix is
    asymmetric, as the SLIT allows).  Pairs set by neither the preset nor --distance get
    DEFAULT_REMOTE_DISTANCE.  Raises UsageError on anything QEMU or Linux would refuse.
    """
    base = None
    if preset is not None:
        if preset not in PRESETS:
            raise UsageError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
        base = PRESETS[preset]
        if nodes is not None and nodes != len(base):
            raise UsageError(
                f"--preset {preset} has {len(base)} nodes but --nodes {nodes} was given"
            )
        nodes = len(base)
    if nodes is None:
        nodes = 2
    if not 1 <= nodes <= MAX_NODES:
        raise UsageError(f"--nodes must be between 1 and {MAX_NODES}, not {nodes}")
    if cpus_per_node < 1:
        raise UsageError(f"--cpus-per-node must be at least 1, not {cpus_per_node}")
    if nodes * cpus_per_node > MAX_CPUS:
        raise UsageError(
            f"{nodes} nodes x {cpus_per_node} cpus = {nodes * cpus_per_node} cpus; "
            f"the lab allows at most {MAX_CPUS}"
        )
    mem = parse_size(mem_per_node) if isinstance(mem_per_node, str) else int(mem_per_node)
    if mem < MIN_MEM_PER_NODE:
        raise UsageError(
            f"--mem-per-node must be at least {MIN_MEM_PER_NODE >> 20}M, not {mem >> 20}M"
        )
    if mem % (1 << 20):
        raise UsageError("--mem-per-node must be a whole number of MiB")

    matrix = [list(row) for row in base] if base else [
        [LOCAL_DISTANCE if i == j else DEFAULT_REMOTE_DISTANCE for j in range(nodes)]
        for i in range(nodes)
    ]
    given: dict[tuple[int, int], int] = {}
    for text in distances:
        i, j, d = parse_distance(text)
        for k in (i, j):
            if k >= nodes:
                raise UsageError(
                    f"--distance {text}: node {k} does not exist (nodes are 0..{nodes - 1})"
                )
        if (i, j) in given and given[(i, j)] != d:
            raise UsageError(f"--distance {i},{j} is given twice: {given[(i, j)]} and {d}")
        given[(i, j)] = d
    for (i, j), d in given.items():
        if i == j:
            if d != LOCAL_DISTANCE:
                raise UsageError(
                    f"--distance {i},{j}={d}: a node's distance to itself must be "
                    f"{LOCAL_DISTANCE}"
                )
            continue
        if not LOCAL_DISTANCE < d <= MAX_DISTANCE:
            raise UsageError(
                f"--distance {i},{j}={d}: a distance between two nodes must be between "
                f"{LOCAL_DISTANCE + 1} and {MAX_DISTANCE} (SLIT units, {LOCAL_DISTANCE} = local)"
            )
        matrix[i][j] = d
        if (j, i) not in given:
            matrix[j][i] = d
    if nodes == 1 and given:
        raise UsageError("--distance makes no sense with a single node")
    return LabTopology(nodes, cpus_per_node, mem, tuple(tuple(r) for r in matrix))
