"""One array built by several threads (analyzer/objects.py, hot_objects.py, core.py): the call
stacks of one allocation line run by a thread pool are one site; code-named samples in
the stretch of heap where an array of small blocks lies join it; the blocks of every
element of a container are named `m_rows[]`; and an OpenMP region outlined from a C++
member function is named after it and sees its class's members."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from numaprof.analyzer import attribution as att
from numaprof.analyzer import hot_objects, objects, objresult, symbols, varattr

APP, GOMP, LIBC, CXX = "/work/app", "/usr/lib/x86_64-linux-gnu/libgomp.so.1", \
    "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
MAPS = [(0x1000, APP), (0x10000, GOMP), (0x20000, LIBC), (0x30000, CXX)]


class _FakeProfile:
    """What thread_sites reads of a profile: the objects table and the stacks' frames."""

    def __init__(self, stacks: dict[int, list[int]]):
        n = len(stacks)
        self.tables = {"objects": {"stack": np.array(list(stacks), dtype=np.uint32),
                                   "pid": np.full(n, 7, dtype=np.uint32)}}
        self._nmp_frames = stacks

    def table(self, name):
        return self.tables[name]


def _mappings():
    return symbols.Mappings({"pid": np.full(len(MAPS), 7), "start": np.array([s for s, _ in MAPS]),
                             "len": np.full(len(MAPS), 0x1000), "pgoff": np.zeros(len(MAPS)),
                             "path": [p for _, p in MAPS]})


def test_one_line_run_by_a_thread_pool_is_one_site():
    new, omp_fn, inner = 0x30010, 0x1200, 0x1100
    stacks = {
        # the thread that started the region: ... <- GOMP_parallel <- assemble <- main
        10: [new, inner, omp_fn, 0x10100, 0x1300, 0x1400, 0x20100],
        # a worker: ... <- gomp_thread_start <- start_thread
        11: [new, inner, omp_fn, 0x10200, 0x20200],
        # one comparison function called by qsort from two functions: two sites
        20: [0x20300, 0x1500, 0x20400, 0x1600, 0x1400],
        21: [0x20300, 0x1500, 0x20400, 0x1700, 0x1400],
        # the same thread-start tail under another line of the region: its own site
        30: [new, 0x1180, omp_fn, 0x10200, 0x20200],
    }
    assert objects.thread_sites(_FakeProfile(stacks), _mappings()) == {11: 10}


def test_no_thread_entry_no_merge():
    # two serial callers of one function: the stacks differ after the program's frames
    stacks = {1: [0x30010, 0x1100, 0x1300, 0x20100], 2: [0x30010, 0x1100, 0x1350, 0x20100]}
    assert objects.thread_sites(_FakeProfile(stacks), _mappings()) == {}


def test_heap_intervals_group_a_sites_stacks():
    t = {"pid": np.full(3, 7, dtype=np.uint32), "addr": np.array([0x1000, 0x9000, 0x20000], dtype=np.uint64),
         "size": np.full(3, 100, dtype=np.uint64), "stack": np.array([10, 11, 12], dtype=np.uint32),
         "time": np.array([1, 2, 3], dtype=np.uint64), "free_time": np.zeros(3, dtype=np.uint64),
         "sample_period": np.zeros(3, dtype=np.uint32), "kind": np.ones(3, dtype=np.uint8), "holder": [""] * 3}
    objs: list = []
    iv = objects.heap_intervals(t, objs, {11: 10})
    assert len(objs) == 2 and objs[0].count == 2 and objs[0].stack == 10
    assert iv.obj.tolist() == [0, 0, 1]


def _site_and_code_named(n_blocks=8, gap=1024):
    P = 4096
    site = objects.Obj("heap", ("heap", 7, 1), 7, 0x100000, 0, sample_period=P, name="m_rows[]",
                       attribution="allocation_sample")
    # sampled blocks every `gap` bytes from 0x100000, then another stretch 64 periods on
    starts = [0x100000 + k * gap for k in range(n_blocks)] + [0x100000 + 64 * P + k * gap for k in range(2)]
    ivs = att.Intervals(np.full(len(starts), 7, dtype=np.int64), np.array(starts, dtype=np.uint64),
                        np.array([s + 512 for s in starts], dtype=np.uint64),
                        np.zeros(len(starts), dtype=np.uint64), np.full(len(starts), att.NEVER, dtype=np.uint64),
                        np.zeros(len(starts), dtype=np.int64))
    site.iv_instance = {k: 0 for k in range(len(starts))}
    typed = objects.Obj("heap", ("type", "Entry"), 7, 0, 16, name="Entry", attribution=varattr.TYPE)
    return site, typed, ivs


