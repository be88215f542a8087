"""Deciding an object's access pattern from its features (docs/analyzer.md; Pousa Ribeiro et al. 2010, Figure 15).

:func:`classify` asks the scikit-learn model trained on recorded microbenchmarks
(:mod:`numaprof.analyzer.classifier`, docs/classifier.md).  The phases keep hand-set
thresholds, the midpoints between the synthetic kinds in tests/profgen.py:

* random: inside a window each thread spreads over most of the array (median span of
  the 5–95 % position range ≳ 0.5) with a high spatial entropy, and the threads' ranges
  coincide (overlap ≳ 0.5);
* otherwise structured: regular when each thread keeps its rank among the threads'
  blocks in every parallel window (low *instability*), irregular when it changes.
"""

from __future__ import annotations

import numpy as np

from numaprof.analyzer import classifier
from numaprof.analyzer.features import Windows
from numaprof.analyzer.model import Phase

RANDOM_SPAN = 0.5
RANDOM_ENTROPY = 0.6
RANDOM_OVERLAP = 0.5  # mean pairwise overlap (IoU) of the threads' 5–95 % ranges
RANDOM_STEP = 0.15  # median |position step| between a thread's consecutive samples
PHASE_CHANGE = 0.3
SHARED_RANGE = 0.5  # mean overlap of the threads' ranges in a window
MIN_SERIAL_PHASE = 50  # samples a serial stretch needs to be reported as a phase
MIN_SERIAL_SHARE = 0.02  # ... or this share of the object's samples, if larger  # rank change between consecutive windows that starts a new phase


def _random_score(span: float, entropy: float, overlap: float, step: float) -> float:
    # 0.5 at the thresholds, 1 well above all, 0 well below any.  Overlap matters with
    # few threads: two threads each sweeping its half of the array span ~0.45 each, but
    # their ranges are disjoint; under random access they coincide.  The step between a
    # thread's consecutive samples separates random access from phases that alternate
    # faster than a window (a loop run backwards then forwards every iteration).
    a = np.clip(0.5 + (span - RANDOM_SPAN) / 0.6, 0, 1)
    b = np.clip(0.5 + (entropy - RANDOM_ENTROPY) / 0.6, 0, 1)
    c = np.clip(0.5 + (overlap - RANDOM_OVERLAP) / 0.6, 0, 1)
    d = np.clip(0.5 + (step - RANDOM_STEP) / 0.2, 0, 1)
    return float(min(a, b, c, d))


def classify(features: dict[str, float]) -> tuple[str, float]:
    """(pattern, confidence) for an object: the trained model's answer
    (:mod:`numaprof.analyzer.classifier`), or "unknown", 0.0 when the samples are too
    few or only serial phases exist."""
    return classifier.classify(features)


def phases(w: Windows, t_origin: int, pattern: str | None = None) -> list[Phase]:
    """Runs of windows with the same label: serial, random, regular (stable mapping) or
    irregular (mapping changing window to window, e.g. dynamic scheduling).

    ``pattern`` is the object's decided pattern: windows look random on their own when
    loops alternate faster than a window, so only a random object has random phases.
    """
    W = len(w.samples)
    labels: list[str] = []
    seg_id: list[int] = []
    seg = 0
    prev_struct = None
    for i in range(W):
        if w.samples[i] == 0:
            labels.append("empty")
        elif not w.parallel[i]:
            labels.append("serial")
        elif pattern in (None, "random") and _random_score(
                *(float(np.nan_to_num(x[i], nan=1.0)) for x in (w.span, w.entropy, w.overlap, w.step))) >= 0.5:
            labels.append("random")
        elif not np.isnan(w.overlap[i]) and w.overlap[i] >= SHARED_RANGE:
            labels.append("irregular")  # threads interleave in one region: no owner per block
        else:
            labels.append("structured")
        if labels[-1] == "structured":
            if prev_struct is not None and labels[-2] == "structured":
                d = w.distance[prev_struct, i]
                if not np.isnan(d) and d > PHASE_CHANGE:
                    seg += 1
            prev_struct = i
        if i and labels[-1] != labels[-2]:
            seg += 1
        seg_id.append(seg)
    # structured segments of one window are mapping changes: they are irregular
    final = list(labels)
    for i in range(W):
        if labels[i] == "structured":
            size = sum(1 for j in range(W) if seg_id[j] == seg_id[i])
            final[i] = "regular" if size >= 2 else "irregular"
    # phases: serial stretches and windows in time order, neighbours with the same label
    # merged (regular ones only within one mapping segment)
    pieces = w.pieces or {"window": np.arange(W), "start": w.start, "end": w.end, "samples": w.samples}
    total = int(np.sum(pieces["samples"])) if len(pieces["samples"]) else 0
    # A thread alone for a few dozen samples inside a parallel phase is descheduling or
    # chance, not a serial phase: short serial stretches stay in the phase around them.
    min_serial = max(MIN_SERIAL_PHASE, int(MIN_SERIAL_SHARE * total))
    res: list[Phase] = []
    last_key = None
    carry = 0
    for v, a, b, c in zip(*(np.asarray(pieces[k]).tolist() for k in ("window", "start", "end", "samples")),
                          strict=True):
        lab = "serial" if v < 0 else final[v]
        if lab == "empty" or c == 0:
            continue
        if v < 0 and c < min_serial:
            if res:
                res[-1].end = int(b - t_origin)
                res[-1].samples += int(c)
            else:
                carry += int(c)
            continue
        key = (lab, seg_id[v]) if lab == "regular" else (lab,)
        if res and key == last_key:
            res[-1].end = int(b - t_origin)
            res[-1].samples += int(c)
        else:
            res.append(Phase(start=int(a - t_origin), end=int(b - t_origin), pattern=lab,
                             parallel=lab != "serial", samples=int(c) + carry))
            carry = 0
        last_key = key
    if carry and res:
        res[-1].samples += carry
    elif carry:
        res.append(Phase(start=int(pieces["start"][0] - t_origin), end=int(pieces["end"][-1] - t_origin),
                         pattern="serial", parallel=False, samples=carry))
    return res
