"""Arrays carved out of one allocation (analyzer/carved.py): a block whose samples the
code names by variables at disjoint offsets is split into one object per range; a
variable read all over the block, or ranges too thin to stand alone, leave it whole."""

import numpy as np

from numaprof.analyzer import attribution as att
from numaprof.analyzer import carved
from numaprof.analyzer.objects import Obj

N = 8_000_000  # bytes of each carved array


def _samples(spec, rng):
    """spec: (name, lo, hi, count) -> each sample's name (an index into the labels), the
    labels, offsets and sizes of uniformly spread samples."""
    labels = [s[0] for s in spec]
    names, offs = [], []
    for k, (_, lo, hi, count) in enumerate(spec):
        names += [k] * count
        offs.append(rng.integers(lo, hi - 8, count) // 8 * 8)
    off = np.concatenate(offs)
    return np.array(names), labels, off, np.full(len(off), 8)


def test_disjoint_variables_are_arrays_of_their_own():
    rng = np.random.default_rng(1)
    names, labels, off, size = _samples([("x", 0, N, 300), ("y", N, 2 * N, 500), ("perm", 2 * N, 3 * N, 60)], rng)
    parts = carved.plan(names, labels, off, size, 3 * N)
    assert [p.label for p in parts] == ["x", "y", "perm"]
    assert parts[0].start == 0 and parts[-1].end == 3 * N
    for p, q in zip(parts, parts[1:], strict=False):
        assert p.end == q.start and q.start % carved.ALIGN == 0
    # each boundary within a few sample spacings of the true one
    assert abs(parts[1].start - N) < 3 * N / 300 and abs(parts[2].start - 2 * N) < 3 * N / 60


def test_the_last_part_of_a_pool_ends_near_its_samples():
    """A pool allocator's block (YAKL's LinearAllocator: a few MiB of arrays at the start
    of a 3 GiB reserve): the last array ends about a sample spacing past its last sampled
    byte, not at the block's end; a block the arrays fill keeps its end."""
    rng = np.random.default_rng(7)
    names, labels, off, size = _samples([("x", 0, N, 300), ("y", N, 2 * N, 200)], rng)
    parts = carved.plan(names, labels, off, size, 3 << 30)
    assert [p.label for p in parts] == ["x", "y"]
    assert 2 * N - 3 * N / 200 < parts[-1].end <= 2 * N + 3 * N / 200, parts
    assert parts[-1].end % carved.ALIGN == 0
    parts = carved.plan(names, labels, off, size, 2 * N + 4096)
    assert parts[-1].end == 2 * N + 4096


def test_names_with_overlapping_ranges_are_one_array():
    rng = np.random.default_rng(2)
    names, labels, off, size = _samples([("x", 0, N, 400), ("s->x", N // 4, N // 2, 50), ("y", N, 2 * N, 300)], rng)
    parts = carved.plan(names, labels, off, size, 2 * N)
    assert [p.label for p in parts] == ["x", "y"]


def test_a_variable_over_the_whole_block_keeps_it_whole():
    rng = np.random.default_rng(3)
    names, labels, off, size = _samples([("x", 0, N, 300), ("y", N, 2 * N, 300), ("work", 0, 2 * N, 40)], rng)
    assert carved.plan(names, labels, off, size, 2 * N) == []
    # ... unless it is too rare to count (an initialisation outside the sampled loops)
    names, labels, off, size = _samples([("x", 0, N, 600), ("y", N, 2 * N, 600), ("work", 0, 2 * N, 10)], rng)
    assert [p.label for p in carved.plan(names, labels, off, size, 2 * N)] == ["x", "y"]


def test_too_few_samples_for_a_part_leave_its_bytes_to_its_neighbours():
    rng = np.random.default_rng(4)
    few = carved.RARE_PART_MIN_SAMPLES - 1
    names, labels, off, size = _samples([("x", 0, N, 400), ("z", N, N + N // 2, few), ("y", 2 * N, 3 * N, 400)],
                                        rng)
    parts = carved.plan(names, labels, off, size, 3 * N)
    assert [p.label for p in parts] == ["x", "y"]
    names, labels, off, size = _samples([("x", 0, N, 400), ("z", N, 2 * N, few)], rng)
    assert carved.plan(names, labels, off, size, 2 * N) == []
    # a common variable's range needs PART_MIN_SAMPLES: `z` overlapping `w` is one range
    names, labels, off, size = _samples([("x", 0, N, 400), ("z", N, 2 * N, 6), ("w", N, 2 * N, 3)], rng)
    assert [p.label for p in carved.plan(names, labels, off, size, 2 * N)] == []


def test_a_few_samples_of_a_rare_variable_clear_of_the_others_make_a_part():
    """The index array beside a gathered table gets a few of thousands of samples (the
    timer's go to the accesses that stall): 6 are enough for a range of its own, and the
    table's part no longer runs over it to the block's end."""
    rng = np.random.default_rng(6)
    names, labels, off, size = _samples([("t", 0, N, 2300), ("r", N, 2 * N, 370), ("col", 2 * N, 3 * N, 6)], rng)
    parts = carved.plan(names, labels, off, size, 3 * N)
    assert [p.label for p in parts] == ["t", "r", "col"]
    assert parts[1].end <= 2 * N + N // 2 and parts[2].end == 3 * N


def test_a_rare_variable_clear_of_the_others_is_an_array():
    """An index array read in order seldom misses the cache: under 2 % of the named
    samples, but in a range of its own."""
    rng = np.random.default_rng(5)
    names, labels, off, size = _samples([("t", 0, N, 1500), ("r", N, 2 * N, 200), ("col", 2 * N, 3 * N, 20)], rng)
    assert [p.label for p in carved.plan(names, labels, off, size, 3 * N)] == ["t", "r", "col"]


def test_the_split_moves_samples_and_every_instance():
    """Two instances of one block (allocated again), each split at the same offsets; the
    samples move to their part's interval, those of the later layers shift up."""
    objs = [Obj("heap", ("heap", 1, 7), 1, 0x10000, 3 * N, count=2, stack=7, alloc_rows=[0, 1])]
    heap = att.Intervals(np.array([1, 1]), np.array([0x10000, 0x10000 + 4 * N], dtype=np.uint64),
                         np.array([0x10000 + 3 * N, 0x10000 + 7 * N], dtype=np.uint64),
                         np.zeros(2, dtype=np.uint64), np.full(2, att.NEVER), np.array([0, 0]))
    plans = {0: [carved.Part("x", 0, N), carved.Part("y", N, 2 * N), carved.Part("z", 2 * N, 3 * N)]}
    addr = np.array([0x10000 + 10, 0x10000 + N + 10, 0x10000 + 4 * N + 2 * N + 10, 0x900000000],
                    dtype=np.uint64)
    a_obj = np.array([0, 0, 0, 5], dtype=np.int32)
    a_iv = np.array([0, 0, 1, 2], dtype=np.int32)  # the last one in a later layer
    out, added = carved._apply(objs, heap, plans, {0: np.array([0, 1])}, a_obj, a_iv, addr)
    assert added == 4 and len(out) == 6
    assert [o.part for o in objs] == ["x", "y", "z"] and objs[0].size == N
    assert objs[2].address == 0x10000 + 2 * N and objs[2].size == N
    assert list(out.end[:2]) == [0x10000 + N, 0x10000 + 5 * N]
    assert a_obj.tolist() == [0, 1, 2, 5]
    assert a_iv.tolist() == [0, 2, 5, 6]
    for k in range(3):
        s = a_iv[k]
        assert out.start[s] <= addr[k] < out.end[s] and out.obj[s] == a_obj[k]
