"""The data-source classification rule of the hardware backends, in Python.

This is the rule the analyzer needs for the samples table's ``data_src`` column; it
mirrors ``nmp_memsrc_classify()`` in collector/src/hw_decode.c and is checked here on the
same vectors as collector/tests/test_hw_decode.c.  Sources: ../shared/hw-sampling.md
section 2 (L include/uapi/linux/perf_event.h; the SKL vectors from
L arch/x86/events/intel/ds.c; the IBS values from L arch/x86/events/amd/ibs.c).

Rule: look at ``mem_lvl_num`` and ``mem_remote`` first; fall back to ``mem_lvl`` only when
``mem_lvl_num`` is 0 (kernels before it existed), NA (0xf) or a value without a meaning
here (IO, UNC, MSC, ...).
"""

from __future__ import annotations

import numpy as np
import pytest

# mem_lvl bits (after the 5-bit shift)
LVL_L1, LVL_LFB, LVL_L2, LVL_L3 = 0x08, 0x10, 0x20, 0x40
LVL_LOC_RAM, LVL_REM_RAM1, LVL_REM_RAM2 = 0x80, 0x100, 0x200
LVL_REM_CCE1, LVL_REM_CCE2 = 0x400, 0x800
# mem_lvl_num values
LN_L1, LN_L2, LN_L3, LN_L4, LN_CXL, LN_ANY_CACHE, LN_LFB, LN_RAM, LN_PMEM = (
    1, 2, 3, 4, 9, 0xB, 0xC, 0xD, 0xE)

OTHER, L1, LFB, L2, L3, LOCAL_DRAM, REMOTE_DRAM, REMOTE_CACHE, PMEM_CXL = range(9)
NAMES = ["other", "L1", "LFB", "L2", "L3", "local DRAM", "remote DRAM", "remote cache",
         "PMEM/CXL"]


