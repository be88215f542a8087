"""Node-level counters in the report (issue 4 "Contention"): memory-controller bandwidth per
node against the measured peak where the hardware counters exist, and the kernel's numastat
deltas everywhere."""

import json
import socket
import subprocess

import numpy as np
import profgen
import pytest
from helpers import run_numaprof
from profgen import Array

from numaprof.analyzer import measure as M
from numaprof.analyzer.profile import open_profile

MiB = 1 << 20
T0, T1 = 5_000_000_000, 7_000_000_000  # 2 s of run


def _counters(path, rows):
    cols = {k: [r[i] for r in rows] for i, k in enumerate(("time", "phase", "node", "name", "value"))}
    profgen.ProfileWriter(path).table("counters", **cols)


@pytest.fixture
def profile(tmp_path, monkeypatch):
    path = tmp_path / "p"
    profgen.synth_run(path, [Array("x", 8 * MiB, ["parallel_init", "regular", "regular"],
                                   samples=3000)], seed=7)
    mf = path / "manifest.json"
    doc = json.loads(mf.read_text())
    doc["host"] = socket.gethostname()
    mf.write_text(json.dumps(doc))
    rows = []
    # node 0: 30 GB read + 10 GB written in 2 s = 20 GB/s, from two IMC names; node 1: 4 GB/s
    for node, rd, wr in ((0, 30e9, 10e9), (1, 6e9, 2e9)):
        for name, v in (("imc.read_bytes", rd), ("imc.write_bytes", wr)):
            rows += [(T0, 0, node, name, 1000), (T1, 1, node, name, 1000 + int(v))]
        rows += [(T0, 0, node, "numastat.numa_hit", 500), (T1, 1, node, "numastat.numa_hit", 2500),
                 (T0, 0, node, "numastat.numa_miss", 7), (T1, 1, node, "numastat.numa_miss",
                                                           7 + (120 if node == 1 else 0))]
    rows += [(T0, 0, -1, "vmstat.numa_hit", 1000), (T1, 1, -1, "vmstat.numa_hit", 5000)]
    _counters(path, rows)
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    M.save_cached(open_profile(path).topology(), M.Measurement(
        nodes=(0, 1), latency_ns=np.array([[100.0, 200.0], [200.0, 100.0]]),
        bandwidth_gbs=np.array([[22.0, 9.0], [9.0, 20.0]]), placed_fraction=np.ones((2, 2))))
    return path, cache


def _report(path, cache):
    proc = run_numaprof("report", path, "--format", "json", env={"XDG_CACHE_HOME": str(cache)},
                        check=True)
    return json.loads(proc.stdout)


def test_bandwidth_per_node_against_the_measured_peak(profile):
    path, cache = profile
    doc = _report(path, cache)
    nc = {c["node"]: c for c in doc["node_counters"]}
    assert sorted(nc) == [0, 1]  # the machine-wide vmstat row is no node's
    assert nc[0]["dram_bytes"] == 40_000_000_000 and nc[0]["seconds"] == 2.0
    assert nc[0]["bandwidth_gbs"] == pytest.approx(20.0)
    assert nc[1]["bandwidth_gbs"] == pytest.approx(4.0)
    assert nc[0]["peak_gbs"] == 22.0 and nc[1]["peak_gbs"] == 20.0
    assert nc[0]["numastat"]["numa_hit"] == 2000 and nc[1]["numastat"]["numa_miss"] == 120
    saturated = [f for f in doc["findings"] if "saturated" in f]
    assert len(saturated) == 1 and saturated[0].startswith("node 0:"), doc["findings"]
    assert "91%" in saturated[0]
    assert any("numa_miss" in f and "node 1: 120" in f for f in doc["findings"]), doc["findings"]


def test_no_peak_without_a_measurement_of_this_machine(profile, tmp_path):
    path, _ = profile
    doc = _report(path, tmp_path / "no-cache")
    nc = {c["node"]: c for c in doc["node_counters"]}
    assert nc[0]["bandwidth_gbs"] == pytest.approx(20.0) and nc[0]["peak_gbs"] is None
    assert not any("saturated" in f for f in doc["findings"]), doc["findings"]


def test_text_report_shows_the_node_counters(profile):
    path, cache = profile
    out = run_numaprof("report", path, env={"XDG_CACHE_HOME": str(cache), "COLUMNS": "200"},
                       check=True).stdout
    table = out[out.index("node counters"):]
    row0 = next(ln for ln in table.splitlines() if ln.strip("│┃ ").startswith("0 "))
    assert "20.00" in row0 and "91%" in row0, table


def test_recorded_run_has_numastat_deltas(examples_built, tmp_path):
    """A real recording here: the kernel counted the program's page allocations on node 0
    (numastat is machine-wide, so at least the program's own pages)."""
    prof = tmp_path / "r"
    run_numaprof("record", "-o", prof, "--", examples_built / "serial_init",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    nodes = subprocess.run(["numactl", "-H"], capture_output=True, text=True).stdout
    assert [c["node"] for c in doc["node_counters"]] == [n["id"] for n in doc["topology"]["nodes"]], nodes
    pages = sum(o["size"] for o in doc["objects"] if o["kind"] == "heap") // 4096
    assert sum(c["numastat"]["numa_hit"] for c in doc["node_counters"]) >= pages
    assert all(c["dram_bytes"] is None for c in doc["node_counters"])  # no uncore PMU in a VM


def test_html_report_has_the_node_counters(profile, tmp_path):
    path, cache = profile
    out = tmp_path / "r.html"
    run_numaprof("report", path, "--format", "html", "-o", out,
                 env={"XDG_CACHE_HOME": str(cache)}, check=True)
    text = out.read_text()
    table = text[text.index("<h2>Node counters</h2>"):].split("</table>")[0]
    assert "20.00" in table and "91%" in table, table
