"""A profile recorded by numaprof-collect on this project's VM (tests/data/profile-gather):
`OMP_NUM_THREADS=2 numaprof record ./gather 16 30` (examples/gather.c).

Only what does not depend on the binary still being the recorded one is checked: the
profile is real C-written data, names come from examples/gather when it matches.
"""

import shutil

import numpy as np
import pytest
from helpers import DATA

from numaprof.analyzer import analyze
from numaprof.analyzer.profile import open_profile
from numaprof.errors import ProfileError

GATHER = DATA / "profile-gather"


def test_recorded_gather():
    a = analyze(GATHER)
    p = a.profile
    assert p.backend == "soft" and p.complete and p.samples == 613
    assert p.with_address == 393 and p.outside_objects == 0
    assert sum(p.rules.values()) == p.samples
    lookup = a.objects[0]
    assert lookup.kind == "heap" and lookup.size == 16 << 20
    assert lookup.pattern == "random" and lookup.pattern_confidence > 0.5
    assert lookup.reads > 0.9
    # parallel first touch over a static schedule: both threads placed half the pages
    assert lookup.first_touch.threads == 2 and lookup.first_touch.master_fraction < 0.6
    assert lookup.first_touch.pages == 4096
    assert len(a.threads) == 2 and all(t.samples > 100 for t in a.threads)
    assert a.topology.n_nodes == 1 and a.local_fraction == 1.0
    assert np.asarray(a.traffic).sum() == p.with_address


def test_recorded_cut_short(tmp_path):
    d = tmp_path / "cut"
    shutil.copytree(GATHER, d)
    col = d / "samples.addr.col"
    col.write_bytes(col.read_bytes()[: 16 + 8 * 300 + 5])
    a = analyze(d)
    assert a.profile.samples == 300


def test_recorded_foreign_version(tmp_path):
    d = tmp_path / "v2"
    shutil.copytree(GATHER, d)
    m = (d / "manifest.json").read_text().replace('"version": 1', '"version": 2', 1)
    (d / "manifest.json").write_text(m)
    with pytest.raises(ProfileError, match="version 2, this numaprof reads version 1"):
        open_profile(d)


LAB = DATA  # the lab recordings stored beside it


def test_lab_two_nodes_serial_initialisation():
    """serial_init 8 20 recorded inside `numaprof lab --nodes 2` (one cpu per node): one
    thread first-touched everything on node 0, the other thread reads it remotely."""
    a = analyze(LAB / "lab2-serial_init")
    assert a.topology.n_nodes == 2
    hot = a.objects[0]
    assert hot.kind == "heap" and hot.size == 8 << 20 and hot.pattern == "regular"
    ft = hot.first_touch
    assert ft.serial and ft.master_fraction == 1.0 and ft.nodes == [0]
    # move_pages answered -EFAULT for most pages (queried after the free): the first touch
    # gives their node
    assert hot.pages_source == "first_touch" and hot.pages_by_node[1] == 0
    assert hot.traffic[:, 1].sum() == 0 and hot.traffic[1, 0] > 0.3 * hot.traffic.sum()
    assert hot.imbalance == 2.0 and hot.local_fraction < 0.7
    assert {t.node for t in a.threads} == {0, 1}


def test_lab_two_nodes_parallel_initialisation():
    """numa_aware 8 20 in the same guest: each thread's block lives on its node."""
    a = analyze(LAB / "lab2-numa_aware")
    hot = a.objects[0]
    assert hot.first_touch.threads == 2 and not hot.first_touch.serial
    assert sorted(hot.first_touch.nodes) == [0, 1]
    assert hot.pages_source == "move_pages" and min(hot.pages_by_node) > 0.3 * sum(hot.pages_by_node)
    assert hot.local_fraction > 0.95 and hot.imbalance < 1.3
    assert a.local_fraction > 0.95