def classify(data_src: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(class, hops, remote) for an array of perf_mem_data_src values (vectorised)."""
    ds = np.asarray(data_src, dtype=np.uint64)
    lvl = (ds >> np.uint64(5)) & np.uint64(0x3FFF)
    num = (ds >> np.uint64(33)) & np.uint64(0xF)
    remote = ((ds >> np.uint64(37)) & np.uint64(1)).astype(bool)
    hops = ((ds >> np.uint64(43)) & np.uint64(7)).astype(np.int8)
    cls = np.full(ds.shape, OTHER, dtype=np.int8)
    cache = np.isin(num, [LN_L1, LN_L2, LN_L3, LN_L4, LN_ANY_CACHE])
    decided = np.isin(num, [LN_RAM, LN_PMEM, LN_CXL, LN_LFB]) | cache
    cls[num == LN_RAM] = np.where(remote[num == LN_RAM], REMOTE_DRAM, LOCAL_DRAM)
    cls[(num == LN_PMEM) | (num == LN_CXL)] = PMEM_CXL
    cls[num == LN_LFB] = LFB
    cls[cache & remote] = REMOTE_CACHE
    local_cache = cache & ~remote
    cls[local_cache & (num == LN_L1)] = L1
    cls[local_cache & (num == LN_L2)] = L2
    cls[local_cache & ~np.isin(num, [LN_L1, LN_L2])] = L3  # L3, L4, ANY_CACHE of this node
    # mem_lvl fallback, first match wins
    fb = ~decided
    rem_flag = remote.copy()
    for mask, value, is_remote in (
        (LVL_REM_RAM1 | LVL_REM_RAM2, REMOTE_DRAM, True),
        (LVL_REM_CCE1 | LVL_REM_CCE2, REMOTE_CACHE, True),
        (LVL_LOC_RAM, LOCAL_DRAM, False),
        (LVL_L3, L3, False),
        (LVL_L2, L2, False),
        (LVL_LFB, LFB, False),
        (LVL_L1, L1, False),
    ):
        hit = fb & ((lvl & np.uint64(mask)) != 0)
        cls[hit] = value
        if is_remote:
            rem_flag[hit] = True
        fb &= ~hit
    return cls, hops, rem_flag


def DS(op=2, lvl=0, snoop=1, lock=1, tlb=1, lvlnum=0, remote=0, snoopx=0, blk=0, hops=0):
    return (op | lvl << 5 | snoop << 19 | lock << 24 | tlb << 26 | lvlnum << 33 |
            remote << 37 | snoopx << 38 | blk << 40 | hops << 43)


# (what, data_src, class, hops, remote) -- the table of test_classify() in test_hw_decode.c
VECTORS = [
    ("SKL DSE 0x0a local DRAM", 0x11A68201042, LOCAL_DRAM, 0, False),
    ("SKL DSE 0x0b remote DRAM (mem_lvl HIT only)", 0x13A68100042, REMOTE_DRAM, 0, True),
    ("SKL DSE 0x0c remote cache forward", 0x17668000042, REMOTE_CACHE, 0, True),
    ("AMD IBS 6.1 remote DRAM (mem_lvl only)", 0x1E29082042, REMOTE_DRAM, 0, True),
    ("L1 hit", DS(lvl=0x8 | 2, tlb=0xA, lvlnum=1, blk=1), L1, 0, False),
    ("LFB hit", DS(lvl=0x10 | 2, tlb=0xA, lvlnum=0xC, blk=1), LFB, 0, False),
    ("L2 hit", DS(lvl=0x20 | 2, tlb=0xA, lvlnum=2, blk=1), L2, 0, False),
    ("L3 hit", DS(lvl=0x40 | 2, tlb=0xA, lvlnum=3, blk=1), L3, 0, False),
    ("remote DRAM, remote socket", DS(lvl=0x102, lvlnum=0xD, remote=1, blk=1, hops=3),
     REMOTE_DRAM, 3, True),
    ("remote cache other socket", DS(lvl=2, snoop=0x10, lvlnum=3, remote=1, blk=1, hops=3),
     REMOTE_CACHE, 3, True),
    ("PMEM", DS(lvlnum=0xE, blk=1), PMEM_CXL, 0, False),
    ("CXL remote", DS(lvlnum=9, remote=1, blk=1, hops=2), PMEM_CXL, 2, True),
    ("pre-Zen4 IBS local-node cache", DS(lvl=0x40 | 0x400 | 2, lvlnum=0xB, hops=1), L3, 1,
     False),
    ("old kernel LOC_RAM", DS(lvl=0x82), LOCAL_DRAM, 0, False),
    ("old kernel REM_RAM2", DS(lvl=0x202), REMOTE_DRAM, 0, True),
    ("lvl_num NA, REM_CCE2", DS(lvl=0x802, lvlnum=0xF), REMOTE_CACHE, 0, True),
    ("unknown lvl_num 6, mem_lvl L2", DS(lvl=0x22, lvlnum=6), L2, 0, False),
    ("HSW store L1 hit", DS(op=4, lvl=0xA), L1, 0, False),
    ("PERF_MEM_NA", 0x1E05080021, OTHER, 0, False),
    ("uncached", DS(lvl=0x2002, lvlnum=8), OTHER, 0, False),
    ("IO", DS(lvl=0x1002, lvlnum=0xA), OTHER, 0, False),
    ("zero", 0, OTHER, 0, False),
]


@pytest.mark.parametrize("what,ds,want,hops,remote", VECTORS, ids=[v[0] for v in VECTORS])
def test_classify_vector(what, ds, want, hops, remote):
    cls, h, r = classify(np.array([ds], dtype=np.uint64))
    assert (NAMES[cls[0]], int(h[0]), bool(r[0])) == (NAMES[want], hops, remote), what


def test_classify_is_vectorised_and_order_independent():
    ds = np.array([v[1] for v in VECTORS], dtype=np.uint64)
    cls, hops, remote = classify(ds)
    assert list(cls) == [v[2] for v in VECTORS]
    assert list(hops) == [v[3] for v in VECTORS]
    rev, _, _ = classify(ds[::-1])
    assert list(rev[::-1]) == list(cls)


def test_remote_dram_needs_lvl_num_first():
    """SKL remote DRAM has only HIT in mem_lvl: a mem_lvl-only rule calls it 'other'."""
    skl_remote = 0x13A68100042
    lvl = (skl_remote >> 5) & 0x3FFF
    assert lvl & (LVL_REM_RAM1 | LVL_REM_RAM2 | LVL_LOC_RAM) == 0
    assert classify(np.array([skl_remote], dtype=np.uint64))[0][0] == REMOTE_DRAM
