"""`report prof.*` over the slices of one run (`record --switch-output`) and over ranks
(analyzer/merge.py): slices hold the same memory one after the other, ranks their own."""

import dataclasses

import numpy as np
from synth_analysis import BIG, PAGE, access_random, analysis, obj, threads

from numaprof.analyzer.merge import merge


def _part(pid, samples, pattern, ft_pages, pages_now, host="h"):
    acc = access_random(BIG, 2, n=samples, rng=np.random.default_rng(samples))
    o = obj("xs", pattern, acc, serial=True, n_threads=2)
    o = dataclasses.replace(o, first_touch=dataclasses.replace(o.first_touch, pages=ft_pages,
                                                               serial=ft_pages > 0),
                            pages_by_node=[pages_now])
    a = analysis([o], threads(2))
    a.profile = dataclasses.replace(a.profile, host=host, attached_pid=pid)
    return a


def test_the_slices_of_one_process_are_one_array():
    """The table read across three slices: one array of its size, its pattern from the
    slices that could tell it (the last had 40 samples: unknown), first-touched serially in
    the first slice, its pages where the last slice that saw any found them."""
    m = merge([_part(42, 3000, "random", BIG, BIG), _part(42, 2500, "random", 0, BIG),
               _part(42, 40, "unknown", 0, 0)])
    xs = m.objects[0]
    assert xs.size == BIG * PAGE and xs.count == 1
    assert xs.pattern == "random" and xs.samples == 3000 + 2500 + 40
    assert xs.first_touch.pages == BIG and xs.first_touch.serial
    assert xs.pages_by_node == [BIG]


def test_ranks_are_added_up():
    """Two ranks (two processes) each with its own table: sizes, counts and pages add up,
    and a rank whose pattern is unknown makes it mixed."""
    m = merge([_part(42, 3000, "random", BIG, BIG), _part(43, 40, "unknown", BIG, BIG)])
    xs = m.objects[0]
    assert xs.size == 2 * BIG * PAGE and xs.count == 2
    assert xs.pattern == "mixed:random/unknown"
    assert xs.pages_by_node == [2 * BIG] and xs.first_touch.pages == 2 * BIG


def test_profiles_without_an_attached_process_are_ranks():
    m = merge([_part(None, 3000, "random", BIG, BIG), _part(None, 3000, "random", BIG, BIG)])
    assert m.objects[0].size == 2 * BIG * PAGE
