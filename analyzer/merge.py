"""Combining the analyses of several profiles (MPI ranks, or the slices of one run:
`report prof.*`).

Each rank is its own process with its own profile; the combined view adds up, per object
name, the samples, traffic matrices, pages per node and first-touch pages, and
recomputes the shares and fractions from the sums.  Ranks must have been recorded on
machines with the same number of NUMA nodes.  The slices of one process (`record
--switch-output`: one host, one attached pid) hold the same memory, slice after slice:
an array alive across them is one array, so its size, count and pages by node are not
added up (the largest; the pages of the last slice that saw any), its first-touch pages are (each page
is first touched in one slice), and a slice with too few of its samples to tell its
pattern (`unknown`) does not make it `mixed`.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from numaprof.analyzer.format import not_accesses
from numaprof.analyzer.model import Analysis, FirstTouch, ObjectResult, ProfileInfo
from numaprof.errors import UsageError


def _local(t: np.ndarray) -> float:
    total = float(t.sum())
    return float(np.trace(t)) / total if total > 0 else 0.0


def _load(t: np.ndarray) -> tuple[list[float], float]:
    per_node = t.sum(axis=0)
    total = float(per_node.sum())
    if total <= 0:
        return [0.0] * len(per_node), 0.0
    share = per_node / total
    return [float(v) for v in share], float(share.max() / share.mean())


def _merge_objects(objs: list[ObjectResult], total_samples: int, slices: bool = False) -> ObjectResult:
    first = objs[0]
    samples = sum(o.samples for o in objs)
    traffic = sum((np.asarray(o.traffic, float) for o in objs), np.zeros_like(first.traffic,
                                                                              dtype=float))
    load, imbalance = _load(traffic)

    def mix(attr: str) -> float:
        return sum(getattr(o, attr) * o.samples for o in objs) / samples if samples else 0.0

    ft_pages = sum(o.first_touch.pages for o in objs)
    ft = FirstTouch(
        threads=sum(o.first_touch.threads for o in objs),
        nodes=sorted({n for o in objs for n in o.first_touch.nodes}),
        master_fraction=(sum(o.first_touch.master_fraction * o.first_touch.pages for o in objs)
                         / ft_pages if ft_pages else 0.0),
        master_tid=None,
        sites=list(dict.fromkeys(s for o in objs for s in o.first_touch.sites)),
        pages=ft_pages,
        # a profile in which it was first-touched nowhere (a later slice) says nothing
        serial=any(o.first_touch.pages for o in objs)
        and all(o.first_touch.serial for o in objs if o.first_touch.pages),
        inferred_pages=sum(o.first_touch.inferred_pages for o in objs),
        huge_pages=sum(o.first_touch.huge_pages for o in objs),
        huge_page_size=max(o.first_touch.huge_page_size for o in objs),
    )
    patterns = {o.pattern for o in objs}
    if slices and len(patterns) > 1:
        patterns.discard("unknown")
    pattern = min(patterns) if len(patterns) == 1 else "mixed:" + "/".join(sorted(patterns))
    if slices:
        told = [o for o in objs if o.pattern == pattern] or objs
        first = replace(max(told, key=lambda o: o.samples), name=first.name)
        # where its pages are at the last slice that saw any (not one after its release)
        seen = [o for o in objs if sum(o.pages_by_node)] or objs
        pages_by_node = [int(v) for v in seen[-1].pages_by_node]
    else:
        pages_by_node = [int(v) for v in np.sum([o.pages_by_node for o in objs], axis=0)]
    # tentative only when every object it rests on is (each on too few samples)
    tentative = all(o.pattern_tentative for o in objs if o.pattern == pattern) and any(
        o.pattern == pattern for o in objs)
    return replace(
        first,
        samples=samples,
        gather_samples=sum(o.gather_samples for o in objs),
        pattern_tentative=tentative,
        samples_needed=first.samples_needed if pattern == "unknown" or tentative else 0,
        share=samples / total_samples if total_samples else 0.0,
        size=max(o.size for o in objs) if slices else sum(o.size for o in objs),
        count=max(o.count for o in objs) if slices else sum(o.count for o in objs),
        threads=max(o.threads for o in objs) if slices else sum(o.threads for o in objs),
        pattern=pattern,
        pattern_confidence=min((o.pattern_confidence for o in objs if o.pattern == pattern),
                               default=min(o.pattern_confidence for o in objs)),
        reads=mix("reads"), writes=mix("writes"), rmw=mix("rmw"),
        first_touch=ft,
        pages_by_node=pages_by_node,
        traffic=traffic,
        local_fraction=_local(traffic),
        load_per_node=load,
        imbalance=imbalance,
        phases=[],
        features={},
        access=None,
    )


def merge(analyses: list[Analysis]) -> Analysis:
    """One Analysis for several profiles (ranks), objects combined by name."""
    if len({a.topology.n_nodes for a in analyses}) > 1:
        raise UsageError("the profiles were recorded on machines with different numbers of "
                         "NUMA nodes; report them one by one")
    with_address = sum(a.profile.with_address for a in analyses)
    by_name: dict[str, list[ObjectResult]] = {}
    for a in analyses:
        for o in a.objects:
            by_name.setdefault(o.name, []).append(o)
    processes = {(a.profile.host, a.profile.attached_pid) for a in analyses}
    slices = len(processes) == 1 and None not in next(iter(processes))
    gathers = sum(a.profile.gather_samples for a in analyses)
    objects = sorted((_merge_objects(v, with_address + gathers, slices) for v in by_name.values()),
                     key=lambda o: -o.samples)
    traffic = sum((np.asarray(a.traffic, float) for a in analyses),
                  np.zeros_like(analyses[0].traffic, dtype=float))
    load, imbalance = _load(traffic)
    p0 = analyses[0].profile
    samples = sum(a.profile.samples for a in analyses)
    rules: dict[str, int] = {}
    for a in analyses:
        for r, c in a.profile.rules.items():
            rules[r] = rules.get(r, 0) + int(c)
    busy = samples - not_accesses(rules)
    profile = ProfileInfo(
        path=" + ".join(a.profile.path for a in analyses),
        command=p0.command,
        backend=p0.backend,
        backend_reason=p0.backend_reason,
        samples=samples,
        with_address=with_address,
        address_coverage=with_address / busy if busy > 0 else 0.0,
        rules=rules,
        lost=sum(a.profile.lost for a in analyses),
        unresolved=sum(a.profile.unresolved for a in analyses),
        outside_objects=sum(a.profile.outside_objects for a in analyses),
        numaprof_own=sum(a.profile.numaprof_own for a in analyses),
        runtime_samples=sum(a.profile.runtime_samples for a in analyses),
        library_samples=sum(a.profile.library_samples for a in analyses),
        constant_samples=sum(a.profile.constant_samples for a in analyses),
        gather_samples=gathers,
        complete=all(a.profile.complete for a in analyses),
        incomplete_reason="; ".join(a.profile.incomplete_reason for a in analyses
                                    if a.profile.incomplete_reason) or None,
        exit_status=max((a.profile.exit_status or 0) for a in analyses),
        duration_s=max(a.profile.duration_s for a in analyses),
        env=p0.env,
        freq=p0.freq,
    )
    return Analysis(
        profile=profile,
        topology=analyses[0].topology,
        objects=objects,
        threads=[copy.copy(t) for a in analyses for t in a.threads],
        traffic=traffic,
        local_fraction=_local(traffic),
        load_per_node=load,
        imbalance=imbalance,
        findings=list(dict.fromkeys(f for a in analyses for f in a.findings)),
    )
