"""The border between two arrays of small blocks, moved to where the instructions that
access them put it (analyzer/borders.py)."""
from __future__ import annotations

import numpy as np
from helpers import objects_table

from numaprof.analyzer import attribution as att
from numaprof.analyzer import borders, objects

P = 4096  # sampling period of these tables
IP_R, IP_U, IP_BOTH = 0x401000, 0x402000, 0x403000


def _table(rows):
    """objects table from (addr, size, stack, t0) rows, all sampled, never freed."""
    return objects_table([(a, size, stack, t0, 0, P) for a, size, stack, t0 in rows])


def _located(t, samples):
    """(objs, heap intervals, a_iv, a_obj, a_ip, a_addr) for (addr, ip) samples at time 100."""
    objs: list = []
    iv = objects.heap_intervals(t, objs)
    addr = np.array([a for a, _ in samples], dtype=np.uint64)
    ip = np.array([i for _, i in samples], dtype=np.uint64)
    pid = np.full(len(addr), 7, dtype=np.int64)
    a_iv = att.locate_layers(pid, addr, np.full(len(addr), 100, dtype=np.uint64), [iv])
    a_obj = np.where(a_iv >= 0, iv.obj[np.maximum(a_iv, 0)], -1).astype(np.int32)
    return objs, iv, a_iv, a_obj, ip, addr


def _grid_then_next():
    # site 0 (`r` of one level): sampled rows at 0x10000, 0x11000, 0x12000; site 1 (`u`
    # of the next level, allocated after it): 0x15000, 0x16000.  The gap 0x12010..0x15000
    # is split halfway (0x13808).
    return _table([(0x10000, 16, 1, 1), (0x11000, 16, 1, 2), (0x12000, 16, 1, 3),
                   (0x15000, 16, 2, 4), (0x16000, 16, 2, 5)])


def test_split_gap_moves_to_where_the_instructions_say():
    sure = [(0x10800, IP_R), (0x11400, IP_R), (0x11800, IP_R), (0x15800, IP_U), (0x15c00, IP_U), (0x16000, IP_U)]
    # in the gap: r's loop up to 0x14400, the next array's loop from 0x14900
    gap = [(0x12400, IP_R), (0x13000, IP_R), (0x13f00, IP_R), (0x14400, IP_R),
           (0x14900, IP_U), (0x14a00, IP_U), (0x14c00, IP_U), (0x14e00, IP_U)]
    objs, iv, a_iv, a_obj, ip, addr = _located(_grid_then_next(), sure + gap)
    assert a_obj[len(sure):].tolist() == [0, 0, 1, 1, 1, 1, 1, 1]  # halfway: two of r's are u's
    moved = borders.settle(objs, iv, a_iv, a_obj, ip, addr)
    assert moved == 2
    assert a_obj[len(sure):].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    # the border lies between the last r access and the first u access, and the intervals
    # the samples point to hold them
    (a, b), = objs[0].iv_border.items()
    assert 0x14400 < int(iv.end[a]) == int(iv.start[b]) <= 0x14900
    for k in range(len(addr)):
        assert int(iv.start[a_iv[k]]) <= int(addr[k]) < int(iv.end[a_iv[k]])


def test_no_votes_or_shared_code_keep_halfway():
    # a routine called on both arrays (IP_BOTH) votes for neither; one stray vote is not
    # enough to move the border
    sure = [(0x10800, IP_BOTH), (0x11400, IP_BOTH), (0x15800, IP_BOTH), (0x15c00, IP_BOTH), (0x11800, IP_U),
            (0x15400, IP_U), (0x15900, IP_U), (0x16000, IP_U)]
    gap = [(0x12400, IP_BOTH), (0x13000, IP_BOTH), (0x13700, IP_U), (0x14000, IP_BOTH)]
    objs, iv, a_iv, a_obj, ip, addr = _located(_grid_then_next(), sure + gap)
    mid = int(iv.end[next(iter(objs[0].iv_border))])
    assert borders.settle(objs, iv, a_iv, a_obj, ip, addr) == 0
    assert int(iv.end[next(iter(objs[0].iv_border))]) == mid


def test_lone_block_is_a_small_array_when_its_code_says_so():
    # site 1 (`u` of a coarse level, one sampled row at 0x13000) between rows of site 0:
    # by default the gaps around it are site 0's, the row pointers' rule
    t = _table([(0x10000, 16, 1, 1), (0x11000, 16, 1, 2), (0x12000, 16, 1, 3),
                (0x13000, 16, 2, 4), (0x16000, 16, 1, 5), (0x17000, 16, 1, 6)])
    sure = [(0x10800, IP_R), (0x11400, IP_R), (0x16800, IP_R), (0x13008, IP_U), (0x13004, IP_U),
            (0x13000, IP_U)]
    # the smoother's accesses to `u` from 0x12c00 to 0x14400; r's beyond
    gap = [(0x12400, IP_R), (0x12c00, IP_U), (0x12e00, IP_U), (0x13400, IP_U), (0x14000, IP_U), (0x14400, IP_U),
           (0x15000, IP_R), (0x15800, IP_R)]
    objs, iv, a_iv, a_obj, ip, addr = _located(t, sure + gap)
    assert set(a_obj[len(sure):].tolist()) == {0}
    borders.settle(objs, iv, a_iv, a_obj, ip, addr)
    assert a_obj[len(sure):].tolist() == [0, 1, 1, 1, 1, 1, 0, 0]


def test_row_pointers_stay_inside_their_grid():
    # the same layout with row pointers: the only accesses near the lone block are the
    # grid's, so the gaps stay the grid's
    t = _table([(0x10000, 16, 1, 1), (0x11000, 16, 1, 2), (0x12000, 16, 1, 3),
                (0x13000, 16, 2, 4), (0x16000, 16, 1, 5), (0x17000, 16, 1, 6)])
    sure = [(0x10800, IP_R), (0x11400, IP_R), (0x16800, IP_R), (0x13008, IP_U), (0x13004, IP_U),
            (0x13000, IP_U)]
    gap = [(0x12400, IP_R), (0x12c00, IP_R), (0x13400, IP_R), (0x14000, IP_R), (0x15000, IP_R)]
    objs, iv, a_iv, a_obj, ip, addr = _located(t, sure + gap)
    assert borders.settle(objs, iv, a_iv, a_obj, ip, addr) == 0
    assert set(a_obj[len(sure):].tolist()) == {0}


def test_border_search():
    x = np.array([10, 20, 30, 40, 50], dtype=np.int64)
    # first site's votes below 35, second's above: the border moves into (30, 40]
    assert 30 < borders._border(x, np.array([1, 1, 1, -1, -1]), 0, 15, 60) <= 40
    # already right: stays
    assert borders._border(x, np.array([1, 1, 1, -1, -1]), 0, 35, 60) == 35
    # one vote better is not enough
    assert borders._border(x, np.array([1, -1, -1, -1, -1]), 0, 15, 60) == 15
    # no votes
    assert borders._border(x, np.zeros(5, dtype=np.int64), 0, 15, 60) == 15
    # all the second site's: the border goes to the start
    assert borders._border(x, np.array([-1, -1, -1, -1, -1]), 0, 35, 60) <= 10
