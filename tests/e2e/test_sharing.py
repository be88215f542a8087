"""End-to-end: sharing between threads (analyzer/sharing.py) on tests/progs/sharing.c,
recorded at 4000 Hz: neighbouring per-thread slots are false sharing, an
atomically updated counter true sharing, and slots padded to a line each nothing; the
report names the object and the source line, and suggest gives the fix instead of a
placement."""

import json
import shutil
import subprocess

import numpy as np
import pytest
from helpers import PROGS, compile_openmp, run_numaprof

from numaprof.analyzer.profile import open_profile

pytestmark = pytest.mark.e2e


def _build(tmp_path_factory, name):
    out = tmp_path_factory.mktemp(name) / name
    compile_openmp(PROGS / f"{name}.c", out)
    return out


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    return _build(tmp_path_factory, "sharing")


def _record(exe, tmp_path, mode):
    prof = tmp_path / f"{mode}.data"
    # 4000 Hz, as the other tests that need a store sampled: the software backend sees few
    # of the stores of `slot[t] += x` (docs/backends.md)
    run_numaprof("record", "-o", prof, "--freq", "4000", "--", exe, mode, "40000", check=True)
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    return prof, doc


@pytest.mark.parametrize("mode,obj,kind", [("false", "slot", "false"), ("true", "counter", "true")])
def test_shared_lines_are_found_with_their_line(exe, tmp_path, mode, obj, kind):
    prof, doc = _record(exe, tmp_path, mode)
    _require_concurrent_threads(prof)
    found = {f["object"]: f for f in doc["sharing"]}
    o = next(o for o in doc["objects"] if o["name"] == obj)
    if obj not in found and o["writes"] == 0:
        # the software backend samples the load of a `+=` far more often than its store
        # (docs/backends.md); with no write seen there is no evidence of sharing
        pytest.skip(f"no store to {obj} sampled ({o['samples']} samples, all loads)")
    assert obj in found, (doc["sharing"], [(o["name"], o["samples"]) for o in doc["objects"]])
    f = found[obj]
    assert f["kind"] == kind and f["threads"] == 2 and f["lines"] == 1, f
    assert f["writes"] > 0 and f["windows"] >= 2, f
    src = (PROGS / "sharing.c").read_text().splitlines()
    lines = [int(s.rsplit(":", 1)[1]) for s in f["sources"]]
    assert any(obj in src[n - 1] for n in lines), (f["sources"], [src[n - 1] for n in lines])
    text = run_numaprof("report", prof, check=True).stdout
    assert f"{kind} sharing" in text
    sugg = run_numaprof("suggest", prof, "--target", "2s", check=True).stdout
    assert f"{obj}: {kind} sharing between threads" in sugg
    assert "a sharing problem" in sugg  # not given a placement
    html = tmp_path / f"{mode}.html"
    run_numaprof("report", prof, "--format", "html", "-o", html, check=True)
    page = html.read_text()
    assert "<h2>Sharing between threads</h2>" in page and f"{kind} sharing" in page


def test_padded_slots_share_nothing(exe, tmp_path):
    _, doc = _record(exe, tmp_path, "padded")
    assert doc["sharing"] == [], doc["sharing"]
    assert any(o["name"] == "pad" for o in doc["objects"])


def _require_concurrent_threads(prof):
    """Sharing needs the two threads to run at the same time: on a machine loaded by
    other jobs they may take turns on the cpus, and then there is nothing to find."""
    s = open_profile(prof).table("samples")
    t, tid = np.asarray(s["time"]).astype(np.int64), np.asarray(s["tid"])
    spans = [(t[tid == x].min(), t[tid == x].max()) for x in np.unique(tid) if (tid == x).sum() > 10]
    if len(spans) < 2:
        pytest.skip(f"fewer than 2 threads with samples: {spans}")
    (a0, a1), (b0, b1) = spans[:2]
    overlap = max(0, min(a1, b1) - max(a0, b0))
    if overlap < 0.5 * (max(a1, b1) - min(a0, b0)):
        pytest.skip(f"the threads ran one after the other here (overlap {overlap / 1e6:.0f} ms)")



