"""Node-level counters of a run (docs/analyzer.md, contention).

The collector reads each counter before (phase 0) and after (phase 1) the run into the
`counters` table (docs/profile-format.md):

* the memory controllers' traffic per node — uncore IMC CAS counts (Intel), UMC CAS
  commands (AMD Zen 4) or data-fabric DRAM channel beats (Zen 2/3), already converted to
  bytes by the collector — where the hardware backends found those PMUs;
* the kernel's NUMA allocation counters per node (`numastat`), which exist everywhere but
  are machine-wide: other processes' allocations count too.

``node_counters`` turns them into per-node deltas and the memory bandwidth of each node,
set against the node's measured local bandwidth (`numaprof topology --measure`) when that
is known: a node whose controllers ran near their peak is where contention was.
"""

from __future__ import annotations

import numpy as np

from numaprof.analyzer.model import NodeCounters, Topology

# bytes at the memory controllers (read and write), per node
DRAM_COUNTERS = ("imc.read_bytes", "imc.write_bytes", "umc.read_bytes", "umc.write_bytes",
                 "df.dram_bytes")
NUMASTAT = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node",
            "other_node")
SATURATED = 0.8  # share of the measured peak from which a node's memory is called saturated


def node_counters(table: dict, topo: Topology, peak_gbs: dict[int, float] | None = None
                  ) -> list[NodeCounters]:
    """Per-node deltas (after − before) of the run; one entry per node with any counter.

    ``peak_gbs``: measured local bandwidth per node id (GB/s), if known.
    """
    names = np.asarray(table["name"]).astype(str) if len(table.get("name", ())) else np.zeros(0, str)
    if not len(names):
        return []
    node = np.asarray(table["node"]).astype(np.int64)
    phase = np.asarray(table["phase"]).astype(np.int64)
    time = np.asarray(table["time"]).astype(np.int64)
    value = np.asarray(table["value"]).astype(np.float64)
    out: dict[int, NodeCounters] = {}
    for key in sorted(set(zip(node.tolist(), names.tolist(), strict=True))):
        nd, name = key
        if nd < 0:
            continue  # machine-wide (vmstat): not a node's
        sel = (node == nd) & (names == name)
        before, after = sel & (phase == 0), sel & (phase == 1)
        if not before.any() or not after.any():
            continue
        delta = float(value[after][-1] - value[before][0])
        seconds = (int(time[after][-1]) - int(time[before][0])) / 1e9
        nc = out.setdefault(nd, NodeCounters(node=nd, seconds=seconds))
        if name in DRAM_COUNTERS:
            nc.dram_bytes = (nc.dram_bytes or 0.0) + max(delta, 0.0)
            nc.seconds = seconds
        elif name.startswith("numastat."):
            nc.numastat[name.split(".", 1)[1]] = int(delta)
    for nc in out.values():
        if nc.dram_bytes is not None and nc.seconds > 0:
            nc.bandwidth_gbs = nc.dram_bytes / nc.seconds / 1e9
        peak = (peak_gbs or {}).get(nc.node)
        if peak and np.isfinite(peak) and peak > 0:
            nc.peak_gbs = float(peak)
    known = {n.id for n in topo.nodes}
    return [out[k] for k in sorted(out) if not known or k in known]


def findings(counters: list[NodeCounters]) -> list[str]:
    """Plain sentences: saturated memory controllers, allocations off their node."""
    out = []
    for nc in counters:
        if nc.bandwidth_gbs is not None and nc.peak_gbs:
            share = nc.bandwidth_gbs / nc.peak_gbs
            if share >= SATURATED:
                out.append(f"node {nc.node}: memory controllers at {nc.bandwidth_gbs:.1f} GB/s, "
                           f"{share:.0%} of its measured peak ({nc.peak_gbs:.1f} GB/s): its "
                           "memory bandwidth is saturated; spread the data over the nodes "
                           "(interleave, cyclic) or the threads")
    missed = {nc.node: nc.numastat.get("numa_miss", 0) for nc in counters}
    if any(v > 0 for v in missed.values()):
        where = ", ".join(f"node {k}: {v}" for k, v in missed.items() if v > 0)
        out.append(f"the kernel placed pages off their intended node during the run "
                   f"(numa_miss, machine-wide: {where}): a node ran out of free memory")
    return out


def peak_from_measurement(m) -> dict[int, float]:
    """Measured local triad bandwidth per node id from a `Measurement`."""
    bw = np.asarray(m.bandwidth_gbs, dtype=float)
    return {int(nd): float(bw[i, i]) for i, nd in enumerate(m.nodes)}
