"""The recommender: a placement policy per hot array, from the NUMA factor and contention.

``suggest(analysis, target)`` simulates every candidate policy (docs/recommender.md) on the
measured accesses (:mod:`.policies` for the page→node maps, :mod:`.cost` for the cost
model), picks per object (:mod:`.choose`) and returns :class:`.model.Suggestions` with the
command lines of :mod:`.emit`.  ``targets.resolve_target`` turns ``--target`` into a
Topology.
"""

from numaprof.recommender.choose import suggest
from numaprof.recommender.model import ObjectSuggestion, Prediction, Suggestions

__all__ = ["suggest", "Suggestions", "ObjectSuggestion", "Prediction"]
