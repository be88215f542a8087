"""End-to-end: `record -p PID` on a program that allocated its arrays before numaprof
attached (tests/progs/attach_heap.c): no allocation shim saw them, yet each array is its
own object, named by the global that points to it, with a pattern (analyzer/attach.py,
analyzer/heapwalk.py)."""

import json
import os
import signal
import subprocess
import time

import pytest
from helpers import PROGS, numaprof_argv, run_numaprof

pytestmark = pytest.mark.e2e


def _start(work, seconds: str):
    """attach_heap built in ``work`` and started: (the process, its pid, its go file)."""
    exe = work / "attach_heap"
    subprocess.run(["gcc", "-O2", "-g", "-pthread", "-o", str(exe), str(PROGS / "attach_heap.c")],
                   check=True)
    go = work / "go"
    prog = subprocess.Popen([str(exe), str(go), seconds], stdout=subprocess.PIPE, text=True)
    ready = prog.stdout.readline().split()
    if ready[:1] != ["ready"]:
        prog.kill()
        raise AssertionError(ready)
    return prog, ready[1], go


def _attach(prog, pid: str, go, prof, duration: str) -> dict:
    """`record -p pid` into ``prof`` for ``duration`` seconds, the program let go (its go
    file made) once numaprof has attached; the program waited for: the report's JSON."""
    try:
        rec = subprocess.Popen([*numaprof_argv(), "record", "-o", str(prof), "-p", pid,
                                "--duration", duration], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)  # the heap is read when the collector attaches; then the work starts
        go.touch()
        _, err = rec.communicate(timeout=300)
        assert rec.returncode == 0, err
    finally:
        prog.wait(timeout=120)
    return json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)


@pytest.fixture(scope="module")
def attached(tmp_path_factory):
    work = tmp_path_factory.mktemp("attach")
    prog, pid, go = _start(work, "4")
    prof = work / "p.data"
    doc = _attach(prog, pid, go, prof, "2.5")
    doc["manifest"] = json.loads((prof / "manifest.json").read_text())  # for the tests' eyes
    return doc


def _by_name(doc) -> dict:
    """Objects by name, the heap one where a name is also a static's: the global pointer
    `big_a` (8 bytes, a sample now and then on its load) beside the array it points to."""
    objs: dict = {}
    for o in doc["objects"]:
        if o["name"] not in objs or o["kind"] == "heap":
            objs[o["name"]] = o
    return objs


def test_arrays_allocated_before_the_attach_are_separate_named_objects(attached):
    objs = _by_name(attached)
    # mmapped (big_a and big_b in one merged mapping), brk heap, a worker's arena
    for name in ("big_a", "big_b", "thr_g", "mid_c", "mid_d", "grid.energy", "thr_f"):
        assert name in objs, (name, sorted(objs))
        assert objs[name]["kind"] == "heap", objs[name]
    # the chunk's usable size: what was asked for, rounded up by malloc (at most a page)
    for name, asked in (("big_a", 24 << 20), ("big_b", 8 << 20), ("mid_c", 96 << 10)):
        assert asked <= objs[name]["size"] <= asked + 4096, (name, objs[name]["size"])
    assert "small_e" not in objs  # 6 KiB: below the tracking threshold, as with the shim


def test_blocks_no_global_points_to_are_named_by_the_code_that_reads_them(attached):
    """local_h, tab_s and tab_t are held only by main's locals: no global names them.
    local_h is read as `w->local` (a member of the workers' `struct work`), both tables
    only inside sum_table through its parameter `tab`; one name for two blocks keeps
    each block's address beside it."""
    objs = attached["objects"]
    local = [o for o in objs if o["name"] == "struct work.local"]
    assert len(local) == 1, [(o["name"], o["size"]) for o in objs]
    assert local[0]["kind"] == "heap" and local[0]["attribution"] == "type", local[0]
    assert 2 << 20 <= local[0]["size"] <= (2 << 20) + 4096, local[0]
    tabs = sorted((o for o in objs if o["name"].startswith("tab@0x")), key=lambda o: o["size"])
    assert len(tabs) == 2, [(o["name"], o["size"]) for o in objs]
    for o, asked in zip(tabs, (1 << 20, 3 << 20), strict=True):
        assert asked <= o["size"] <= asked + 4096 and o["attribution"] == "register", o
        assert o["name"] == f"tab@{o['address']}", o
        assert "sum_table" in o["site"], o
    assert not [o for o in objs if o["name"].startswith("heap@")], [(o["name"], o["size"]) for o in objs]


def test_a_buffer_made_and_freed_between_the_heap_walks_is_named_by_code(attached):
    """Each pass of the workers mallocs, fills, reads and frees `scratch`: neither walk
    of the heap sees it, and its samples fall in a mapping of the heap.  They are named
    by the variable the code held its address in (the value malloc returned)."""
    scratch = [o for o in attached["objects"] if o["name"] == "scratch"]
    assert scratch, [(o["name"], o["samples"]) for o in attached["objects"]]
    assert scratch[0]["kind"] == "heap" and scratch[0]["attribution"] == "register", scratch[0]
    assert scratch[0]["samples"] > 0


