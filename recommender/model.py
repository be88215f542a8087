"""Plain result objects of the recommender (docs/recommender.md; the JSON `numaprof.suggest/1` of docs/suggest-json.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from numaprof.analyzer.model import Topology


@dataclass(frozen=True)
class BandwidthPressure:
    """How bandwidth-bound the recorded run was, from its node counters (cost.py)."""

    beta: float  # streaming share of a contention-free run: weight of contention in the score
    busiest_node: int  # node id with the highest bandwidth / peak
    busiest_gbs: float  # its memory-controller bandwidth over the run
    busiest_peak_gbs: float  # its measured local peak (numaprof topology --measure)
    busiest_share: float  # busiest_gbs / busiest_peak_gbs
    even_share: float  # all nodes' bytes over the peaks of the nodes in use
    total_gbs: float  # all nodes together


@dataclass
class Prediction:
    """One row of the what-if table: an object placed with ``policy`` on the target."""

    policy: str
    local_fraction: float  # trace / total of the predicted traffic matrix
    imbalance: float  # max / mean predicted load over the target's memory nodes
    score: float  # predicted cost: mean NUMA factor per access x contention (lower is better)
    latency: float = 1.0  # mean NUMA factor per access (1.0 = all local)
    contention: float = 1.0  # contention term used in the score
    change: str = "none"  # none | env | numactl | patch | code: what applying it takes
    traffic: np.ndarray | None = field(default=None, repr=False)  # (N, N) predicted
    copies: int = 1  # the object's copies in memory (replicate: one per node in use)


@dataclass
class Fix:
    """The source change behind a suggestion and how it was checked (docs/apply.md).

    status: ``offered`` (the patch is in ``ObjectSuggestion.patch``), ``already placed``
    (the source has the placement: `statement` is the call found there), ``refused`` (no
    safe patch: `by_hand` gives the line to add when it is known).  `kind` is one of
    recommender.patch.PATCH_KINDS.  `checks` say, one sentence each, what names the
    statement uses mean where it goes, what size it places against what the profile
    recorded, and how it compiled (`compile`: clean | failed | not checked).
    """

    object: str
    status: str
    kind: str = ""
    statement: str = ""
    where: str = ""  # file:line of the statement it goes next to (or of the existing call)
    target: str = ""  # the pointer expression placed
    size: str = ""  # the byte count as written
    size_bytes: int | None = None  # its value when the file gives it as constants
    recorded_bytes: int | None = None  # what the profile recorded for the object
    compile: str = ""
    compiler: str = ""
    checks: list[str] = field(default_factory=list)
    by_hand: str = ""


@dataclass
class ObjectSuggestion:
    name: str
    policy: str
    reason: str  # one sentence
    predicted: Prediction
    alternatives: list[Prediction]  # every candidate, best score first
    patch: str | None = None  # unified diff (recommender issue: patches)
    change: str = "none"  # none | env | numactl | patch | code (a call to add by hand)
    current: Prediction | None = None  # the unchanged program (first touch) on the target
    size: int = 0
    share: float = 0.0
    # weighted_interleave (the chosen policy): node ids and their weights (pages per round)
    weighted_nodes: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    fix: Fix | None = None  # the source change and how it was checked (change patch/code)
    ties: list[str] = field(default_factory=list)  # policies predicted as good as the choice
    # a copy per node, when predicted better than the choice and not patched (by hand)
    replicate: Prediction | None = None
    replicate_refused: str = ""  # why the replicate patch was not made

    def alternative(self, policy: str) -> Prediction | None:
        """The what-if row of ``policy`` (e.g. to switch a refused parallel_init to bind_block)."""
        return next((a for a in self.alternatives if a.policy == policy), None)


@dataclass
class SharingFix:
    """The patch for a sharing finding (false sharing of per-thread slots: a line each)."""

    object: str
    kind: str  # false (the finding's)
    reason: str
    patch: str | None = None  # unified diff
    fix: Fix | None = None


@dataclass
class Suggestions:
    target: Topology
    target_name: str
    objects: list[ObjectSuggestion]
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    thread_nodes: list[int] = field(default_factory=list)  # node per Analysis.threads entry
    binding: str | None = None  # spread | close | None (measured placement kept)
    pressure: BandwidthPressure | None = None  # from the node counters, when they give it
    # weighted_interleave: node ids and weights (pages per round) when it was a candidate
    weighted_nodes: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    sharing_fixes: list[SharingFix] = field(default_factory=list)
