"""`record -p`: the heap read when numaprof attached and again when it stopped
(analyzer/attach.py `across`): what lived all along, what was released, what was
allocated while recording, and where the allocator reused memory."""
from __future__ import annotations

from numaprof.analyzer.attach import FoundObject, Snapshot, across

T0, T1 = 1_000, 9_000  # the two walks (ns)
HALF = (T0 + T1) // 2


def _snap(taken, *objs, status="ok"):
    return Snapshot(objects=[FoundObject(a, s, "brk", h) for a, s, h in objs],
                    info={"status": status}, taken=taken)


def _rows(found):
    return sorted((o.addr, o.size, o.holder, o.time, o.free_time) for o in found)


def test_lived_released_allocated_and_reused():
    start = _snap(T0, (0x1000, 0x800, "a"), (0x4000, 0x800, "gone"), (0x8000, 0x1000, ""),
                  (0x20000, 0x2000, "grown"))
    end = _snap(T1, (0x1000, 0x800, "a"), (0x8000, 0x1000, "named_late"), (0x10000, 0x800, "late"),
                (0x20000, 0x4000, "grown"))
    got = _rows(across(start, end))
    assert got == [
        (0x1000, 0x800, "a", 0, 0),  # all along
        (0x4000, 0x800, "gone", 0, T1),  # released while recording: until the end's walk
        (0x8000, 0x1000, "named_late", 0, 0),  # all along, named by the end's walk
        (0x10000, 0x800, "late", T0, 0),  # allocated while recording: from the start's walk
        (0x20000, 0x2000, "grown", 0, HALF),  # grown in place: both change hands halfway
        (0x20000, 0x4000, "grown", HALF, 0),
    ]
    assert start.info["at_end"] == {"status": "ok", "allocated": 2, "released": 2}


def test_one_new_chunk_over_two_released():
    start = _snap(T0, (0x1000, 0x1000, "p"), (0x2000, 0x1000, "q"), (0x9000, 0x1000, "r"))
    end = _snap(T1, (0x1800, 0x1000, "n"))
    assert _rows(across(start, end)) == [
        (0x1000, 0x1000, "p", 0, HALF), (0x1800, 0x1000, "n", HALF, 0),
        (0x2000, 0x1000, "q", 0, HALF), (0x9000, 0x1000, "r", 0, T1)]


def test_without_a_usable_end_walk_the_start_stands():
    start = _snap(T0, (0x1000, 0x800, "a"))
    assert _rows(across(start, None)) == [(0x1000, 0x800, "a", 0, 0)]
    for status in ("gone", "partial", "refused"):
        assert _rows(across(start, _snap(T1, status=status))) == [(0x1000, 0x800, "a", 0, 0)]
    assert "at_end" not in start.info
