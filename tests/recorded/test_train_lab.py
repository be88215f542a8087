"""The classifier's lab rows (tests/data/training/features.csv, `where` lab2 / lab4 /
lab4t3: examples/patterns.c recorded in `numaprof lab` guests by `train lab-record`) and
the plan and row filter of that command.  No guest is booted here."""

from __future__ import annotations

import pytest
from helpers import ROOT

from numaprof.analyzer import classifier
from numaprof.cli import train

TABLE = ROOT / "tests" / "data" / "training" / "features.csv"
MIN_LAB_HELDOUT_ACCURACY = 0.9  # the lab's held-out rows (4 nodes), with the shipped model


@pytest.fixture(scope="module")
def rows():
    return train.load_table(TABLE)


def lab_rows(rows):
    return [r for r in rows if r.get("where", "host") not in ("", "host")]


def test_lab_rows_split_by_topology(rows):
    lab = lab_rows(rows)
    wheres = {r["where"] for r in lab}
    assert {"lab2", "lab4"} <= wheres, wheres
    split = {w: s for w, _opts, _threads, s in train.LAB_TOPOLOGIES}
    threads = {w: t for w, _opts, t, _s in train.LAB_TOPOLOGIES}
    for r in lab:
        assert r["split"] == split[r["where"]], r["run"]
        assert int(r["threads_requested"]) == threads[r["where"]], r["run"]
        assert r["run"].startswith(r["where"] + "-"), r["run"]
    # host rows are all still there and marked as such
    assert sum(1 for r in rows if r.get("where") == "host") >= 500


def test_lab_rows_have_samples(rows):
    """Only arrays the guest sampled enough are kept (TCG: a loop's samples go to its
    first access)."""
    for r in lab_rows(rows):
        assert train.enough_samples(r), r["run"]


def test_shipped_model_on_lab_heldout(rows):
    clf = classifier.model()
    held = [r for r in lab_rows(rows) if r["split"] == "heldout"]
    ev = train.evaluate(held, lambda rs: list(clf.predict(train.matrix(rs))))
    assert ev["n"] >= 20, ev
    assert ev["accuracy"] >= MIN_LAB_HELDOUT_ACCURACY, ev["wrong"]


def test_enough_samples_rule():
    assert train.enough_samples({"analyzer_pattern": "regular", "samples": 3.0})
    assert train.enough_samples({"analyzer_pattern": "unknown", "samples": 30.0})
    assert not train.enough_samples({"analyzer_pattern": "unknown", "samples": 29.0})


def test_lab_plan_labels_and_size():
    runs = train.lab_plan("/bin/patterns", 4, "heldout")
    assert len(runs) == len(train.LAB_KINDS) * len(train.SCHEDULES) * len(train.OPS)
    for run in runs:
        kind, sched, op, mib, iters = run.args
        assert int(mib) == train.LAB_MIB
        assert run.labels == train.patterns_labels(kind, sched, op)
        assert run.threads == 4 and run.split == "heldout"
    quick = train.lab_plan("/bin/patterns", 2, "train", quick=True, kinds=("hashed",))
    assert {r.args[0] for r in quick} == {"hashed"}
    assert all(int(q.args[4]) < train.lab_iterations("hashed") for q in quick)
