"""numaprof-measure on the NUMA lab: a 2-node guest gives a full 2x2 measurement.

The guest runs under TCG, so its timings say nothing about NUMA: only that every pair is
measured, that mbind placed every sampled page on the memory node (local and remote), and
that the Python side derives and caches the factor matrix from a real run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import ROOT

pytestmark = pytest.mark.lab

GUEST_SCRIPT = textwrap.dedent("""
    import json
    from pathlib import Path

    import numpy as np

    from numaprof.analyzer import measure as M
    from numaprof.analyzer.model import Node, Topology

    nodes = []
    for d in sorted(Path("/sys/devices/system/node").glob("node[0-9]*"),
                    key=lambda p: int(p.name[4:])):
        cpus = []
        for part in (d / "cpulist").read_text().strip().split(","):
            if part:
                lo, _, hi = part.partition("-")
                cpus += range(int(lo), int(hi or lo) + 1)
        nodes.append(Node(int(d.name[4:]), tuple(cpus), 0))
    n = len(nodes)
    topo = Topology(nodes=tuple(nodes), distances=np.full((n, n), 10.0))
    m = M.measure(topo, size_mib=8, reps=1, executable="./numaprof-measure")
    cached = M.load_cached(topo)
    t = M.apply_measured(topo, cached)
    out = {"measurement": m.to_json(), "cached_nodes": list(cached.nodes),
           "factor": t.numa_factor().tolist(),
           "expected": (m.latency_ns / np.diag(m.latency_ns)[:, None]).tolist()}
    Path("result.json").write_text(json.dumps(out))
""")


def test_two_node_guest_fills_the_matrix(tmp_path, labkit):
    labkit.require_lab()
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(ROOT / "collector" / "measure"), "-B", str(build)],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    shutil.copy(build / "numaprof-measure", tmp_path / "numaprof-measure")
    (tmp_path / "guest.py").write_text(GUEST_SCRIPT)
    proc = labkit.run_lab(tmp_path, ["--nodes", "2", "--timeout", "500"],
                          [sys.executable, "guest.py"], timeout=540,
                          env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads((tmp_path / "result.json").read_text())
    m = out["measurement"]
    assert m["nodes"] == [0, 1]
    for name in ("latency_ns", "bandwidth_gbs"):
        a = np.array(m[name], dtype=float)
        assert a.shape == (2, 2) and np.isfinite(a).all() and (a > 0).all(), name
    # Remote pairs too: mbind put every sampled page on node j.
    assert m["placed_fraction"] == [[1.0, 1.0], [1.0, 1.0]]
    assert out["cached_nodes"] == [0, 1]
    assert np.allclose(out["factor"], out["expected"])
    assert np.allclose(np.diag(out["factor"]), 1.0)
    assert list((tmp_path / "cache" / "numaprof").glob("measure-*.json"))
