"""Summaries of short-lived blocks (objects rows with an extent: docs/profile-format.md,
docs/analyzer.md): they count in their site, hold no address as a block, and take the
samples in their range that no recorded block holds."""
from __future__ import annotations

import numpy as np
from helpers import objects_table

from numaprof.analyzer import attribution as att
from numaprof.analyzer import objects

NEVER = att.NEVER


def _where(ivs, addr, time):
    loc = att.locate(np.full(len(addr), 7), np.array(addr, dtype=np.uint64),
                     np.array(time, dtype=np.uint64), ivs)
    return [int(ivs.obj[k]) if k >= 0 else -1 for k in loc]


def test_a_summary_counts_in_its_site_and_holds_its_range_below_the_blocks():
    # site 1: one recorded block of 256 KiB at 0x100000 (live 10..20) and a summary of
    # 5000 short-lived blocks between 0x100000 and 0x180000 (50..900); site 2: a block
    # inside that range, recorded, live 0..1000
    t = objects_table([(0x100000, 0x40000, 1, 10, 20, 0, 1, 0),
                (0x100000, 0x40000, 1, 50, 900, 0, 5000, 0x80000),
                (0x150000, 0x1000, 2, 0, 1000, 0, 1, 0)])
    objs: list = []
    heap = objects.heap_intervals(t, objs)
    short = objects.short_intervals(t, objs)
    assert len(objs) == 2 and objs[0].count == 5001 and objs[1].count == 1
    assert objs[0].attribution == "address"  # a recorded block of its own too
    # the summary is no block: only the recorded ones match by address
    assert _where(heap, [0x100010, 0x100010, 0x150010], [15, 60, 60]) == [0, -1, 1]
    # its range, while the site allocated there
    assert len(short) == 1
    assert _where(short, [0x100010, 0x17FFFF, 0x180000, 0x100010], [60, 60, 60, 901]) == [0, 0, -1, -1]


def test_a_site_known_only_from_summaries():
    t = objects_table([(0x200000, 0x2000, 3, 5, 50, 0, 300, 0x10000),
                (0x220000, 0x2000, 3, 60, 90, 0, 200, 0x4000)])
    objs: list = []
    objects.heap_intervals(t, objs)
    short = objects.short_intervals(t, objs)
    assert len(objs) == 1 and objs[0].count == 500 and objs[0].attribution == "short_lived"
    assert _where(short, [0x20F000, 0x221000, 0x221000], [40, 70, 40]) == [0, 0, -1]


def test_sampled_summaries_count_the_allocations_they_stand_for():
    # 100 sampled small blocks whose written size makes them stand for 100 x 4096 / 512
    t = objects_table([(0x300000, 512, 4, 5, 50, 4096, 100, 0x8000),
                (0x310000, 1024, 4, 6, NEVER, 4096, 1, 0)])
    objs: list = []
    objects.heap_intervals(t, objs)
    assert objs[0].count == 800 + 4 and objs[0].sample_period == 4096
    # the size: the most bytes live at once, from the recorded blocks only
    assert objs[0].size == 4096


def test_profiles_without_the_columns_have_no_summaries():
    t = objects_table([(0x100000, 0x40000, 1, 10, 20, 0, 1, 0)])
    del t["extent"], t["lifetime"]
    objs: list = []
    assert len(objects.short_intervals(t, objs)) == 0
