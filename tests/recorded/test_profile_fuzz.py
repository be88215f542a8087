"""The profile-reader fuzzer (tests/profile_fuzz.py), seeded and bounded, and real runs of
the numaprof command on hostile profiles: no internal error, no hang, no crash, no file
read outside the profile, no control character reaching the terminal, bounded memory."""

from __future__ import annotations

import os
import shutil
import stat

import profile_fuzz
import pytest
from helpers import run_numaprof

CASES = 300  # 23 s at load 0.5, 87 s at load 9 on the 2-core development VM (shared)
SEED = 20261123
RSS_LIMIT = 512 << 20  # peak RSS of one case (the forked child, numpy and rich included)


def test_fuzzed_profiles_are_reported_or_refused_cleanly(tmp_path):
    res = profile_fuzz.run(CASES, SEED, tmp_path, timeout=60, rss_limit=RSS_LIMIT)
    report = "\n".join(f"case {i}: {o.kind} {o.detail} | {' '.join(argv)} | {'; '.join(m)}"
                       for i, m, argv, o in res.failures)
    assert not res.failures, f"{len(res.failures)} of {CASES} cases failed:\n{report}"
    # not vacuous: damaged profiles are refused, and many still reach the analysis
    assert res.tallies["refused"] >= CASES // 5, res.tallies
    assert res.tallies["ok"] >= CASES // 5, res.tallies
    assert res.peak_rss <= RSS_LIMIT


@pytest.fixture
def prof(tmp_path):
    p = tmp_path / "prof"
    shutil.copytree(profile_fuzz.SEEDS / "recorded", p)
    return p


def _refused(proc, *names):
    """Exit 2, one line naming the profile file."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("numaprof: "), proc.stderr
    assert "internal error" not in proc.stderr
    for n in names:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("victim", ["manifest.json", "samples.addr.col", "topology.json",
                                    "threads.comm.heap", "archive.json", "numa_maps.*"])
def test_fifo_in_place_of_a_profile_file_is_refused_at_once(prof, victim):
    target = next(prof.glob(victim))
    target.unlink()
    os.mkfifo(target)
    proc = run_numaprof("report", prof, timeout=60)  # blocked forever before
    _refused(proc, target.name, "FIFO")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_device_in_place_of_a_column_is_refused(prof, device):
    (prof / "samples.time.col").unlink()
    (prof / "samples.time.col").symlink_to(device)
    _refused(run_numaprof("report", prof, "--format", "json", timeout=60),
             "samples.time.col", "symbolic link")


def test_symlink_loop_is_refused(prof):
    (prof / "topology.json").unlink()
    (prof / "topology.json").symlink_to("topology.loop")
    (prof / "topology.loop").symlink_to("topology.json")
    _refused(run_numaprof("suggest", prof, timeout=60), "topology.json")


def test_archive_digest_cannot_reach_outside_the_profile(prof, tmp_path):
    import json

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.c").write_text("double *STOLEN = malloc(8);\n" * 30)
    doc = json.loads((prof / "archive.json").read_text())
    src = next(iter(doc["sources"]))
    doc["sources"][src] = "../../elsewhere/x.c"
    (prof / "archive.json").write_text(json.dumps(doc))
    watch = profile_fuzz._Watch(outside)
    try:
        proc = run_numaprof("report", prof, "--format", "json", timeout=60)
        opened = watch.events()
    finally:
        watch.close()
    assert not opened, f"report opened {opened} outside the profile"
    _refused(proc, "archive.json", "../../elsewhere/x.c")


def test_thousands_of_nodes_are_refused_quickly(prof):
    import json

    n = 3000
    (prof / "topology.json").write_text(json.dumps({
        "nodes": [{"id": i, "cpus": [i], "memory_bytes": 1} for i in range(n)],
        "distances": [[10 if i == j else 20 for j in range(n)] for i in range(n)]}))
    _refused(run_numaprof("report", prof, timeout=60), "topology.json", "3000 NUMA nodes")


def test_escape_sequences_are_shown_not_obeyed(prof):
    import json

    m = json.loads((prof / "manifest.json").read_text())
    m["command"] = ["./app\x1b[2J", "--title=\x1b]0;owned\x07"]
    m["backend_reason"]["pebs"] = "no\x9b31m PMU\r"
    m["complete"], m["incomplete_reason"] = False, "killed\x1b[H"
    (prof / "manifest.json").write_text(json.dumps(m))
    for args in (["report", prof], ["suggest", prof, "--target", "2s"]):
        proc = run_numaprof(*args, timeout=120, check=True)
        assert not profile_fuzz.CONTROL.search(proc.stdout + proc.stderr), proc.stdout
    out = run_numaprof("report", prof, timeout=120, check=True).stdout
    assert "./app\\x1b[2J --title=\\x1b]0;owned\\x07" in out
    # JSON stays faithful: the same characters, escaped the JSON way
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    assert doc["profile"]["command"] == m["command"]


@pytest.mark.parametrize("fmt", ["text", "json", "html"])
def test_report_files_are_private_like_the_profile(prof, tmp_path, fmt):
    out = tmp_path / f"report.{fmt}"
    old = os.umask(0o022)
    try:
        run_numaprof("report", prof, "--format", fmt, "-o", out, timeout=120, check=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert out.stat().st_size > 0


def test_report_over_an_existing_file_replaces_it_privately(prof, tmp_path):
    out = tmp_path / "report.json"
    out.write_text("old")
    out.chmod(0o644)
    run_numaprof("report", prof, "--format", "json", "-o", out, timeout=120, check=True)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert out.read_text().startswith("{")


def test_harness_classifies_hangs_crashes_and_exceptions(tmp_path):
    """The harness is not vacuous: a child that blocks, dies of a signal or raises is
    classified as a failure."""
    import signal
    import time

    def sleep(_argv):
        time.sleep(60)

    def segv(_argv):
        os.kill(os.getpid(), signal.SIGSEGV)

    def boom(_argv):
        raise RuntimeError("bug")

    def escape(_argv):
        print("\x1b[2J")

    expected = {"hang": sleep, "crash": segv, "internal": boom, "control": escape}
    for kind, entry in expected.items():
        case = tmp_path / kind
        case.mkdir()
        o = profile_fuzz.run_forked(["report", "p"], case, timeout=3, as_limit=8 << 30,
                                    entry=entry)
        o = profile_fuzz.classify(o, ["report", "p"], tmp_path / "p", case, [], RSS_LIMIT)
        assert o.kind == kind, (kind, o)


def test_seed_corpus_reports_cleanly():
    """The seeds themselves are good profiles (a mutation is what breaks them)."""
    for seed in profile_fuzz.SEEDS.iterdir():
        for args in (["report", seed, "--format", "json"], ["suggest", seed]):
            run_numaprof(*args, timeout=120, check=True)
