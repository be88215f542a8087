"""Pages by node are the kernel's answer: the shim's move_pages queries (object_pages) and
numa_maps split by mbind, rather than the node of the cpu that first touched each page."""

import json

import profgen
from click.testing import CliRunner
from helpers import run_numaprof
from profgen import Array

from numaprof.analyzer import analyze
from numaprof.analyzer.profile import read_table
from numaprof.cli.main import group as cli

MiB = 1 << 20
FREED = 1 << 62  # after every synthetic sample


def _run(tmp_path, **array):
    """A 4 MiB array first touched by one thread (node 0), never located while running,
    freed after the last sample."""
    return profgen.synth_run(tmp_path / "p", [
        Array("a", 4 * MiB, ["serial_init", "regular"], samples=2000, located=False, **array)])


def _object_pages(run, rows, *, source=1, policy=0, mixed=0, time=FREED - 10, pages=1024,
                  sampled=1024):
    """object_pages rows {node: count} for the run's array, as the shim writes them."""
    pid = int(read_table(run.path, "objects")["pid"][0])
    n = len(rows)
    profgen.ProfileWriter(run.path).table(
        "object_pages", time=[time] * n, pid=[pid] * n, addr=[run.arrays[0].addr] * n,
        source=[source] * n, pages=[pages] * n, sampled=[sampled] * n, node=list(rows),
        count=list(rows.values()), policy=[policy] * n, mixed=[mixed] * n)


def test_a_freed_object_placed_by_a_policy_has_the_kernels_pages(tmp_path):
    """bind_block in the lab: the array was split between the nodes by a policy although
    one thread touched it all; the report said [1024, 0] (the toucher's node)."""
    run = _run(tmp_path, free_time=FREED)
    _object_pages(run, {0: 512, 1: 512}, policy=1, mixed=1)  # preferred, node per block
    o = analyze(run.path).objects[0]
    assert o.pages_by_node == [512, 512]
    assert o.pages_source == "move_pages_at_free"
    assert o.pages_policy == "preferred" and o.pages_policy_mixed
    # no sample takes its node from the first touch where a policy placed the pages
    assert o.inferred_samples == 0


def test_a_sampled_query_is_scaled_to_the_object(tmp_path):
    run = _run(tmp_path, free_time=FREED)
    _object_pages(run, {0: 100, 1: 156, -1: 0}, policy=3, sampled=256)  # interleave, 1 in 4
    o = analyze(run.path).objects[0]
    assert o.pages_by_node == [400, 624]
    assert o.pages_policy == "interleave" and not o.pages_policy_mixed


def test_default_policy_keeps_the_first_touch_inference_for_samples(tmp_path):
    """Under the default policy the toucher's node is where a page is: samples of pages the
    collector never located still take it, but the counts are the kernel's."""
    run = _run(tmp_path, free_time=FREED)
    _object_pages(run, {0: 700, 1: 300, -1: 24})  # some pages fell back to node 1
    o = analyze(run.path).objects[0]
    assert o.pages_by_node == [700, 300] and o.pages_source == "move_pages_at_free"
    assert o.pages_policy == "default"
    assert o.inferred_samples == o.samples


def test_a_freed_object_on_one_node_places_its_samples_there(tmp_path):
    run = _run(tmp_path, free_time=FREED)
    _object_pages(run, {1: 1024}, policy=2)  # bound to node 1, touched from node 0
    o = analyze(run.path).objects[0]
    assert o.pages_by_node == [0, 1024] and o.inferred_samples == 0
    assert o.unplaced_samples == 0 and o.traffic[:, 0].sum() == 0


def test_a_query_outside_the_lifetime_is_not_the_objects(tmp_path):
    """A query at the same address after the object was freed belongs to another object."""
    run = _run(tmp_path, free_time=FREED - 100)
    _object_pages(run, {1: 1024}, policy=2, time=FREED)
    o = analyze(run.path).objects[0]
    assert o.pages_source == "first_touch" and o.pages_by_node == [1024, 0]


def test_an_object_alive_at_exit_takes_the_exit_query(tmp_path):
    run = _run(tmp_path)
    _object_pages(run, {1: 1024}, source=2, policy=2, time=FREED)
    o = analyze(run.path).objects[0]
    assert o.pages_by_node == [0, 1024] and o.pages_source == "move_pages_at_exit"


def test_numa_maps_split_by_mbind_is_summed(tmp_path):
    """numaprof_place's bind_block mbinds each block: one VMA per block in numa_maps."""
    run = _run(tmp_path)
    a = run.arrays[0].addr
    pid = int(read_table(run.path, "objects")["pid"][0])
    half = a + 2 * MiB
    (run.path / f"numa_maps.{pid}").write_text(
        f"{a:x} prefer:0 anon=512 dirty=512 N0=512 kernelpagesize_kB=4\n"
        f"{half:x} prefer:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4\n"
        f"{a + 8 * MiB:x} default anon=1 dirty=1 N0=1 kernelpagesize_kB=4\n")
    o = analyze(run.path).objects[0]
    assert o.pages_by_node == [512, 512] and o.pages_source == "numa_maps"
    assert o.pages_policy == "preferred" and o.pages_policy_mixed


def test_report_says_where_each_count_came_from(tmp_path):
    run = _run(tmp_path, free_time=FREED)
    _object_pages(run, {0: 512, 1: 512}, policy=1, mixed=1)
    res = CliRunner().invoke(cli, ["report", str(run.path), "--format", "json"])
    assert res.exit_code == 0, res.output
    o = json.loads(res.output)["objects"][0]
    assert o["pages_by_node"] == [512, 512]
    assert o["pages_source"] == "move_pages_at_free"
    assert o["pages_source_text"] == "move_pages at free"
    assert o["pages_policy"] == "preferred" and o["pages_policy_mixed"] is True
    res = CliRunner().invoke(cli, ["report", str(run.path)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "0:512 1:512 (free) [preferred, mixed]" in res.output


def test_impossible_counts_are_refused_with_the_file_named(tmp_path):
    run = _run(tmp_path, free_time=FREED)
    _object_pages(run, {0: 2000}, sampled=1024)  # more pages on a node than were asked
    res = run_numaprof("report", run.path)
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("numaprof: ") and "object_pages.count.col: row 0" in line
