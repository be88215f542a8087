"""Plain result objects of the recommender (SPEC §4.2, §5 `numaprof.suggest/1`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from numaprof.analyzer.model import Topology


@dataclass
class Prediction:
    """One row of the what-if table: an object placed with ``policy`` on the target."""

    policy: str
    local_fraction: float  # trace / total of the predicted traffic matrix
    imbalance: float  # max / mean predicted load over the target's memory nodes
    score: float  # predicted cost: mean NUMA factor per access x contention (lower is better)
    latency: float = 1.0  # mean NUMA factor per access (1.0 = all local)
    contention: float = 1.0  # contention term used in the score
    change: str = "none"  # none | env | numactl | patch: what applying it takes
    traffic: np.ndarray | None = field(default=None, repr=False)  # (N, N) predicted


@dataclass
class ObjectSuggestion:
    name: str
    policy: str
    reason: str  # one sentence
    predicted: Prediction
    alternatives: list[Prediction]  # every candidate, best score first
    patch: str | None = None  # unified diff (recommender issue: patches)
    change: str = "none"  # none | env | numactl | patch
    current: Prediction | None = None  # the unchanged program (first touch) on the target
    size: int = 0
    share: float = 0.0

    def alternative(self, policy: str) -> Prediction | None:
        """The what-if row of ``policy`` (e.g. to switch a refused parallel_init to bind_block)."""
        return next((a for a in self.alternatives if a.policy == policy), None)


@dataclass
class Suggestions:
    target: Topology
    target_name: str
    objects: list[ObjectSuggestion]
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    thread_nodes: list[int] = field(default_factory=list)  # node per Analysis.threads entry
    binding: str | None = None  # spread | close | None (measured placement kept)
