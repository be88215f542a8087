"""`numaprof suggest prof.*`: one answer for a job of several ranks (recommender/job.py),
the ranks that differ named, the representative rank's suggestion after it."""
from __future__ import annotations

import json
from types import SimpleNamespace

import profgen
import pytest
from helpers import run_numaprof
from profgen import Array

from numaprof.recommender.job import job_answer, render_lines


def _sug(*objs):
    return SimpleNamespace(objects=[SimpleNamespace(name=n, policy=p, share=s) for n, p, s in objs])


def test_majority_ties_absent_and_the_representative():
    per_rank = [
        ("r0", _sug(("x", "cyclic", 0.5), ("y", "bind_block", 0.3))),
        ("r1", _sug(("x", "cyclic", 0.4), ("y", "parallel_init", 0.5))),
        ("r2", _sug(("x", "bind_block", 0.6))),
        ("r3", _sug(("x", "cyclic", 0.5), ("y", "parallel_init", 0.1), ("z", "random", 0.2))),
    ]
    job = job_answer(per_rank)
    got = {o.name: o for o in job.objects}
    assert got["x"].policy == "cyclic" and got["x"].ranks == ["r0", "r1", "r3"]
    assert got["x"].differ == [("r2", "bind_block")] and got["x"].absent == []
    # y: one vote each way but for parallel_init (2 to 1)
    assert got["y"].policy == "parallel_init" and got["y"].differ == [("r0", "bind_block")]
    assert got["y"].absent == ["r2"]
    assert got["z"].absent == ["r0", "r1", "r2"]
    # r1 and r3 agree with the job on every object; r1 comes first
    assert job.representative == "r1" and job.agreement == 1.0
    text = "\n".join(render_lines(job))
    assert "x: cyclic (3 of 4 ranks; r2: bind_block)" in text and "not hot in 1: r2" in text


def test_a_tie_goes_to_the_policy_with_more_samples_then_the_name():
    job = job_answer([("a", _sug(("x", "cyclic", 0.2))), ("b", _sug(("x", "bind_block", 0.7)))])
    assert job.objects[0].policy == "bind_block" and job.representative == "b"
    job = job_answer([("a", _sug(("x", "cyclic", 0.5))), ("b", _sug(("x", "bind_block", 0.5)))])
    assert job.objects[0].policy == "bind_block"


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    base = tmp_path_factory.mktemp("job")
    paths = []
    for r in range(3):
        # rank 2 reads b in blocks, the others all over
        b = ["serial_init", "regular"] if r == 2 else ["serial_init", "random"]
        profgen.synth_run(base / f"prof.{r}", [Array("a", 4 << 20, ["serial_init", "regular"]),
                                               Array("b", 4 << 20, b)], seed=r + 1)
        paths.append(base / f"prof.{r}")
    return paths


def test_the_job_answer_names_the_rank_that_differs(ranks):
    one = [json.loads(run_numaprof("suggest", p, "--target", "2s", "--format", "json", check=True).stdout)
           for p in ranks]
    b = [next(o["policy"] for o in d["objects"] if o["name"].endswith("600000")) for d in one]
    assert b[0] == b[1] != b[2], b  # the synthetic ranks do differ on b
    doc = json.loads(run_numaprof("suggest", *ranks, "--target", "2s", "--format", "json",
                                  check=True).stdout)
    assert doc["schema"] == "numaprof.suggest-job/1"
    got = {o["name"]: o for o in doc["job"]["objects"]}
    jb = next(o for n, o in got.items() if n.endswith("600000"))
    assert jb["policy"] == b[0] and jb["differ"] == [{"rank": str(ranks[2]), "policy": b[2]}]
    assert doc["job"]["representative"] in (str(ranks[0]), str(ranks[1]))
    assert doc["representative"]["schema"] == one[0]["schema"]
    text = run_numaprof("suggest", *ranks, "--target", "2s", check=True).stdout
    assert f"{ranks[2]}: {b[2]}" in text and "representative rank" in text


def test_apply_takes_one_profile(ranks):
    proc = run_numaprof("suggest", *ranks, "--apply")
    assert proc.returncode == 2 and "take one profile" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
