"""Arrays of many small allocations, found from a sample of them (analyzer/objects.py,
docs/analyzer.md "Arrays of many small allocations"): the sites' estimated sizes, the
gaps between sampled blocks, the logical array's offsets and the search in a reused
address range."""
from __future__ import annotations

import numpy as np
from helpers import objects_table

from numaprof.analyzer import attribution as att
from numaprof.analyzer import objects, objresult

P = 4096  # sampling period of these tables
NEVER = att.NEVER


def _fills(iv, n_exact):
    """The fills that hold addresses (the empty ones are borders.py's to widen)."""
    return sorted((int(iv.start[k]), int(iv.end[k]), int(iv.t0[k]), int(iv.t1[k]), int(iv.obj[k]))
                  for k in range(n_exact, len(iv)) if iv.end[k] > iv.start[k])


def test_gaps_between_blocks_of_one_site_are_its():
    # site 1: sampled rows of 100 bytes at 0x1000, 0x2000, 0x3000 (live 10..90, 20..80,
    # 30..70); 0x9000 is more than four periods past 0x3000 + 100
    t = objects_table([(0x1000, 100, 1, 10, 90, P), (0x2000, 100, 1, 20, 80, P),
                (0x3000, 100, 1, 30, 70, P), (0x3064 + 4 * P + 1, 100, 1, 30, 70, P)])
    objs: list = []
    iv = objects.heap_intervals(t, objs)
    assert len(objs) == 1 and objs[0].attribution == "allocation_sample"
    # each gap from the first of its two allocations to the first of their releases
    assert _fills(iv, 4) == [(0x1064, 0x2000, 10, 80, 0), (0x2064, 0x3000, 20, 70, 0)]


def test_estimates():
    # 4 sampled rows of 1024 bytes, all live at once: 4 x P bytes, 4 x P / 1024 rows
    t = objects_table([(0x1000 * (k + 1), 1024, 1, 10 + k, NEVER, P) for k in range(4)])
    objs: list = []
    objects.heap_intervals(t, objs)
    assert objs[0].size == 4 * P and objs[0].count == 16 and objs[0].sample_period == P
    # released one by one before the next: at most one live
    t = objects_table([(0x1000, 1024, 1, 10 * k, 10 * k + 5, P) for k in range(1, 5)])
    objs = []
    objects.heap_intervals(t, objs)
    assert objs[0].size == P


def test_gap_between_two_sites():
    # sites 1 and 2 meet: 1, 1, 2, 2 -> the gap between the second 1 and the first 2
    # is split halfway
    t = objects_table([(0x1000, 16, 1, 1, NEVER, P), (0x2000, 16, 1, 2, NEVER, P),
                (0x3010, 16, 2, 3, NEVER, P), (0x4000, 16, 2, 4, NEVER, P)])
    objs: list = []
    iv = objects.heap_intervals(t, objs)
    mid = 0x2010 + (0x3010 - 0x2010) // 2
    assert _fills(iv, 4) == [(0x1010, 0x2000, 1, NEVER, 0), (0x2010, mid, 2, NEVER, 0),
                             (mid, 0x3010, 2, NEVER, 1), (0x3020, 0x4000, 3, NEVER, 1)]


def test_a_lone_block_inside_another_site():
    # the row pointers g[i] (site 2) between the rows of a grid (site 1): both gaps
    # around it are the grid's
    t = objects_table([(0x1000, 16, 1, 1, NEVER, P), (0x2000, 16, 2, 2, NEVER, P),
                (0x3000, 16, 1, 3, NEVER, P)])
    objs: list = []
    iv = objects.heap_intervals(t, objs)
    assert _fills(iv, 3) == [(0x1010, 0x2000, 1, NEVER, 0), (0x2010, 0x3000, 2, NEVER, 0)]


def test_blocks_not_alive_together_bound_no_gap():
    # a per-step temporary: the same addresses in steps 1 and 2; step 2's second block
    # is not the neighbour of step 1's first
    t = objects_table([(0x1000, 16, 1, 10, 20, P), (0x2000, 16, 1, 30, 40, P),
                (0x1000, 16, 1, 30, 40, P), (0x2000, 16, 1, 10, 20, P)])
    objs: list = []
    iv = objects.heap_intervals(t, objs)
    assert _fills(iv, 4) == [(0x1010, 0x2000, 10, 20, 0), (0x1010, 0x2000, 30, 40, 0)]


def test_tracked_allocations_alone_make_no_gaps():
    t = objects_table([(0x1000, 100000, 1, 1, NEVER, 0), (0x30000, 100000, 1, 2, NEVER, 0)])
    objs: list = []
    iv = objects.heap_intervals(t, objs)
    assert len(iv) == 2 and objs[0].sample_period == 0 and objs[0].attribution == "address"
    assert objs[0].size == 100000 and objs[0].count == 2


def test_logical_offsets():
    # blocks [100, 200) and [300, 350), a gap [200, 260) overlapping nothing else, and
    # [120, 180) inside the first (another time): merged, laid end to end
    start = np.array([100, 300, 200, 120], dtype=np.uint64)
    end = np.array([200, 350, 260, 180], dtype=np.uint64)
    off, total = objresult.logical_offsets(np.array([100, 199, 259, 300, 349], dtype=np.uint64), start, end)
    assert total == 160 + 50
    assert off.tolist() == [0, 99, 159, 160, 209]


