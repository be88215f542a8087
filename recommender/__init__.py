"""The recommender: a placement policy per hot array, from the NUMA factor and contention.

``suggest(analysis, target)`` simulates every candidate policy (docs/recommender.md) on the
measured accesses (:mod:`.policies` for the page→node maps, :mod:`.cost` for the cost
model), picks per object (:mod:`.choose`) and returns :class:`.model.Suggestions` with the
command lines of :mod:`.emit`.  ``targets.resolve_target`` turns ``--target`` into a
Topology.

The names are imported on first use (PEP 562): `record` imports the light
:mod:`.sources` before the program starts, and must not pay for numpy there.
"""

from __future__ import annotations

import importlib

__all__ = ["suggest", "Suggestions", "ObjectSuggestion", "Prediction"]
_WHERE = {"suggest": "choose", "Suggestions": "model", "ObjectSuggestion": "model",
          "Prediction": "model"}


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"numaprof.recommender.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