def test_code_named_samples_in_a_sites_stretch_join_it():
    site, typed, ivs = _site_and_code_named()
    P = site.sample_period
    # samples named `Entry` by their instruction: two between the site's blocks, one past
    # its first stretch (17 periods of nothing), one in its second stretch, one elsewhere
    addr = np.array([0x100000 + 100, 0x100000 + 3000, 0x100000 + 30 * P, 0x100000 + 64 * P + 600,
                     0x900000], dtype=np.uint64)
    a_obj = np.array([1, 1, 1, 1, 1])
    assert hot_objects.merge_into_sites([site, typed], [0, 1], a_obj, np.full(5, 7), addr, ivs)
    assert a_obj.tolist() == [0, 0, 1, 0, 1]
    # another process's samples at those addresses are not the site's
    a_obj = np.array([1, 1])
    assert not hot_objects.merge_into_sites([site, typed], [0, 1], a_obj, np.full(2, 8), addr[:2], ivs)


def test_a_site_without_a_variable_takes_in_no_named_array():
    """CloverLeaf: a few small blocks libgfortran allocated for an `OPEN` were sampled; the
    stretch of heap around them held `celldx`, which the kernels read through their
    argument.  A site named by no variable (its name is its site) keeps its own samples
    and takes in none the code names."""
    site, _, ivs = _site_and_code_named()
    site.name = site.site = "initialise_@initialise.f90:73"
    named = objects.Obj("heap", ("points", "celldx"), 7, 0, 0, name="celldx", attribution=varattr.REGISTER)
    addr = np.array([0x100000 + 100, 0x100000 + 3000], dtype=np.uint64)
    a_obj = np.array([1, 1])
    assert not hot_objects.merge_into_sites([site, named], [0, 1], a_obj, np.full(2, 7), addr, ivs)
    assert a_obj.tolist() == [1, 1]
    site.name = "grid[]"  # a variable's array takes them in, as above
    assert hot_objects.merge_into_sites([site, named], [0, 1], a_obj, np.full(2, 7), addr, ivs)
    assert a_obj.tolist() == [0, 0]


def test_another_array_of_the_allocation_statement_stays_apart():
    """`allocate(q(n, m), w(n), flux(m, g))`: a sampled block of flux lies beside w, which
    the callee reads through its dummy argument `w` (named by the code).  w is another
    array of the statement that allocated flux, not an unsampled block of flux; a name the
    statement does not allocate (a callee's own name for flux) still joins flux."""
    site, _, ivs = _site_and_code_named()
    site.name, site.line_names = "flux", ("q", "w", "flux")
    w = objects.Obj("heap", ("var", "cell_sweep", "w"), 7, 0, 0, name="w", attribution=varattr.REGISTER)
    addr = np.array([0x100000 + 100, 0x100000 + 3000], dtype=np.uint64)
    a_obj = np.array([1, 1])
    assert not hot_objects.merge_into_sites([site, w], [0, 1], a_obj, np.full(2, 7), addr, ivs)
    assert a_obj.tolist() == [1, 1]
    w.name = "fx"  # the callee's dummy for flux
    assert hot_objects.merge_into_sites([site, w], [0, 1], a_obj, np.full(2, 7), addr, ivs)
    assert a_obj.tolist() == [0, 0]


def test_code_named_samples_just_past_a_sites_ends_join_it():
    # the first and the last nodes of a tree, allocated before the first sampled block
    # and after the last one: within SITE_STRETCH_ENDS periods they are the site's
    site, typed, ivs = _site_and_code_named(n_blocks=3)
    P = site.sample_period
    ends = hot_objects.SITE_STRETCH_ENDS * P
    last_end = 0x100000 + 2 * 1024 + 512
    addr = np.array([0x100000 - ends + 8, 0x100000 - ends - 8, last_end + ends - 8, last_end + ends + 8],
                    dtype=np.uint64)
    a_obj = np.array([1, 1, 1, 1])
    assert hot_objects.merge_into_sites([site, typed], [0, 1], a_obj, np.full(4, 7), addr, ivs)
    assert a_obj.tolist() == [0, 1, 0, 1]


def test_stretches_bridge_gaps_up_to_the_limit():
    # blocks of 512 bytes whose gaps are exactly the limit: one stretch; the second
    # stretch starts 64 periods on, more than the limit past the first
    gap = hot_objects.SITE_STRETCH_GAP * 4096 + 512
    site, _, ivs = _site_and_code_named(n_blocks=3, gap=gap)
    got = hot_objects._stretches(site, 0, ivs)
    ends = hot_objects.SITE_STRETCH_ENDS * 4096  # past the first and the last block
    assert [(lo - 0x100000, hi - 0x100000) for _, lo, hi, _ in got] == \
        [(-ends, 2 * gap + 512 + ends), (64 * 4096 - ends, 64 * 4096 + gap + 512 + ends)]
    # one byte more and every block stands alone
    site, _, ivs = _site_and_code_named(n_blocks=3, gap=gap + 1)
    assert len(hot_objects._stretches(site, 0, ivs)) == 5