def test_search_in_a_large_reused_range():
    """Many intervals over one address range at different times (a per-step temporary
    of many blocks): a sample finds the one alive at its time even when hundreds were
    allocated after that one and before the sample, elsewhere in the range."""
    n_steps, per_step, size = 20, 300, 1000
    starts, t0, t1 = [], [], []
    for s in range(n_steps):
        for k in range(per_step):
            starts.append(k * size)
            t0.append(s * 10_000 + k)
            t1.append(s * 10_000 + 5_000)
    starts = np.array(starts, dtype=np.uint64)
    n = len(starts)
    iv = att.Intervals(np.zeros(n, dtype=np.int64), starts, starts + np.uint64(size),
                       np.array(t0, dtype=np.uint64), np.array(t1, dtype=np.uint64),
                       np.arange(n, dtype=np.int64))
    # in step 7, at block 3 (allocated long before blocks 4..299 of the same step)
    addr = np.array([3 * size + 10, 250 * size], dtype=np.uint64)
    time = np.array([7 * 10_000 + 4_000, 7 * 10_000 + 4_000], dtype=np.uint64)
    got = att.locate(np.zeros(2, dtype=np.int64), addr, time, iv)
    assert got.tolist() == [7 * per_step + 3, 7 * per_step + 250]
    # between steps, nothing is alive
    assert att.locate(np.zeros(1, dtype=np.int64), addr[:1], np.array([7 * 10_000 + 6_000], dtype=np.uint64),
                      iv).tolist() == [-1]


def test_instances_are_bursts_of_one_site():
    # site 1 (a grid) in two bursts, site 2 (another grid) allocated between them;
    # sites 3 and 4 finely interleaved (a[i], b[i] in one loop): one instance each
    sites = [1] * 5 + [2] * 6 + [1] * 5 + [3, 4] * 6
    n = len(sites)
    obj = np.array(sites, dtype=np.int64)
    got = objects._instances(np.zeros(n, dtype=np.int64), obj, np.ones(n, dtype=bool),
                             np.arange(n, dtype=np.uint64))
    assert got[:5].tolist() == [0] * 5 and got[11:16].tolist() == [1] * 5
    assert set(got[5:11].tolist()) == {0} and set(got[16:].tolist()) == {0}
    # not sampled: no instance
    sampled = np.ones(n, dtype=bool)
    sampled[0] = False
    assert objects._instances(np.zeros(n, dtype=np.int64), obj, sampled, np.arange(n, dtype=np.uint64))[0] == -1


def test_interleaving_by_bytes_is_one_instance():
    """Two sites allocated in one loop (`vals[i] = new double[27]; inds[i] = new
    int[27]`, as HPCG builds its matrix rows), their blocks sampled in proportion to
    their bytes (2:1): runs of the larger site's sampled blocks between two of the
    smaller's are often 4 or longer, and still one instance each.  The same sites
    built again after a burst of another site's blocks are a second instance."""
    rng = np.random.default_rng(3)
    loop = np.where(rng.random(300) < 2 / 3, 1, 2)  # which site each sampled block is
    assert max(len(r) for r in "".join(map(str, loop)).split("2")) >= 6  # long runs occur
    sites = np.r_[loop, [3] * 150, loop]
    n = len(sites)
    got = objects._instances(np.zeros(n, dtype=np.int64), sites.astype(np.int64), np.ones(n, dtype=bool),
                             np.arange(n, dtype=np.uint64))
    for site in (1, 2):
        first, second = got[:300][loop == site], got[450:][loop == site]
        assert set(first.tolist()) == {0} and set(second.tolist()) == {1}, site
    assert set(got[300:450].tolist()) == {0}


def test_each_instance_is_its_own_logical_array():
    """Two bursts of one site far apart in the heap: a sample's position is within its
    own instance (as a tracked allocation's is within its allocation)."""
    rows = [(0x10000 + k * 0x1000, 0x800, 1, 1 + k, NEVER, P) for k in range(5)]
    rows += [(0x90000 + k * 0x1000, 0x800, 2, 10 + k, NEVER, P) for k in range(5)]
    rows += [(0x200000 + k * 0x1000, 0x800, 1, 20 + k, NEVER, P) for k in range(5)]
    objs: list = []
    iv = objects.heap_intervals(objects_table(rows), objs)
    o = objs[0]
    members = np.flatnonzero(iv.obj == 0)
    assert sorted(set(o.iv_instance[int(k)] for k in members)) == [0, 1]
    # the first byte of each burst is at position 0 of its instance
    addr = np.array([0x10000, 0x200000, 0x204000 + 0x7FF], dtype=np.uint64)
    a_iv = np.array([0, 10, 14], dtype=np.int64)
    pos, pg, inst, n_pages = objresult.instance_positions(o, addr, a_iv, members, iv, 4096)
    assert inst.tolist() == [0, 1, 1]
    assert pos[0] == 0.0 and pos[1] == 0.0 and pos[2] > 0.99
    assert n_pages == -(-(4 * 0x1000 + 0x800) // 4096)
