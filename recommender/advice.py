"""The suggestions for a recorded profile, complete: one answer for every view.

`advise` resolves the target (the recorded machine with its measured NUMA factor when
`numaprof topology --measure` cached one for it), chooses a policy per object, and
attaches the source patches with their fallbacks (a loop that cannot be made parallel
becomes bind_block).  `numaprof suggest` (text, JSON, --apply) and `numaprof report
--format html` render this one object, so they never disagree.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from numaprof.analyzer.measure import apply_measured, load_cached
from numaprof.analyzer.model import Analysis, Topology
from numaprof.recommender.choose import suggest
from numaprof.recommender.model import Suggestions
from numaprof.recommender.targets import resolve_target


@dataclass
class Advice:
    """The suggestions and the patches that apply them (one per object; apply merges)."""

    suggestions: Suggestions
    patches: list = field(default_factory=list)


def measured_target(analysis: Analysis, topo: Topology) -> tuple[Topology, str | None]:
    """The recorded machine with the NUMA factor and per-node local bandwidths that
    `numaprof topology --measure` cached for it, when the profile was recorded on this
    host; else ``topo`` unchanged.  Returns the topology and a note saying which factor
    and bandwidths the predictions use (or None)."""
    host = analysis.profile.host
    if topo.n_nodes < 2 or not host or host != socket.gethostname():
        return topo, None
    m = load_cached(topo)
    if m is None:
        return topo, None
    measured = apply_measured(topo, m)
    bw = np.asarray(measured.node_bandwidth, dtype=float)
    local = ", ".join(f"node {n.id} {b:.1f}" for n, b in zip(measured.nodes, bw, strict=True)
                      if np.isfinite(b))
    return measured, (f"NUMA factor measured by `numaprof topology --measure` "
                      f"({m.created or 'cached'}): max {float(measured.numa_factor().max()):.2f} "
                      f"(SLIT {float(topo.slit_factor().max()):.2f})"
                      + (f"; local bandwidth {local} GB/s." if local else "."))


def advise(analysis: Analysis, profile: Path, target: str | None = None,
           root: str | None = None) -> Advice:
    """Every suggestion for the analysed ``profile`` on ``target`` (a preset, an hwloc XML
    path, or None for the recorded machine), with its patch against the sources hashed
    at record time, each compiled with the program's recorded flags before it is offered.
    ``root`` is the source tree the patches are made against (default: the current
    directory, where --apply writes)."""
    topo = resolve_target(target, analysis.topology)
    note = None
    if target is None:
        topo, note = measured_target(analysis, topo)
    root = root or os.getcwd()
    patches: list = []
    result = suggest(analysis, topo,
                     fixer=lambda s: patches.extend(_patches(s, analysis, Path(profile), root)))
    if note:
        result.notes.insert(0, note)
    return Advice(result, patches)


def _patches(result: Suggestions, analysis: Analysis, profile: Path, root: str) -> list:
    from numaprof.recommender.fixes import attach_patches
    from numaprof.recommender.patch.compile import BuildInfo
    from numaprof.recommender.sources import SOURCES_FILE, read_sources_json

    if not (profile / SOURCES_FILE).exists():
        return []
    return attach_patches(result, analysis, list(read_sources_json(profile)), root,
                          build=BuildInfo.from_profile(profile, root))
