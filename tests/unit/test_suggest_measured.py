"""`suggest` on the recorded machine uses the NUMA factor `numaprof topology --measure`
cached for it (docs/measure.md: used by the recommender when present), and only for
a profile recorded on this host."""

import json
import socket

import numpy as np
import profgen
import pytest
from helpers import run_numaprof
from profgen import Array

from numaprof.analyzer import measure as M
from numaprof.analyzer.profile import open_profile

MiB = 1 << 20


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "p"
    profgen.synth_run(path, [Array("x", 8 * MiB, ["serial_init", "regular", "regular"],
                                   samples=3000)], seed=5)
    return path


def _set_host(path, host):
    mf = path / "manifest.json"
    doc = json.loads(mf.read_text())
    doc["host"] = host
    mf.write_text(json.dumps(doc))


def _suggest(path, cache):
    proc = run_numaprof("suggest", path, "--format", "json",
                        env={"XDG_CACHE_HOME": str(cache)}, check=True)
    return json.loads(proc.stdout)


def test_cached_measurement_sets_the_numa_factor(profile, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    topo = open_profile(profile).topology()
    assert topo.n_nodes == 2
    lat = np.array([[100.0, 340.0], [320.0, 100.0]])
    M.save_cached(topo, M.Measurement(nodes=(0, 1), latency_ns=lat,
                                      bandwidth_gbs=np.array([[20.0, 8.0], [8.0, 20.0]]),
                                      placed_fraction=np.ones((2, 2)), created="2026-11-22T08:00:00Z"))

    _set_host(profile, socket.gethostname())
    doc = _suggest(profile, cache)
    assert doc["target"]["numa_factor"] == [[1.0, 3.4], [3.2, 1.0]], doc["target"]
    assert any("measured by `numaprof topology --measure`" in n for n in doc["notes"]), doc["notes"]

    # recorded on another machine: this host's measurement says nothing about it
    _set_host(profile, "another-host")
    doc = _suggest(profile, cache)
    assert doc["target"]["numa_factor"] == [[1.0, 2.1], [2.1, 1.0]], doc["target"]
    assert not any("--measure" in n for n in doc["notes"]), doc["notes"]


def test_no_cache_keeps_the_slit_factor(profile, tmp_path):
    _set_host(profile, socket.gethostname())
    doc = _suggest(profile, tmp_path / "empty-cache")
    assert doc["target"]["numa_factor"] == [[1.0, 2.1], [2.1, 1.0]], doc["target"]
    assert not any("--measure" in n for n in doc["notes"]), doc["notes"]
