"""Gathers (`vgatherdpd`): each lane's address comes from a vector register that a
software sample does not hold, so the sample carries the base register's address, which
names the array the lanes index (rule vsib_base; docs/profile-format.md).  examples/gather
built with -Ofast -march=haswell gathers `lookup[idx[i]]` eight lanes at a time."""

import json
from pathlib import Path

import pytest
from helpers import EXAMPLES, compile_openmp, run_numaprof

pytestmark = pytest.mark.e2e


def _has_avx2() -> bool:
    text = Path("/proc/cpuinfo").read_text()
    return any(line.startswith("flags") and " avx2" in line for line in text.splitlines())


@pytest.mark.skipif(not _has_avx2(), reason="this cpu has no AVX2 gathers")
def test_gathered_array_is_found_by_its_base_register(tmp_path):
    exe = compile_openmp(EXAMPLES / "gather.c", tmp_path / "gather", "-Ofast", "-march=haswell")
    prof = tmp_path / "g.data"
    run_numaprof("record", "-o", prof, "--freq", "4000", "--", exe, "32", "20",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    rep = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    p = rep["profile"]
    rules = p["rules"]
    assert "vsib" not in rules and rules.get("vsib_base", 0) == p["gather_samples"] > 0, rules
    by = {o["name"]: o for o in rep["objects"]}
    lookup = by["lookup"]
    # the gathers read lookup: most of its samples, most of the program's
    assert lookup["gather_samples"] >= 0.9 * p["gather_samples"], (lookup, p)
    assert lookup["share"] >= 0.5 and lookup["reads"] >= 0.9, lookup
    # its few other samples (the initialisation) say nothing of how the loop reads it
    assert lookup["pattern"] == "unknown" and lookup["samples_needed"] == 0, lookup
    assert any("accessed mostly by gathers" in f for f in rep["findings"]), rep["findings"]
    # the addresses the gathers lack are not counted as addressed samples
    assert p["with_address"] + p["gather_samples"] + rules.get("spin", 0) <= p["samples"]
    assert by["idx"]["gather_samples"] == 0