@pytest.mark.parametrize("mode,obj,kind,changed", [
    ("false", "slot", "pad_slots", "+double slot[8][8] __attribute__((aligned(64)));"),
    ("true", "counter", "reduction",
     "+#pragma omp parallel num_threads(2) reduction(+:counter)"),
])
def test_sharing_is_fixed_and_gone_after(tmp_path, mode, obj, kind, changed):
    """suggest writes the fix (a line per element of the falsely shared slots; a
    reduction for the truly shared counter): it compiles with the program's flags,
    --apply writes it, the rebuilt program prints what the original did, and recorded
    again the object shares no line."""
    shutil.copy(PROGS / "sharing.c", tmp_path / "sharing.c")
    build = ["gcc", "-O2", "-g", "-fopenmp", "-o"]
    subprocess.run([*build, "before", "sharing.c"], cwd=tmp_path, check=True)
    run_numaprof("record", "-o", "f.data", "--freq", "4000", "--", "./before", mode, "40000",
                 cwd=tmp_path, check=True)
    _require_concurrent_threads(tmp_path / "f.data")
    doc = json.loads(run_numaprof("suggest", "f.data", "--target", "2s", "--format", "json",
                                  cwd=tmp_path, check=True).stdout)
    if not doc["sharing_fixes"]:
        report = json.loads(run_numaprof("report", "f.data", "--format", "json", cwd=tmp_path,
                                         check=True).stdout)
        o = next(o for o in report["objects"] if o["name"] == obj)
        assert o["writes"] == 0, report["sharing"]
        pytest.skip(f"no store to {obj} sampled ({o['samples']} samples, all loads)")
    fix = doc["sharing_fixes"][0]
    assert fix["object"] == obj and fix["kind"] == mode, fix
    assert fix["fix"]["kind"] == kind and fix["fix"]["compile"] == "clean", fix
    assert changed in fix["patch"], fix["patch"]
    run_numaprof("suggest", "f.data", "--target", "2s", "--apply", cwd=tmp_path, check=True)
    cflags = run_numaprof("config", "--cflags", check=True).stdout.split()
    subprocess.run([*build, "after", *cflags, "sharing.c"], cwd=tmp_path, check=True)
    outs = [subprocess.run([f"./{b}", mode, "2000"], cwd=tmp_path, capture_output=True,
                           text=True, check=True).stdout for b in ("before", "after")]
    assert outs[0] == outs[1], outs
    run_numaprof("record", "-o", "g.data", "--freq", "4000", "--", "./after", mode, "40000",
                 cwd=tmp_path, check=True)
    after = json.loads(run_numaprof("report", "g.data", "--format", "json", cwd=tmp_path,
                                    check=True).stdout)
    assert obj not in {f["object"] for f in after["sharing"]}, after["sharing"]


@pytest.fixture(scope="module")
def page_exe(tmp_path_factory):
    return _build(tmp_path_factory, "page_sharing")


@pytest.mark.parametrize("schedule", ["static,16", "static"])
def test_pages_shared_out_in_chunks_are_page_sharing(page_exe, tmp_path, schedule):
    """tests/progs/page_sharing.c at default settings: chunks of two lines taken in turn
    share every page of `x` and no line (page sharing, at the loop's line); blocks of
    pages share none.  `y`, only read in the loop, is no finding either way."""
    prof = tmp_path / "p.data"
    run_numaprof("record", "-o", prof, "--", page_exe, "600", check=True,
                 env={"OMP_NUM_THREADS": "2", "OMP_SCHEDULE": schedule})
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    found = {f["object"]: f for f in doc["sharing"]}
    assert "y" not in found, found
    if schedule == "static":
        assert found == {}, found
        return
    f = found.get("x")
    assert f is not None and f["kind"] == "page", doc["sharing"]
    assert f["pages"] >= 16 and f["threads"] == 2, f
    src = (PROGS / "page_sharing.c").read_text().splitlines()
    assert any("the sharing line" in src[int(s.rsplit(":", 1)[1]) - 1] for s in f["sources"]), f
    sugg = run_numaprof("suggest", prof, "--target", "2s", check=True).stdout
    assert "x: page sharing between threads" in sugg and "whole pages" in sugg
    # the loop takes its schedule from OMP_SCHEDULE: no source patch, what to set instead
    sj = json.loads(run_numaprof("suggest", prof, "--target", "2s", "--format", "json",
                                 check=True).stdout)
    fix = next(x for x in sj["sharing_fixes"] if x["object"] == "x")
    assert fix["patch"] is None and fix["fix"]["kind"] == "page_chunks", fix
    assert "OMP_SCHEDULE=static" in fix["fix"]["by_hand"], fix