def test_arrays_allocated_after_the_attach_are_found_at_its_end(attached):
    """late_m and late_k were allocated after numaprof attached: the heap read when it
    stopped finds them, named, allocated during the recording."""
    objs = _by_name(attached)
    for name, asked in (("late_m", 12 << 20), ("late_k", 160 << 10)):
        assert name in objs, (name, sorted(objs))
        assert objs[name]["kind"] == "heap" and asked <= objs[name]["size"] <= asked + 4096, objs[name]
        assert objs[name]["samples"] > 0 and objs[name]["site"] == "in the heap when sampling stopped", objs[name]
    heap = attached["manifest"]["attach"]["heap"]
    assert heap["at_end"]["status"] == "ok" and heap["at_end"]["allocated"] >= 2, heap


def test_the_streamed_arrays_have_their_pattern(attached):
    """Each worker streams over its half of each array in every pass: regular, unless a
    loaded machine left an array too few samples, which the report then says."""
    objs = _by_name(attached)
    told = []
    for name in ("big_a", "big_b", "thr_g"):
        o = objs[name]
        if o["pattern"] == "unknown" and o["samples_needed"] > 0:
            continue
        assert o["pattern"] == "regular", o
        told.append(name)
    assert told, [(n, objs[n]["samples"]) for n in ("big_a", "big_b", "thr_g")]


def test_no_mapping_holds_the_arrays_samples(attached):
    """Before: all of them were one anon@ mapping with one pattern.  (The program's own
    constants, `attach_heap .rodata`, are a mapping of its file, not of its heap.)"""
    total = sum(o["samples"] for o in attached["objects"])
    mappings = sum(o["samples"] for o in attached["objects"]
                   if o["kind"] == "mapping" and not o["read_only"])
    assert mappings <= 0.05 * total, [(o["name"], o["samples"]) for o in attached["objects"]]


def test_switch_output_records_slices_that_report_merges(tmp_path):
    """`record -p PID --switch-output 1 --duration 2.5`: one whole profile per second
    (prof.data.0001, ...), each with its own samples and heap objects; `report` over them
    merges them."""
    prog, pid, go = _start(tmp_path, "6")
    try:
        go.touch()
        proc = run_numaprof("record", "-o", tmp_path / "p.data", "-p", pid, "--switch-output", "1",
                            "--duration", "2.5", timeout=300)
        assert proc.returncode == 0, proc.stderr
    finally:
        prog.wait(timeout=120)
    slices = sorted(tmp_path.glob("p.data.*"))
    assert [s.name for s in slices][:2] == ["p.data.0001", "p.data.0002"] and len(slices) <= 3, slices
    assert f"{len(slices)} slice(s)" in proc.stderr
    for s in slices:
        doc = json.loads(run_numaprof("report", s, "--format", "json", check=True).stdout)
        assert doc["profile"]["samples"] > 0 and "big_a" in {o["name"] for o in doc["objects"]}, s
    merged = json.loads(run_numaprof("report", *slices, "--format", "json", check=True).stdout)
    assert len(merged["ranks"]) == len(slices)
    assert merged["profile"]["samples"] == sum(r["profile"]["samples"] for r in merged["ranks"])


