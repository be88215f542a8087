"""End-to-end: the affinity of every thread is recorded, also of threads that live only a
fraction of a second (the collector reads them from a thread of its own, not when their
FORK records are processed), and the report calls bound exactly the bound ones."""

import json
import os
import re
import subprocess

import pytest
from helpers import ROOT, run_numaprof

from numaprof.analyzer.profile import open_profile
from numaprof.analyzer.threads import parse_cpulist

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs at least 2 cpus")
    work = tmp_path_factory.mktemp("affinity")
    exe = work / "affinity_threads"
    subprocess.run(["gcc", "-O1", "-g", "-Wall", "-Wextra", "-pthread", "-o", str(exe),
                    str(ROOT / "tests" / "progs" / "affinity_threads.c")], check=True)
    # 250 ms each: still short-lived, and long enough that a loaded machine (CI running
    # beside other jobs) schedules the watcher within the thread's life
    proc = run_numaprof("record", "-o", work / "p.data", "--", exe, "250", cwd=work, check=True)
    truth = {m[0]: (int(m[1]), parse_cpulist(m[2]))
             for m in re.findall(r"^thread (\w+) (\d+) (\S+)$", proc.stdout, re.M)}
    assert set(truth) == {"attr", "self", "free"}, proc.stdout
    return work / "p.data", truth


def test_every_thread_has_its_affinity(recorded):
    data, truth = recorded
    t = open_profile(data).table("threads")
    rows = {int(tid): i for i, tid in enumerate(t["tid"])}
    for name, (tid, cpus) in truth.items():
        assert tid in rows, (name, tid, list(rows))
        last = str(t["affinity_last"][rows[tid]]) or str(t["affinity_first"][rows[tid]])
        assert parse_cpulist(last) == cpus, (name, last, cpus)


def test_report_calls_the_bound_threads_bound(recorded):
    data, truth = recorded
    doc = json.loads(run_numaprof("report", data, "--format", "json", check=True).stdout)
    threads = {th["tid"]: th for th in doc["threads"]}
    for name, (tid, _) in truth.items():
        assert tid in threads, (name, tid, doc["threads"])
        assert threads[tid]["bound"] is (name != "free"), (name, threads[tid])
