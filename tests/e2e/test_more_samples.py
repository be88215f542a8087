"""End-to-end: a short run leaves a small array without a pattern; the report says how
many more samples it needs and how to get them, and following the advice gives it one."""

import json
import math
import re
import subprocess

import pytest
from helpers import EXAMPLES, run_numaprof

pytestmark = pytest.mark.e2e


def _objects(prof):
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    return {o["name"]: o for o in doc["objects"]}, doc


def test_advice_for_more_samples_is_followed(tmp_path):
    exe = tmp_path / "gather"
    subprocess.run(["gcc", "-O2", "-g", "-fopenmp", "-o", str(exe), str(EXAMPLES / "gather.c")],
                   check=True)
    env = {"OMP_NUM_THREADS": "2"}
    short = tmp_path / "short.data"
    run_numaprof("record", "-o", short, "--freq", "1009", "--", exe, "12", "30", env=env,
                 check=True)
    objs, doc = _objects(short)
    hist = objs.get("hist")
    if hist is None or hist["samples_needed"] == 0:
        pytest.skip(f"hist got enough samples in a short run here: {hist}")
    assert hist["pattern"] == "unknown"
    finding = next(f for f in doc["findings"] if "need more samples" in f)
    assert f"hist: {hist['samples_needed']} more" in finding
    longer = float(re.search(r"a run ([\d.]+)x longer", finding).group(1))
    assert longer >= (hist["samples"] + hist["samples_needed"]) / hist["samples"] - 0.05
    text = run_numaprof("report", short, check=True).stdout
    assert f"needs +{hist['samples_needed']} samples" in text
    sugg = run_numaprof("suggest", short, "--target", "2s", check=True).stdout
    assert "not placed until recorded with more samples" in sugg

    # the advice: a run that many times longer (with a margin for sampling noise)
    runs = str(math.ceil(30 * longer * 1.5))
    again = tmp_path / "long.data"
    run_numaprof("record", "-o", again, "--freq", "1009", "--", exe, "12", runs, env=env,
                 check=True)
    objs, _ = _objects(again)
    assert objs["hist"]["samples_needed"] == 0, objs["hist"]