def test_switch_output_on_sigusr2(tmp_path):
    """`record -p PID --switch-output signal`: a slice per SIGUSR2 numaprof record gets (as
    perf record's --switch-output=signal), each a whole profile; SIGTERM ends the last
    one (incomplete) and the recording, not the process."""
    prog, pid, go = _start(tmp_path, "8")
    try:
        go.touch()
        rec = subprocess.Popen([*numaprof_argv(), "record", "-o", str(tmp_path / "p.data"), "-p", pid,
                                "--switch-output", "signal"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        for sig in (signal.SIGUSR2, signal.SIGUSR2, signal.SIGTERM):
            time.sleep(1.2)
            rec.send_signal(sig)
        out, err = rec.communicate(timeout=300)
        assert rec.returncode == 0, err
        assert prog.poll() is None  # the process goes on
    finally:
        prog.wait(timeout=120)
    slices = sorted(tmp_path.glob("p.data.*"))
    assert [s.name for s in slices] == ["p.data.0001", "p.data.0002", "p.data.0003"], (slices, err)
    ended = [json.loads((s / "collector.json").read_text())["interrupted"] for s in slices]
    complete = [json.loads((s / "manifest.json").read_text())["complete"] for s in slices]
    assert ended == ["SIGUSR2", "SIGUSR2", "SIGTERM"] and complete == [True, True, False], (ended, complete)
    for s in slices:
        doc = json.loads(run_numaprof("report", s, "--format", "json", check=True).stdout)
        assert doc["profile"]["samples"] > 0, s
    assert "3 slice(s)" in err


def test_switch_output_slices_a_launched_command(tmp_path):
    """`record --switch-output 1 -- COMMAND`: COMMAND started, then recorded in slices as
    with -p, each slice a whole profile naming the arrays; numaprof record ends with
    COMMAND and returns its exit status."""
    exe = tmp_path / "attach_heap"
    subprocess.run(["gcc", "-O2", "-g", "-pthread", "-o", str(exe), str(PROGS / "attach_heap.c")],
                   check=True)
    go = tmp_path / "go"
    go.touch()  # no waiting: the work starts at once
    proc = run_numaprof("record", "-o", tmp_path / "p.data", "--switch-output", "1", "--",
                        str(exe), str(go), "2.5", timeout=300)
    assert proc.returncode == 0, proc.stderr
    slices = sorted(tmp_path.glob("p.data.*"))
    assert 2 <= len(slices) <= 3 and slices[0].name == "p.data.0001", (slices, proc.stderr)
    assert f"{len(slices)} slice(s)" in proc.stderr
    for s in slices[:2]:  # the last may hold only the end
        doc = json.loads(run_numaprof("report", s, "--format", "json", check=True).stdout)
        assert doc["profile"]["samples"] > 0 and "big_a" in {o["name"] for o in doc["objects"]}, s
        # its allocations come from the allocation shim, since its start: each array by
        # its allocation site, `scratch` (made and freed in every pass) too, no heap read
        manifest = json.loads((s / "manifest.json").read_text())
        assert manifest["attach"]["allocations"] == "shim" and "heap" not in manifest["attach"], manifest
        objs = {o["name"]: o for o in doc["objects"] if o["kind"] == "heap"}
        assert "xmalloc" in objs["big_a"]["site"] or "main" in objs["big_a"]["site"], objs["big_a"]
        assert objs["big_a"]["attribution"] == "address", objs["big_a"]
        assert "scratch" in objs, sorted(objs)
        assert not [n for n in objs if n.startswith("heap@")], sorted(objs)
    assert not list(tmp_path.glob(".p.data.alloc-*"))  # the shim's directory is gone
    # held before its exec until the first slice attached: recorded from its first
    # instruction, so big_a's first touch (xmalloc's memset in main) is in slice 1
    doc = json.loads(run_numaprof("report", slices[0], "--format", "json", check=True).stdout)
    big_a = next(o for o in doc["objects"] if o["name"] == "big_a")
    assert big_a["first_touch"]["pages"] == (24 << 20) // 4096 and big_a["first_touch"]["serial"], big_a
    # report over the slices: the arrays alive across them once each, not once a slice
    doc = json.loads(run_numaprof("report", *slices, "--format", "json", check=True).stdout)
    big_a = next(o for o in doc["objects"] if o["name"] == "big_a")
    assert big_a["size"] < (25 << 20) and big_a["count"] == 1, big_a
    # a program started by the command (a shell in front): recorded in every slice, as
    # a whole recording follows it, not only in the first (whose events it inherits)
    # (3.5 s: slices of 1 s, a middle one even when a loaded machine switches late --
    # 2 slices of a 2.5 s run once, beside a full test run)
    proc = run_numaprof("record", "-o", tmp_path / "c.data", "--switch-output", "1", "--",
                        "sh", "-c", f"{exe} {go} 3.5; true", timeout=300)
    assert proc.returncode == 0, proc.stderr
    later = sorted(tmp_path.glob("c.data.*"))[1:-1]
    assert later, proc.stderr
    for s in later:
        doc = json.loads(run_numaprof("report", s, "--format", "json", check=True).stdout)
        assert doc["profile"]["samples"] > 100 and "big_a" in {o["name"] for o in doc["objects"]}, s
    # its exit status, whether it ends during a slice or between two
    proc = run_numaprof("record", "-o", tmp_path / "q.data", "--switch-output", "1", "--",
                        "sh", "-c", "sleep 1.5; exit 3", timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert (tmp_path / "q.data.0001" / "manifest.json").exists()



def test_a_block_the_code_reads_as_two_arrays_is_named_by_both(tmp_path):
    """One heap block, found by the heap walks, that `smooth` reads as `u` and `residual`
    as `r` (tests/progs/attach_reuse.c; a solver's temporaries get the same memory back
    from the allocator): the samples go to `u` and `r`, named by the code, not to one
    `heap@0x…` (before: the block stayed nameless, no variable having half of its named
    samples)."""
    exe = tmp_path / "attach_reuse"
    subprocess.run(["gcc", "-O2", "-g", "-fopenmp", "-o", str(exe), str(PROGS / "attach_reuse.c")], check=True)
    go = tmp_path / "go"
    prog = subprocess.Popen([str(exe), str(go), "3"], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "2"})
    ready = prog.stdout.readline().split()
    if ready[:1] != ["ready"]:
        prog.kill()
        raise AssertionError(ready)
    doc = _attach(prog, ready[1], go, tmp_path / "p.data", "2")
    objs = {o["name"]: o for o in doc["objects"]}
    assert "u" in objs and "r" in objs, sorted(objs)
    assert objs["u"]["kind"] == "heap" and objs["u"]["attribution"] == "register", objs["u"]
    heap = doc["profile"]["with_address"]
    named = objs["u"]["samples"] + objs["r"]["samples"]
    nameless = sum(o["samples"] for o in doc["objects"] if o["name"].startswith("heap@"))
    assert named >= 0.6 * heap and nameless < 0.2 * heap, (named, nameless, heap)
