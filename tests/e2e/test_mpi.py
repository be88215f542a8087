"""MPI: each rank records its own profile with -o prof.%r; report merges them."""

import json
import os
import shutil
import subprocess

import pytest
from helpers import ROOT, numaprof_argv, run_numaprof

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("mpirun") is None, reason="openmpi-bin missing")]


def test_mpirun_two_ranks_merge(examples_built, tmp_path):
    argv = ["mpirun", "--oversubscribe", "-np", "2"]
    if os.geteuid() == 0:
        argv.insert(1, "--allow-run-as-root")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([*argv, "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS", *numaprof_argv(),
                           "record", "-o", "prof.%r", "--", str(examples_built / "gather"),
                           "16", "4"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "prof.0" / "manifest.json").exists()
    assert (tmp_path / "prof.1" / "manifest.json").exists()
    ranks = [json.loads(run_numaprof("report", tmp_path / f"prof.{r}", "--format", "json",
                                     check=True).stdout) for r in (0, 1)]
    doc = json.loads(run_numaprof("report", tmp_path / "prof.0", tmp_path / "prof.1",
                                  "--format", "json", check=True).stdout)
    assert len(doc["ranks"]) == 2
    assert doc["profile"]["samples"] == sum(r["profile"]["samples"] for r in ranks)
    lookup = [o for o in doc["objects"] if o["name"] == "lookup"]
    assert lookup, [o["name"] for o in doc["objects"]]
    per_rank = sum(o["samples"] for r in ranks for o in r["objects"] if o["name"] == "lookup")
    assert lookup[0]["samples"] == per_rank
    text = run_numaprof("report", tmp_path / "prof.0", tmp_path / "prof.1", check=True).stdout
    assert "ranks" in text and "combined" in text
