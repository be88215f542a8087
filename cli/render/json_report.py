"""The `numaprof.report/1` JSON document (schema: docs/report-json.md)."""

from __future__ import annotations

import json

import numpy as np

from numaprof.analyzer.model import PAGES_SOURCES, Analysis, ObjectResult, Topology

SCHEMA = "numaprof.report/1"


def _r(x: float, nd: int = 4) -> float:
    return round(float(x), nd)


def _matrix(m) -> list[list[float]]:
    return [[_r(v, 3) for v in row] for row in np.asarray(m, dtype=float).tolist()]


def topology(topo: Topology) -> dict:
    return {
        "name": topo.name or None,
        "source": topo.source,
        "nodes": [{"id": n.id, "cpus": list(n.cpus), "memory_bytes": int(n.memory_bytes)}
                  for n in topo.nodes],
        "distances": [[int(v) for v in row] for row in np.asarray(topo.distances).tolist()],
        "numa_factor": _matrix(topo.numa_factor()),
    }


def obj(o: ObjectResult) -> dict:
    ft = o.first_touch
    return {
        "name": o.name,
        "site": o.site,
        "kind": o.kind,
        "address": hex(o.address),
        "size": int(o.size),
        "count": int(o.count),
        "attribution": o.attribution,
        "thread_private": bool(o.thread_private),
        "read_only": bool(o.read_only),
        "pid": int(o.pid),
        "samples": int(o.samples),
        "gather_samples": int(o.gather_samples),
        "share": _r(o.share),
        "pattern": o.pattern,
        "pattern_confidence": _r(o.pattern_confidence, 3),
        "samples_needed": int(o.samples_needed),
        "pattern_tentative": bool(o.pattern_tentative),
        "reads": _r(o.reads),
        "writes": _r(o.writes),
        "rmw": _r(o.rmw),
        "threads": int(o.threads),
        "first_touch": {
            "threads": int(ft.threads),
            "nodes": [int(n) for n in ft.nodes],
            "master_fraction": _r(ft.master_fraction),
            "master_tid": ft.master_tid,
            "sites": list(ft.sites),
            "pages": int(ft.pages),
            "inferred_pages": int(ft.inferred_pages),
            "huge_pages": int(ft.huge_pages),
            "huge_page_size": int(ft.huge_page_size),
            "serial": bool(ft.serial),
        },
        "access_sites": [{"site": site, "samples": int(n)} for site, n in o.access_sites],
        "pages_by_node": [int(v) for v in o.pages_by_node],
        "pages_source": o.pages_source,
        "pages_source_text": PAGES_SOURCES.get(o.pages_source, o.pages_source),
        "pages_policy": o.pages_policy or None,
        "pages_policy_mixed": bool(o.pages_policy_mixed),
        "traffic": _matrix(o.traffic),
        "local_fraction": _r(o.local_fraction),
        "load_per_node": [_r(v) for v in o.load_per_node],
        "imbalance": _r(o.imbalance, 3),
        "phases": [{"start_ns": p.start, "end_ns": p.end, "pattern": p.pattern,
                    "parallel": p.parallel, "samples": p.samples} for p in o.phases],
        "features": {k: _r(v) for k, v in o.features.items()},
    }


def report(a: Analysis, top: int | None = None) -> dict:
    p = a.profile
    objects = a.objects[:top] if top else a.objects
    return {
        "schema": SCHEMA,
        "profile": {
            "path": p.path,
            "command": list(p.command),
            "backend": p.backend,
            "backend_reason": p.backend_reason,
            "samples": int(p.samples),
            "with_address": int(p.with_address),
            "address_coverage": _r(p.address_coverage),
            "spin_wait": int(p.rules.get("spin", 0)),
            "divide_wait": int(p.rules.get("divide", 0)),
            "rules": {k: int(v) for k, v in p.rules.items()},
            "lost": int(p.lost),
            "unresolved": int(p.unresolved),
            "outside_objects": int(p.outside_objects),
            "numaprof_own": int(p.numaprof_own),
            "runtime_samples": int(p.runtime_samples),
            "library_samples": int(p.library_samples),
            "constant_samples": int(p.constant_samples),
            "gather_samples": int(p.gather_samples),
            "complete": bool(p.complete),
            "incomplete_reason": p.incomplete_reason,
            "exit_status": p.exit_status,
            "duration_s": _r(p.duration_s, 3),
            "freq": p.freq,
        },
        "topology": topology(a.topology),
        "objects": [obj(o) for o in objects],
        "traffic": _matrix(a.traffic),
        "local_fraction": _r(a.local_fraction),
        "load_per_node": [_r(v) for v in a.load_per_node],
        "imbalance": _r(a.imbalance, 3),
        "threads": [
            {"tid": t.tid, "pid": t.pid, "comm": t.comm, "samples": int(t.samples),
             "cpus": list(t.cpus), "nodes": list(t.nodes), "node": t.node,
             "migrations": int(t.migrations), "bound": bool(t.bound), "affinity": t.affinity}
            for t in a.threads
        ],
        "node_counters": [
            {"node": c.node, "seconds": _r(c.seconds, 3),
             "dram_bytes": None if c.dram_bytes is None else int(c.dram_bytes),
             "bandwidth_gbs": None if c.bandwidth_gbs is None else _r(c.bandwidth_gbs, 3),
             "peak_gbs": None if c.peak_gbs is None else _r(c.peak_gbs, 3),
             "numastat": dict(c.numastat)}
            for c in a.node_counters
        ],
        "sharing": [
            {"object": f.object, "kind": f.kind, "lines": f.lines, "threads": f.threads,
             "samples": f.samples, "writes": f.writes, "windows": f.windows,
             "share": _r(f.share), "sources": list(f.sources), "hitm": f.hitm, "pages": f.pages,
             "pairs": f.pairs,
             "handoffs": [{"from": a_, "to": b_, "count": n} for a_, b_, n in f.handoffs],
             "fix": f.fix}
            for f in a.sharing
        ],
        "findings": list(a.findings),
    }


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"
