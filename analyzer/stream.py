"""Bounded analysis of large profiles: the samples the analysis keeps (docs/analyzer.md,
"Large profiles").

A profile of at most BUDGET samples is analysed whole.  A larger one is read once, a
chunk of rows at a time, never whole:

1. every row is counted exactly: samples, samples with an address, rules, samples per
   thread, and samples per *stratum*: the object whose heap block, static variable or
   mapping holds the address (the same layers, in the same priority, as the analysis),
   outside every object, or without an address;
2. a row is kept with its stratum's probability ``p``, chosen so that about BUDGET rows
   are kept in all and a stratum of few samples keeps every one (water-filling: every
   stratum keeps min(count, cap) rows).  The choice is a hash of the row's number:
   independent of the address, the thread and the time, and the same on every run.
   The counts grow as the rows are read, and with them the probabilities only fall:
   the rows held are pruned to the current ones as they pile up, and at the end to the
   final ones, which leaves exactly the rows that the final probabilities keep (a
   bottom-k sample per stratum, as in reservoir sampling).

Each kept row carries a weight, its stratum's count over its stratum's kept rows (1/p in
expectation): a stratum's weights add up to its exact count, and traffic, the read/write
mix and the what-if cost are estimated from its kept rows without bias.
A large object's pattern is classified from its kept rows, as from a recording at a
lower rate (``p`` times the rate); the accuracy this costs is measured by
bench/stream_accuracy.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from numaprof.analyzer import attribution as att
from numaprof.analyzer.profile import chunks, rows_of

#: Rows analysed whole; a larger profile keeps about this many (the analysis costs about
#: 200 bytes of memory a kept row: 0.9 GiB at 4 M, with the pass's chunk).
BUDGET = 4_000_000
#: Rows read at a time by the pass.
CHUNK = 1 << 20



@dataclass
class Subsample:
    table: dict[str, np.ndarray]  # every column of the samples table, at the kept rows
    weight: np.ndarray  # float64: the samples each kept row stands for (1.0 where its stratum kept all)
    rows: int  # rows of the whole table
    with_address: int  # exact, over all rows
    rules: np.ndarray  # exact count per rule value (256)
    tids: np.ndarray  # every tid seen, sorted
    tid_counts: np.ndarray  # exact samples of each of ``tids``

    @property
    def kept(self) -> int:
        return len(self.weight)


def subsample(s: dict[str, np.ndarray], layers: list[att.Intervals], n_obj: int,
              budget: int = BUDGET, progress: Callable[[float], None] | None = None,
              base_rule: int = -1) -> Subsample:
    """Count every row of the samples table ``s`` and keep about ``budget`` of them,
    stratified by object (``layers``: interval sets in priority order, their ``obj``
    numbered below ``n_obj``), in one pass over the table.  Rows of rule ``base_rule``
    (a gather's base register: an object, no element) are not counted as addressed."""
    step = progress or (lambda _f: None)
    n = len(s["time"])
    outside, no_addr = n_obj, n_obj + 1
    per_stratum = np.zeros(n_obj + 2, dtype=np.int64)
    rules = np.zeros(256, dtype=np.int64)
    tid_count: dict[int, int] = {}
    with_address = 0
    kept: dict[str, list[np.ndarray]] = {k: [] for k in s}
    kept_stratum: list[np.ndarray] = []
    kept_u: list[np.ndarray] = []
    held = 0
    for a, b in chunks(n, CHUNK):
        step(a / max(n, 1))
        c = {k: rows_of(col, a, b) for k, col in s.items()}
        stratum = _strata(c, layers, outside, no_addr)
        per_stratum += np.bincount(stratum, minlength=n_obj + 2)
        with_address += int(np.count_nonzero((c["addr"] != 0) & (c["rule"] != base_rule)))
        rules += np.bincount(c["rule"].astype(np.int64), minlength=256)[:256]
        tu, tk = np.unique(c["tid"].astype(np.int64), return_counts=True)
        for t, m in zip(tu.tolist(), tk.tolist(), strict=True):
            tid_count[t] = tid_count.get(t, 0) + m
        # the probabilities only fall as the counts grow: a row kept at a lower one now
        # would have been kept when it was read, and one dropped then is dropped now
        p = keep_probabilities(per_stratum, budget)
        u = uniform(np.arange(a, b, dtype=np.uint64))
        keep = np.flatnonzero(u < p[stratum])
        for k in s:
            kept[k].append(c[k][keep])
        kept_stratum.append(stratum[keep])
        kept_u.append(u[keep])
        held += len(keep)
        if held > 2 * budget:
            held = _prune(kept, kept_stratum, kept_u, p)
    _prune(kept, kept_stratum, kept_u, keep_probabilities(per_stratum, budget))
    step(1.0)
    table = {}
    for k in list(kept):  # a column at a time, its chunks released as it is joined
        parts = kept.pop(k)
        table[k] = np.concatenate(parts) if parts else np.zeros(0, dtype=s[k].dtype)
        del parts
    # each kept row stands for its stratum's count over its stratum's kept rows (1/p in
    # expectation): the weights of a stratum add up to its exact count
    ks = np.concatenate(kept_stratum) if kept_stratum else np.zeros(0, dtype=np.int64)
    weight = (per_stratum / np.maximum(np.bincount(ks, minlength=n_obj + 2), 1))[ks]
    tids = np.array(sorted(tid_count), dtype=np.int64)
    return Subsample(table=table, weight=weight,
                     rows=n, with_address=with_address, rules=rules, tids=tids,
                     tid_counts=np.array([tid_count[t] for t in tids.tolist()], dtype=np.int64))


def _prune(kept: dict[str, list[np.ndarray]], strata: list[np.ndarray], us: list[np.ndarray],
           p: np.ndarray) -> int:
    """Drop the held rows that the probabilities ``p`` no longer keep; returns the rows
    still held."""
    held = 0
    for j, (st, u) in enumerate(zip(strata, us, strict=True)):
        stay = u < p[st]
        if not stay.all():
            for cols in kept.values():
                cols[j] = cols[j][stay]
            strata[j], us[j] = st[stay], u[stay]
        held += int(stay.sum())
    return held


def keep_probabilities(counts: np.ndarray, budget: int) -> np.ndarray:
    """Probability of keeping a row of each stratum: every stratum keeps min(count, cap)
    rows in expectation, with the one cap that keeps ``budget`` rows in all (all of them
    when the counts add up to no more)."""
    counts = np.asarray(counts, dtype=np.int64)
    p = np.ones(len(counts), dtype=np.float64)
    if counts.sum() <= budget:
        return p
    c = np.sort(counts)
    # below the cap a stratum keeps everything: find the smallest k such that the k
    # smallest strata and (len - k) strata at the cap c[k] exceed the budget
    below = np.concatenate([[0], np.cumsum(c)])[:-1]
    rest = len(c) - np.arange(len(c))
    total_at = below + rest * c  # rows kept if the cap were c[k]
    k = int(np.searchsorted(total_at, budget, side="right"))
    cap = (budget - below[k]) / rest[k] if k < len(c) else float(c[-1])
    big = counts > cap
    p[big] = cap / counts[big]
    return p


def uniform(rows: np.ndarray) -> np.ndarray:
    """A number in [0, 1) for each row number: SplitMix64 of the number (Steele, Lea and
    Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014), so that the
    rows kept are the same on every run."""
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _strata(c: dict[str, np.ndarray], layers, outside: int, no_addr: int) -> np.ndarray:
    has = np.flatnonzero(c["addr"] != 0)
    out = np.full(len(c["addr"]), no_addr, dtype=np.int64)
    iv = att.locate_layers(c["pid"][has], c["addr"][has].astype(np.uint64), c["time"][has].astype(np.uint64),
                       layers)
    obj = np.concatenate([part.obj for part in layers]) if layers else np.zeros(0, dtype=np.int64)
    out[has] = np.where(iv >= 0, obj[np.maximum(iv, 0)] if len(obj) else outside, outside)
    return out
