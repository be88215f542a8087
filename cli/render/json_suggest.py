"""The `numaprof.suggest/1` JSON document (schema: docs/suggest-json.md)."""

from __future__ import annotations

import json

from numaprof.analyzer.model import Analysis
from numaprof.cli.render.json_report import topology

SCHEMA = "numaprof.suggest/1"


def _r(x: float, nd: int = 4) -> float:
    return round(float(x), nd)


def _fix(fix) -> dict | None:
    """The patch behind a suggestion and how it was checked (docs/suggest-json.md)."""
    if fix is None:
        return None
    return {"status": fix.status, "kind": fix.kind or None, "statement": fix.statement or None,
            "where": fix.where or None, "target": fix.target or None, "size": fix.size or None,
            "size_bytes": fix.size_bytes, "recorded_bytes": fix.recorded_bytes,
            "compile": fix.compile or None, "compiler": fix.compiler or None,
            "checks": list(fix.checks), "by_hand": fix.by_hand or None}


def suggestion(s, analysis: Analysis, top: int | None = None) -> dict:
    from numaprof.recommender.choose import replicate_code

    objects = s.objects[:top] if top else s.objects
    return {
        "schema": SCHEMA,
        "profile": {"path": analysis.profile.path, "command": list(analysis.profile.command)},
        "target": {**topology(s.target), "name": s.target_name},
        "objects": [
            {
                "name": o.name,
                "policy": o.policy,
                "change": o.change,
                "reason": o.reason,
                "predicted": {"local_fraction": _r(o.predicted.local_fraction),
                              "imbalance": _r(o.predicted.imbalance, 3),
                              "score": _r(o.predicted.score)},
                "alternatives": [
                    {"policy": a.policy, "local_fraction": _r(a.local_fraction),
                     "imbalance": _r(a.imbalance, 3), "score": _r(a.score),
                     "copies": int(a.copies)}
                    for a in o.alternatives
                ],
                "patch": o.patch,
                "weights": ([{"node": int(n), "weight": int(w)}
                             for n, w in zip(o.weighted_nodes, o.weights, strict=True)]
                            if o.weights else None),
                "ties": list(o.ties),
                "fix": _fix(o.fix),
                "replicate": ({"local_fraction": _r(o.replicate.local_fraction),
                               "imbalance": _r(o.replicate.imbalance, 3),
                               "score": _r(o.replicate.score), "copies": int(o.replicate.copies),
                               "bytes": int(o.size) * int(o.replicate.copies),
                               "by_hand": replicate_code(o.name)}
                              if o.replicate is not None else None),
            }
            for o in objects
        ],
        "commands": list(s.commands),
        "notes": list(s.notes),
        "sharing_fixes": [{"object": f.object, "kind": f.kind, "reason": f.reason,
                           "patch": f.patch, "fix": _fix(f.fix)}
                          for f in getattr(s, "sharing_fixes", [])],
    }


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"
