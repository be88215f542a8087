"""End-to-end: a read-only lookup table read by every thread (tests/progs/replicate_table.c)
is given a copy per node for a 2-node target: suggest makes `replicate` its choice with a
patch that compiles with the program's flags, --apply writes it, and the rebuilt program
computes what the original did.  (Whether each node's threads then read their own copy
needs several nodes: tests/lab/test_lab_sharing.py.)"""

import json
import shutil
import subprocess

import pytest
from helpers import PROGS, run_numaprof

pytestmark = pytest.mark.e2e

ARGS = ["8388608", "20000000"]


def test_read_only_table_is_replicated(tmp_path):
    shutil.copy(PROGS / "replicate_table.c", tmp_path / "replicate_table.c")
    build = ["gcc", "-O2", "-g", "-fopenmp", "-o"]
    subprocess.run([*build, "before", "replicate_table.c"], cwd=tmp_path, check=True)
    run_numaprof("record", "-o", "r.data", "--freq", "4000", "--", "./before", *ARGS,
                 cwd=tmp_path, check=True)
    doc = json.loads(run_numaprof("suggest", "r.data", "--target", "2s", "--format", "json",
                                  cwd=tmp_path, check=True).stdout)
    table = next(o for o in doc["objects"] if o["name"] == "table")
    if table["policy"] != "replicate" and table["replicate"] is None:
        report = json.loads(run_numaprof("report", "r.data", "--format", "json", cwd=tmp_path,
                                         check=True).stdout)
        o = next(o for o in report["objects"] if o["name"] == "table")
        # a copy needs evidence of the initialisation: a sampled write before the reads
        assert o["writes"] == 0, (table, o)
        pytest.skip(f"no write to table sampled ({o['samples']} samples)")
    assert table["policy"] == "replicate", table
    assert table["fix"]["kind"] == "replicate" and table["fix"]["compile"] == "clean", table
    assert table["predicted"]["local_fraction"] == 1.0
    assert "+    numaprof_replicate(table, malloc_usable_size(table));" in table["patch"]
    assert "table_local[x % (unsigned long)n]" in table["patch"]
    run_numaprof("suggest", "r.data", "--target", "2s", "--apply", cwd=tmp_path, check=True)
    cflags = run_numaprof("config", "--cflags", check=True).stdout.split()
    subprocess.run([*build, "after", *cflags, "replicate_table.c"], cwd=tmp_path, check=True)
    outs = [subprocess.run([f"./{b}", "65536", "1000000"], cwd=tmp_path, capture_output=True,
                           text=True, check=True).stdout for b in ("before", "after")]
    assert outs[0] == outs[1] and float(outs[0]) > 0, outs
