"""Samples left on a stack are placed in the locals of frames seen at other samples
(analyzer/varattr.py, _observed) only where that frame can be live: a caller's local lies
above the sampled stack pointer (Rodinia's hotspot3D: the red-zone spills of its serial
solver, a leaf, were `str` of the input reader that had returned long before)."""

from types import SimpleNamespace

import numpy as np

from numaprof.analyzer import frames, varattr

SP0 = 0x7FFE0000F000  # the reader's stack pointer while it ran


def _reader_frame():
    s = frames.Slot(frames.DW_SP, 0x40, 256, frames.Variable("str", "readinput", "3D.c", 28, None), True)
    return frames.PcFrame("readinput", 1, (frames.DW_SP, 0x200), None, (s,), ())


def test_a_returned_frames_local_takes_no_later_sample():
    # sample 0: the reader itself (its frame seen: str at SP0 + 0x40 .. + 0x140);
    # sample 1: fgets inside the reader writing str (stack pointer below it);
    # sample 2: later, a leaf's red-zone spill at the same address, its stack pointer
    # above str's start: the reader has returned;
    # sample 3: another thread reading the address (its stack is elsewhere: no test)
    addr = np.array([SP0 + 0x60, SP0 + 0x80, SP0 + 0x80, SP0 + 0x80], dtype=np.int64)
    sp = np.array([SP0, SP0 - 0x300, SP0 + 0xF0, 0x7F0000001000], dtype=np.int64)
    tid = np.array([7, 7, 7, 8], dtype=np.int64)
    s = SimpleNamespace(time=np.array([10, 11, 5000, 12]), pid=np.full(4, 1))
    g = np.array([0, 1, 2, 3])
    pcf = [_reader_frame(), None, None, None]
    basis = {frames.DW_SP: (sp, np.ones(4, dtype=bool))}
    found = varattr._Found()
    varattr._observed(found, s, np.array([False, True, True, True]), pcf, g, basis, addr, tid, sp)
    placed = sorted(int(i) for part in found.parts for i in part[0])
    assert placed == [1, 3]
