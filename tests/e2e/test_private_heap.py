"""End-to-end: per-thread heap buffers (tests/progs/private_buffers.c: each OpenMP thread
allocates its own histogram in every step) are one thread-private object, never given a
spreading placement, while the shared input beside them is placed."""

import json

import pytest
from helpers import PROGS, compile_openmp, run_numaprof

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    work = tmp_path_factory.mktemp("private")
    exe = work / "private_buffers"
    compile_openmp(PROGS / "private_buffers.c", exe)
    run_numaprof("record", "-o", work / "p.data", "--freq", "4000", "--", exe, "80",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    return work / "p.data"


def test_per_thread_buffers_are_one_private_object(recorded):
    doc = json.loads(run_numaprof("report", recorded, "--format", "json", check=True).stdout)
    objs = {o["name"]: o for o in doc["objects"]}
    hist = objs["hist"]
    assert hist["thread_private"] is True and hist["count"] == 160, hist  # 80 steps x 2 threads
    assert hist["threads"] == 2 and hist["samples"] >= 30, hist
    assert objs["in"]["thread_private"] is False  # one array, each thread reading its block


def test_suggest_leaves_them_to_first_touch(recorded):
    doc = json.loads(run_numaprof("suggest", recorded, "--target", "2s", "--format", "json",
                                  check=True).stdout)
    assert "hist" not in {o["name"] for o in doc["objects"]}
    assert any(n.startswith("not placed (thread-private") and "hist" in n for n in doc["notes"]), doc["notes"]
