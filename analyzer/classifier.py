"""The trained access-pattern classifier (docs/classifier.md), evaluated with numpy.

The model is a scikit-learn random forest trained by :mod:`numaprof.cli.train` on
labelled recordings of the project's microbenchmarks, shipped as plain JSON
(``model_data/pattern_model.json``: per tree the node arrays ``left``, ``right``,
``feature``, ``threshold``, ``value``).  Loading never unpickles anything and needs no
scikit-learn.  Evaluation follows scikit-learn's exactly: features are compared as
float32 (``x <= threshold`` goes left), each tree's leaf class counts are normalised, the
trees' probabilities are summed in order and divided by the number of trees, and the
class is the first with the largest probability.  docs/classifier.md lists the features.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from numaprof.errors import NumaprofError

MODEL_PATH = Path(__file__).resolve().parent / "model_data" / "pattern_model.json"
FORMAT = "numaprof-pattern-forest"
VERSION = 1
CLASSES = ("irregular", "random", "regular")
N_TREES = 50

# The analyzer's feature dict (features.py) → model inputs.  Counts (samples, windows,
# pairs) are left out: they grow with the run's length and the array size, not with the
# pattern.  Three inputs combine raw features the way Figure 15 defines the classes, so
# that the trees cannot lean on one ingredient that happens to separate the training
# runs (docs/classifier.md):
#   shared_range    the threads' ranges coincide, in a window and inside each loop
#   mapping_change  the thread ↔ block mapping changes, between windows or between loops
#   random_evidence spread × coinciding × independent steps, as a soft AND (minimum)
#   no_owner        shared_range OR mapping_change (maximum): no thread keeps a block,
#                   Figure 15's irregular clause in one input, so that a tree need not
#                   rebuild the OR from two splits (one input is drawn per split)
FEATURES = (
    "random_evidence",
    "shared_range",
    "mapping_change",
    "no_owner",
)
STEP_RANDOM = 0.29  # median |step| between independent uniform positions (1 − 1/√2)
MIN_PAIRS = 10  # steps needed before a median step means anything
MIN_WINDOW_PAIRS = 3  # window pairs compared before a rank change counts in full


# The fallback when the model has no answer (the analyzer's rule, docs/analyzer.md):
MIN_SAMPLES = 30  # samples of the object
MIN_PARALLEL_SAMPLES = 15  # samples in parallel windows (serial phases never decide)
# Below this many samples a random or irregular answer is tentative (measured on the
# few-sample table, tests/data/training/features_few.csv; docs/classifier.md)
FIRM_SAMPLES = 100
TENTATIVE_PATTERNS = ("random", "irregular")


def _num(f: dict, name: str, default: float = 0.0) -> float:
    v = f.get(name, default)
    v = default if v is None else float(v)
    return default if math.isnan(v) or math.isinf(v) else v


def feature_vector(features: dict) -> list[float]:
    """The model's inputs, in FEATURES order, from an object's feature dict."""
    f = {k: _num(features, k) for k in features if isinstance(features[k], (int, float))}
    shared = f.get("overlap_median", 0.0)
    if f.get("contexts", 0.0) >= 1:
        shared = min(shared, f.get("context_overlap", 0.0))
    f["shared_range"] = shared
    # a rank change between two windows only is weak evidence: shrunk below MIN_WINDOW_PAIRS
    trust = min(1.0, f.get("window_pairs", 0.0) / MIN_WINDOW_PAIRS)
    f["mapping_change"] = max(f.get("instability", 0.0) * trust, f.get("context_instability", 0.0))
    # without enough steps to measure, steps say nothing either way (they count as random)
    step = f.get("step_median", 0.0) if f.get("step_pairs", 0.0) >= MIN_PAIRS else STEP_RANDOM
    cross = f.get("cross_step_median", 0.0) if f.get("cross_pairs", 0.0) >= MIN_PAIRS else STEP_RANDOM
    f["random_evidence"] = min(f.get("span_median", 0.0), f.get("entropy_median", 0.0), shared,
                               min(step, cross) / STEP_RANDOM)
    f["no_owner"] = max(f["shared_range"], f["mapping_change"])
    return [f.get(name, 0.0) for name in FEATURES]


def fallback(features: dict) -> tuple[str, float] | None:
    """("unknown", 0.0) when the samples cannot say (too few, or only serial phases:
    one thread alone on the object never decides its pattern); None when the model
    answers."""
    n = float(features.get("parallel_samples", 0.0) or 0.0)
    if (float(features.get("samples", 0.0) or 0.0) < MIN_SAMPLES
            or float(features.get("parallel_windows", 0.0) or 0.0) < 1 or n < MIN_PARALLEL_SAMPLES):
        return "unknown", 0.0
    return None


def tentative(pattern: str, features: dict) -> bool:
    """Whether a random or irregular answer rests on too few samples to be firm.  Under
    FIRM_SAMPLES the two are often confused (docs/classifier.md "Few samples": of the
    held-out arrays with 30-99 samples called random, a third were dynamic-schedule
    irregular ones); a regular answer is not (all of them right there)."""
    return pattern in TENTATIVE_PATTERNS and _num(features, "samples") < FIRM_SAMPLES


def samples_needed(features: dict, pattern: str = "unknown") -> int:
    """How many more samples an object needs before its pattern can be told (0: enough,
    or more would not help: one thread alone on it); for a tentative random or irregular
    answer, how many more make it firm.  The samples of an object grow with the sampling
    rate and the run's length, so a recording at the rate times ``(samples + needed) /
    samples`` would give it enough."""
    n = float(features.get("samples", 0.0) or 0.0)
    if pattern != "unknown":
        return int(math.ceil(FIRM_SAMPLES - n)) if tentative(pattern, features) else 0
    par = float(features.get("parallel_samples", 0.0) or 0.0)
    if float(features.get("threads", 0.0) or 0.0) < 2 and n >= MIN_SAMPLES:
        return 0  # one thread (or serial phases only): more samples would not change that
    if n <= 0:
        return 0
    # the parallel share of its samples stays what it is when there are more of them
    par_needed = MIN_PARALLEL_SAMPLES * n / par - n if par > 0 else 0.0
    return int(math.ceil(max(MIN_SAMPLES - n, par_needed if par > 0 else 0.0, 0.0)))


class PatternModel:
    """A random forest from its exported JSON; predict / predict_proba like scikit-learn."""

    def __init__(self, data: dict):
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise NumaprofError(f"pattern model: format {data.get('format')!r} version "
                                f"{data.get('version')!r}, this numaprof reads {FORMAT} version {VERSION}")
        if list(data["features"]) != list(FEATURES):
            raise NumaprofError("pattern model: its features differ from this numaprof's; "
                                "retrain with python -m numaprof.cli.train fit")
        self.classes = np.array(data["classes"])
        self.trees = []
        for t in data["trees"]:
            self.trees.append((np.asarray(t["left"], dtype=np.int64), np.asarray(t["right"], dtype=np.int64),
                               np.asarray(t["feature"], dtype=np.int64),
                               np.asarray(t["threshold"], dtype=np.float64),
                               np.asarray(t["value"], dtype=np.float64).reshape(len(t["left"]), -1)))
        self.meta = {k: v for k, v in data.items() if k != "trees"}

    @classmethod
    def load(cls, path: str | Path = MODEL_PATH) -> PatternModel:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise NumaprofError(f"pattern model {path}: {e}; retrain with "
                                "python -m numaprof.cli.train fit") from e
        return cls(data)

    def predict_proba(self, X) -> np.ndarray:
        # scikit-learn's trees compare float32 inputs with float64 thresholds
        X = np.asarray(X, dtype=np.float64).astype(np.float32).astype(np.float64)
        X = np.atleast_2d(X)
        rows = np.arange(len(X))
        proba = np.zeros((len(X), len(self.classes)), dtype=np.float64)
        for left, right, feature, threshold, value in self.trees:
            node = np.zeros(len(X), dtype=np.int64)
            while True:
                inner = left[node] >= 0
                if not inner.any():
                    break
                f = np.where(inner, feature[node], 0)
                go_left = X[rows, f] <= threshold[node]
                node = np.where(inner, np.where(go_left, left[node], right[node]), node)
            p = value[node]
            norm = p.sum(axis=1)
            norm[norm == 0.0] = 1.0
            proba += p / norm[:, None]
        proba /= len(self.trees)
        return proba

    def predict(self, X) -> np.ndarray:
        return self.classes.take(np.argmax(self.predict_proba(X), axis=1))


_MODEL: PatternModel | None = None


def model() -> PatternModel:
    """The shipped model, loaded once."""
    global _MODEL
    if _MODEL is None:
        _MODEL = PatternModel.load()
    return _MODEL


def classify(features: dict) -> tuple[str, float]:
    """(pattern, confidence): the model's most probable class and its probability, or
    ("unknown", 0.0) from :func:`fallback`."""
    fb = fallback(features)
    if fb is not None:
        return fb
    m = model()
    p = m.predict_proba([feature_vector(features)])[0]
    k = int(np.argmax(p))
    return str(m.classes[k]), round(float(p[k]), 3)


def export_forest(forest, **meta) -> dict:
    """A fitted sklearn RandomForestClassifier as plain data for :class:`PatternModel`."""
    trees = []
    for est in forest.estimators_:
        t = est.tree_
        trees.append({
            "left": t.children_left.tolist(),
            "right": t.children_right.tolist(),
            "feature": t.feature.tolist(),
            "threshold": t.threshold.tolist(),
            "value": t.value[:, 0, :].ravel().tolist(),
        })
    return {"format": FORMAT, "version": VERSION, "classes": [str(c) for c in forest.classes_],
            "features": list(FEATURES), **meta, "trees": trees}
