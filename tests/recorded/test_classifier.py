"""The trained pattern classifier on the stored feature table (tests/data/training):
the exported JSON reproduces scikit-learn exactly, the shipped model is the one the table
and the seed give, and its held-out accuracy is at least 0.95."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import ROOT

from numaprof.analyzer import classifier
from numaprof.cli import train
from numaprof.errors import NumaprofError

TABLE = ROOT / "tests" / "data" / "training" / "features.csv"
# a second, independent recording of the whole plan (the same command, another hour)
RERUN = ROOT / "tests" / "data" / "training" / "features_rerun.csv"
# the few-sample tier (train record --tier few: 30-260 samples per array), all held out
FEW = ROOT / "tests" / "data" / "training" / "features_few.csv"
MIN_HELDOUT_ACCURACY = 0.95
MIN_RERUN_ACCURACY = 0.95  # the same bar on the held-out rows of the independent recording
# "unknown" must not dodge: at most this share of the rows with a class label (one-thread
# rows are labelled unknown by construction and not counted) may fall to the fallback
MAX_UNKNOWN_SHARE = 0.1


@pytest.fixture(scope="module")
def rows():
    return train.load_table(TABLE)


@pytest.fixture(scope="module")
def fitted(rows):
    model, n_train = train.fit(rows)
    return model, classifier.export_forest(model, n_train=n_train, seed=train.SEED)


def modelled(rows):
    return [r for r in rows if classifier.fallback(r) is None]


def test_table_has_both_splits_and_all_classes(rows):
    splits = {r["split"] for r in rows}
    assert splits == {"train", "heldout"}
    for split in splits:
        labels = {r["label"] for r in modelled(rows) if r["split"] == split}
        assert set(classifier.CLASSES) <= labels, (split, labels)
    # held-out programs other than the training kernels are present
    assert {"spmv", "gather", "fortran_arrays"} <= {r["program"] for r in rows if r["split"] == "heldout"}


def test_export_reproduces_sklearn_exactly(rows, fitted):
    model, exported = fitted
    # through text, as shipped: JSON floats round-trip exactly
    clf = classifier.PatternModel(json.loads(json.dumps(exported)))
    X = train.matrix(modelled(rows))
    assert np.array_equal(clf.predict(X), model.predict(X))
    assert np.array_equal(clf.predict_proba(X), model.predict_proba(X))


def test_exact_float32_thresholds(fitted):
    # inputs right at a split threshold go the way scikit-learn sends them
    model, exported = fitted
    clf = classifier.PatternModel(exported)
    t = exported["trees"][0]
    X = np.zeros((len(t["threshold"]), len(classifier.FEATURES)))
    for i, (f, th) in enumerate(zip(t["feature"], t["threshold"], strict=True)):
        if f >= 0:
            X[i, f] = th
    X = np.vstack([X, np.nextafter(X, 1.0), np.nextafter(X, -1.0)])
    assert np.array_equal(clf.predict_proba(X), model.predict_proba(X))


def test_shipped_model_is_the_table_s(rows, fitted):
    model, _ = fitted
    shipped = classifier.PatternModel.load()
    X = train.matrix(modelled(rows))
    assert np.array_equal(shipped.predict_proba(X), model.predict_proba(X)), \
        "the shipped model differs from the one the stored table gives: retrain"


def test_heldout_accuracy(rows):
    shipped = classifier.PatternModel.load()
    ev = train.evaluate([r for r in rows if r["split"] == "heldout"],
                        lambda rs: list(shipped.predict(train.matrix(rs))))
    assert ev["n"] >= 100
    assert ev["accuracy"] >= MIN_HELDOUT_ACCURACY, (ev["accuracy"], ev["confusion"], ev["wrong"])


def test_shipped_model_on_an_independent_recording():
    shipped = classifier.PatternModel.load()
    rerun = train.load_table(RERUN)
    heldout = [r for r in rerun if r["split"] == "heldout"]
    ev = train.evaluate(heldout, lambda rs: list(shipped.predict(train.matrix(rs))))
    assert ev["n"] >= 200
    assert ev["accuracy"] >= MIN_RERUN_ACCURACY, (ev["accuracy"], ev["confusion"], ev["wrong"])


def test_shipped_model_on_few_samples():
    # 0.856 when recorded; regular and random arrays hold up, dynamic-schedule arrays with
    # under 100 samples are half of them called random (docs/classifier.md, "Few samples")
    shipped = classifier.PatternModel.load()
    ev = train.evaluate(train.load_table(FEW), lambda rs: list(shipped.predict(train.matrix(rs))))
    assert ev["n"] >= 100
    assert ev["accuracy"] >= 0.8, (ev["accuracy"], ev["confusion"])
    cm, labels = ev["confusion"], ev["labels"]
    for lab in ("random", "regular"):
        i = labels.index(lab)
        assert cm[i, i] >= 0.9 * cm[i].sum(), (lab, cm)


@pytest.mark.parametrize("table", [TABLE, RERUN], ids=["table", "rerun"])
def test_few_unknowns(table):
    rs = [r for r in train.load_table(table) if r["label"] in classifier.CLASSES]
    unknown = [r for r in rs if classifier.fallback(r) is not None]
    assert len(unknown) <= MAX_UNKNOWN_SHARE * len(rs), \
        (len(unknown), len(rs), [(r["run"], r["object"], r["samples"]) for r in unknown])


def test_accuracy_check_can_fail(rows):
    # the same evaluation with the classes shuffled falls well below the bar
    data = json.loads(classifier.MODEL_PATH.read_text())
    data["classes"] = data["classes"][1:] + data["classes"][:1]
    wrong = classifier.PatternModel(data)
    ev = train.evaluate([r for r in rows if r["split"] == "heldout"],
                        lambda rs: list(wrong.predict(train.matrix(rs))))
    assert ev["accuracy"] < MIN_HELDOUT_ACCURACY


def test_one_thread_is_unknown(rows):
    one = [r for r in rows if r["threads_requested"] == 1]
    assert one
    for r in one:
        assert classifier.classify(r) == ("unknown", 0.0), r["run"]


def test_classify_confidence_is_the_class_probability(rows):
    r = next(r for r in modelled(rows) if r["split"] == "heldout")
    pattern, conf = classifier.classify(r)
    p = classifier.model().predict_proba([classifier.feature_vector(r)])[0]
    assert pattern in classifier.CLASSES
    assert conf == round(float(p.max()), 3)
    assert conf >= 1.0 / len(classifier.CLASSES)


def test_fallback_few_samples():
    f = {"samples": 20.0, "parallel_windows": 2.0, "parallel_samples": 20.0}
    assert classifier.classify(f) == ("unknown", 0.0)
    f = {"samples": 500.0, "parallel_windows": 0.0, "parallel_samples": 0.0, "serial_samples": 500.0}
    assert classifier.classify(f) == ("unknown", 0.0)


def test_derived_features():
    names = classifier.FEATURES
    # random access: spread, coinciding (also inside the loop), independent steps
    rnd = dict(zip(names, classifier.feature_vector({
        "span_median": 0.9, "entropy_median": 0.95, "overlap_median": 0.9, "contexts": 1.0,
        "context_overlap": 0.95, "step_median": 0.29, "step_pairs": 500.0, "cross_step_median": 0.3,
        "cross_pairs": 500.0, "instability": 0.5}), strict=True))
    assert rnd["random_evidence"] == pytest.approx(0.9)
    assert rnd["shared_range"] == pytest.approx(0.9)
    # two loops alternating faster than a window: coinciding per window, disjoint per loop
    alt = dict(zip(names, classifier.feature_vector({
        "span_median": 0.9, "entropy_median": 0.95, "overlap_median": 0.9, "contexts": 2.0,
        "context_overlap": 0.0, "context_instability": 1.0, "step_median": 0.29, "step_pairs": 500.0,
        "cross_step_median": 0.3, "cross_pairs": 500.0, "instability": 0.2}), strict=True))
    assert alt["random_evidence"] == 0.0 and alt["shared_range"] == 0.0
    assert alt["mapping_change"] == 1.0
    assert alt["no_owner"] == 1.0  # the mapping changes between the loops
    assert rnd["no_owner"] == pytest.approx(max(rnd["shared_range"], rnd["mapping_change"]))
    # a dynamic schedule: threads move through the array together, short steps
    dyn = dict(zip(names, classifier.feature_vector({
        "span_median": 0.9, "entropy_median": 0.95, "overlap_median": 0.9, "step_median": 0.03,
        "step_pairs": 500.0, "cross_step_median": 0.02, "cross_pairs": 500.0}), strict=True))
    assert dyn["random_evidence"] == pytest.approx(0.02 / classifier.STEP_RANDOM)
    # missing or NaN inputs are 0
    assert classifier.feature_vector({"span_median": float("nan")}) == [0.0] * len(names)


def test_foreign_model_refused(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"format": "something-else", "version": 1}))
    with pytest.raises(NumaprofError, match="something-else"):
        classifier.PatternModel.load(p)
    p.write_text("not json")
    with pytest.raises(NumaprofError, match="retrain"):
        classifier.PatternModel.load(p)
    data = json.loads(classifier.MODEL_PATH.read_text())
    data["features"] = data["features"][::-1]
    with pytest.raises(NumaprofError, match="features"):
        classifier.PatternModel(data)


def test_repeated_samples_are_set_aside():
    # two threads accessing random positions; then every sample is repeated once (a
    # descheduled virtual cpu: the same instruction and address again): the repeats are
    # counted and set aside, and the random walk's steps are those of the original samples
    from numaprof.analyzer import features

    rng = np.random.default_rng(7)
    n = 2000
    time = np.arange(n, dtype=np.int64) * 250_000
    thread = np.tile([0, 1], n // 2)
    pos = rng.random(n)
    page = (pos * 4096).astype(np.int64)
    ip = np.full(n, 0x401000, dtype=np.uint64)
    base, _ = features.object_features(time, thread, pos, page, ip)
    d = np.repeat(np.arange(n), 2)
    twice, _ = features.object_features(time[d] + np.tile([0, 125_000], n), thread[d], pos[d], page[d], ip[d])
    assert base["repeat_samples"] == 0 and twice["repeat_samples"] == n
    assert twice["samples"] == 2 * n
    for k in ("step_median", "span_median", "overlap_median", "parallel_samples"):
        assert twice[k] == pytest.approx(base[k]), k
    # without the rule the median step would be 0: half the steps are repeats
    assert twice["step_median"] > 0.2
