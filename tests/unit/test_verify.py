"""`suggest --verify`'s parts that need no lab (cli/verify.py): the command it runs in the
guest, the pages each node should get, and the verdict; the lab run itself is in
tests/lab/test_lab_verify.py."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import profgen
from helpers import run_numaprof
from profgen import Array

from numaprof.cli.verify import (
    ObjectCheck,
    compare,
    guest_command,
    local_on_map,
    map_from_segments,
    predicted_map,
    predicted_pages,
    render,
    segments_of,
)
from numaprof.recommender import emit

COMMAND = ["./serial_init", "8", "300"]


def test_guest_command_takes_the_binding_and_numactl_of_the_line_to_run():
    line = emit.command_line(COMMAND, env=emit.binding_env("spread"),
                             prefix=emit.interleave_args([0, 1]), comment="predicted: 50% -> 90%")
    env, prefix = guest_command(SimpleNamespace(commands=[line]), COMMAND)
    assert env == {"OMP_PROC_BIND": "spread", "OMP_PLACES": "cores"}
    assert prefix == ["numactl", "--interleave=0,1"]
    assert guest_command(SimpleNamespace(commands=[]), COMMAND) == ({}, [])


def _topo(n):
    return SimpleNamespace(nodes=[SimpleNamespace(id=i) for i in range(n)])


def test_predicted_pages_follow_the_policy():
    sug = SimpleNamespace(policy="bind_block", weighted_nodes=[], weights=[])
    assert predicted_pages(sug, None, 256, _topo(2), [0, 1]) == [128, 128]
    assert predicted_pages(sug, None, 256, _topo(2), [1, 1]) == [0, 256]
    sug.policy = "cyclic"
    assert predicted_pages(sug, None, 256, _topo(4), []) == [64, 64, 64, 64]
    sug.policy = "first_touch"
    assert predicted_pages(sug, SimpleNamespace(pages_by_node=[7, 3]), 10, _topo(2), []) == [7, 3]


def test_verdict_rests_on_the_page_map_and_flags_a_disagreement():
    ok = compare(ObjectCheck("c", "bind_block", "place_after_allocation, compile clean", 0.95,
                             [1024, 1024], lab_pages=[1030, 1018], lab_pages_source="numa_maps"))
    assert ok.verdict == "as predicted" and not ok.why
    assert "the predicted local fraction" in render([ok])[0]
    # the case: the patch placed one page; the array stayed on node 0
    bad = compare(ObjectCheck("idx", "bind_block", "place_after_allocation, compile clean", 0.91,
                              [996, 997], lab_pages=[1992, 1], lab_pages_source="numa_maps"))
    assert bad.verdict == "disagrees" and "50% of the pages" in bad.why[0]
    assert "DISAGREES" in render([bad])[0]
    slow = compare(ObjectCheck("a", "cyclic", "numactl", 0.9, [10, 10], lab_pages=[10, 10],
                               lab_local=0.5, lab_samples=400))
    assert slow.verdict == "disagrees" and "local 50% measured" in slow.why[0]
    gone = compare(ObjectCheck("b", "cyclic", "numactl", 0.9, [10, 10]))
    assert gone.verdict == "not found in the lab recording"


def test_verify_without_build_or_compile_lines_says_so(tmp_path):
    """A program whose compile lines were not recorded (no DWARF) needs --build; the
    scratch copy is removed all the same."""
    run = profgen.synth_run(tmp_path / "p", [Array("a", 4 << 20, ["serial_init", "regular"])])
    before = set(Path(tempfile.gettempdir()).glob("numaprof-verify-*"))
    res = run_numaprof("suggest", run.path, "--verify", "--target", "2s", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        "numaprof: --verify: the program's compile lines were not recorded (no DWARF from "
        "gcc or clang for it): give --build CMD")
    assert set(Path(tempfile.gettempdir()).glob("numaprof-verify-*")) <= before


def test_segments_and_map_round_trip():
    sug = SimpleNamespace(policy="bind_block", weighted_nodes=[], weights=[])
    where = predicted_map(sug, 320, _topo(2), [0, 1])
    seg = segments_of(where, [0, 1])
    # the first 8 sixteenths on node 0, the last 8 on node 1, 20 pages each
    assert seg == [[20] * 8 + [0] * 8, [0] * 8 + [20] * 8]
    assert map_from_segments(seg, 320).tolist() == [0] * 160 + [1] * 160
    # a sixteenth split 3:1 is shared out in row order; one with nothing located is -1
    parts = [[3] + [0] * 15, [1] + [0] * 15]
    got = map_from_segments(parts, 64)
    assert got[:4].tolist() == [0, 0, 0, 1] and (got[4:] == -1).all()


def test_a_reversed_block_placement_has_the_right_counts_and_is_flagged():
    """bind_block predicted node 0 then node 1; the lab's kernel has the halves the
    other way round: the counts per node agree, the parts do not, and the host's
    accesses (each thread on its own half) are 0 % local on that map."""
    sug = SimpleNamespace(policy="bind_block", weighted_nodes=[], weights=[])
    where = predicted_map(sug, 320, _topo(2), [0, 1])
    predicted = segments_of(where, [0, 1])
    reversed_ = [predicted[1], predicted[0]]
    page = np.arange(320)
    access = SimpleNamespace(page=page, thread=(page >= 160).astype(int), weight=np.ones(320))
    lab_local = local_on_map(access, map_from_segments(reversed_, 320), [0, 1])
    assert lab_local == 0.0
    assert local_on_map(access, map_from_segments(predicted, 320), [0, 1]) == 1.0
    bad = compare(ObjectCheck("a", "bind_block", "place_after_allocation", 1.0, [160, 160],
                              lab_pages=[160, 160], lab_pages_source="move_pages_at_exit",
                              predicted_segments=predicted, lab_segments=reversed_,
                              lab_map_local=lab_local))
    assert bad.verdict == "disagrees"
    assert any("part of the object" in w for w in bad.why) and any("0% local" in w for w in bad.why)
    good = compare(ObjectCheck("a", "bind_block", "place_after_allocation", 1.0, [160, 160],
                               lab_pages=[160, 160], lab_pages_source="move_pages_at_exit",
                               predicted_segments=predicted, lab_segments=predicted,
                               lab_map_local=1.0))
    assert good.verdict == "as predicted" and "100% local" in render([good])[0]


def test_no_access_on_a_located_page_gives_no_local_fraction():
    access = SimpleNamespace(page=np.array([5, 6]), thread=np.array([0, 0]), weight=np.ones(2))
    assert local_on_map(access, np.full(10, -1), [0]) is None


def test_a_page_map_from_a_few_sampled_pages_judges_nothing():
    """A static array in the lab is located only on the pages its few guest samples fell
    on (14 of 4097 in a run of a gather program): neither as predicted nor flagged, but
    said to be too little to judge; a heap object's map (move_pages at release) is
    judged as before."""
    few = compare(ObjectCheck("val", "parallel_init", "parallel_first_touch, compile clean", 1.0,
                              [2049, 2048], lab_pages=[8, 6], lab_pages_source="move_pages"))
    assert few.verdict == "too few pages located" and "14 of the 4097 pages" in few.why[0]
    assert "too few pages located" in render([few])[0]
    heap = compare(ObjectCheck("x", "cyclic", "place_after_allocation", 0.5, [2049, 2048],
                               lab_pages=[2053, 2044], lab_pages_source="move_pages_at_free"))
    assert heap.verdict == "as predicted"