@pytest.mark.parametrize("name, count, out", [
    ("m_rows[i]", 1000, "m_rows[]"), ("PowerMethod::m_rows[i]", 5, "PowerMethod::m_rows[]"),
    ("g[i][j]", 9, "g[][]"), ("a[i + 1].buf", 3, "a[].buf"), ("bufs[0]", 40, "bufs[0]"),
    ("m_rows[i]", 1, "m_rows[i]"), ("u", 7, "u"),
    # nested subscripts (a cell list indexed by a computed cell, seen in a particle code)
    ("Particles::cells[size_t(x[i] * ncell) % ncell]", 167750, "Particles::cells[]"),
    ("a[b[0]]", 3, "a[]"), ("t[0][idx[k]]", 3, "t[0][]"),
])
def test_element_names(name, count, out):
    assert objects.element_name(name, count) == out


OUTLINED = r"""
#include <vector>
struct Table {
    std::vector<std::vector<double>> rows;
    void build(long n);
};
void Table::build(long n)
{
    rows.resize(n);
#pragma omp parallel for
    for (long i = 0; i < n; i++)
        rows[i].push_back(1.0 * i);
}
int main() { Table t; t.build(100); return (int)t.rows[7][0] - 7; }
"""


def test_an_outlined_region_of_a_member_function(tmp_path):
    """g++ nests `_ZN5Table5buildEl._omp_fn.0` in Table::build's DWARF: its code is named
    after the member function and sees Table's members (`rows` is `Table::rows`)."""
    if shutil.which("g++") is None or shutil.which("nm") is None:
        pytest.skip("g++ or nm not installed")
    src = tmp_path / "t.cpp"
    src.write_text(OUTLINED)
    exe = tmp_path / "t"
    subprocess.run(["g++", "-g", "-O2", "-fopenmp", "-o", str(exe), str(src)], check=True, capture_output=True)
    syms = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    addr = next(int(s.split()[0], 16) for s in syms if s.endswith("._omp_fn.0"))
    info = symbols.elf_info(str(exe))
    at = info.inline_positions(addr + 4)
    assert at, "no scope at the outlined function"
    outer = at[-1]
    assert outer.function == "Table::build(long) [clone ._omp_fn.0]"
    assert outer.scope is not None and outer.scope.name == "Table" and "rows" in outer.scope.members


def test_row_pointers_stay_apart_from_the_rows_in_the_stretch():
    """`u[]` (the row pointers, allocated between the rows `u[][]`) lies in the rows'
    stretch but is another array: its samples stay its own."""
    site, _, ivs = _site_and_code_named()
    site.name = "lv->u[][]"
    rowptr = objects.Obj("heap", ("reg", "u[]"), 7, 0, 8, name="u[]", attribution=varattr.REGISTER)
    addr = np.array([0x100000 + 100, 0x100000 + 3000], dtype=np.uint64)
    a_obj = np.array([1, 1])
    assert not hot_objects.merge_into_sites([site, rowptr], [0, 1], a_obj, np.full(2, 7), addr, ivs)
    assert a_obj.tolist() == [1, 1]


@pytest.mark.parametrize("instances, threads, private", [
    # 4 buffers, each used by one of 2 threads: per-thread buffers
    ([0] * 10 + [1] * 10 + [2] * 10 + [3] * 10, [0] * 10 + [1] * 10 + [0] * 10 + [1] * 10, True),
    # the same with 1 sample in 40 from the other thread: still theirs
    ([0] * 10 + [1] * 10 + [2] * 10 + [3] * 10, [0] * 10 + [1] * 10 + [0] * 9 + [1] + [1] * 10, True),
    # per-step temporaries both threads use: shared
    ([k // 10 for k in range(40)], [k % 2 for k in range(40)], False),
    # one thread's buffers only: nothing says they are per-thread
    ([k // 10 for k in range(40)], [0] * 40, False),
    # one instance (a single allocation) partitioned between threads: an array, not buffers
    ([0] * 40, [k // 20 for k in range(40)], False),
    # too few samples to say
    ([0, 1, 0, 1], [0, 1, 0, 1], False),
    # the nodes of a tree both threads walk, each node sampled once: nothing says whose
    (list(range(40)), [k % 2 for k in range(40)], False),
    # ... and a few nodes sampled twice, by either thread: still nothing
    (list(range(36)) + [0, 1, 2, 3], [k % 2 for k in range(36)] + [0, 1, 0, 1], False),
    # per-thread buffers with single-sample instances beside them: the buffers decide
    ([0] * 10 + [1] * 10 + [2] * 10 + [3] * 10 + list(range(4, 14)),
     [0] * 10 + [1] * 10 + [0] * 10 + [1] * 10 + [k % 2 for k in range(10)], True),
])
def test_private_instances(instances, threads, private):
    assert objresult.private_instances(np.array(instances), np.array(threads)) is private
