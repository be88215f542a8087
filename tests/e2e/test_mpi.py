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


def test_record_around_mpirun_tells_the_processes_apart(examples_built, tmp_path):
    # `numaprof record -- mpirun ...`: one profile of both ranks; each rank's arrays are its
    # own objects, told apart by pid, and a finding points to the per-rank recording
    argv = ["mpirun", "--oversubscribe", "-np", "2"]
    if os.geteuid() == 0:
        argv.insert(1, "--allow-run-as-root")
    run_numaprof("record", "-o", tmp_path / "p", "--", *argv, "-x", "OMP_NUM_THREADS",
                 str(examples_built / "gather"), "16", "4", env={"OMP_NUM_THREADS": "1"}, check=True)
    doc = json.loads(run_numaprof("report", tmp_path / "p", "--format", "json", check=True).stdout)
    lookups = [o for o in doc["objects"] if o["name"] == "lookup"]
    assert len(lookups) == 2 and len({o["pid"] for o in lookups}) == 2, lookups
    assert any("2 processes of gather in one profile" in f and "-o prof.%r" in f for f in doc["findings"]), \
        doc["findings"]
    text = run_numaprof("report", tmp_path / "p", check=True).stdout
    assert all(f"lookup [pid {o['pid']}]" in text for o in lookups), text
