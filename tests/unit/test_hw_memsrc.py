"""The data-source classification rule of the hardware backends, in Python.

This is the rule the analyzer needs for the samples table's ``data_src`` column.  It is
the rule of ``nmp_memsrc_classify()`` in collector/src/hw_decode.c (docs/backends.md,
"Classifying data_src"), and this file checks that the two agree: on the vectors below
and on a sweep of every mem_lvl level with HIT/MISS, every mem_lvl_num, the remote bit
and every hops value, run through the collector's own code (tests/hw_harness.py).  The
kernel-table vectors (L arch/x86/events/intel/ds.c, L arch/x86/events/amd/ibs.c) are in
collector/tests/test_hw_decode.c.

Rule: a MISS without HIT is "other" (the level that missed, not the source); a remote
DRAM level in ``mem_lvl`` is remote DRAM (the base PEBS table's 0x0b says REM_RAM1 with
lvl_num L3); then ``mem_lvl_num`` with the remote bit, where REMOTE with HOPS_0 is
another core of the same node; ``mem_lvl`` alone when ``mem_lvl_num`` is 0 (kernels
before it existed), NA (0xf) or a value without a meaning here (IO, UNC, MSC, ...).
"""

from __future__ import annotations

import numpy as np
import pytest
from hw_harness import build
from hw_harness import classify as c_classify

# mem_lvl bits (after the 5-bit shift)
LVL_NA, LVL_HIT, LVL_MISS = 0x01, 0x02, 0x04
LVL_L1, LVL_LFB, LVL_L2, LVL_L3 = 0x08, 0x10, 0x20, 0x40
LVL_LOC_RAM, LVL_REM_RAM1, LVL_REM_RAM2 = 0x80, 0x100, 0x200
LVL_REM_CCE1, LVL_REM_CCE2 = 0x400, 0x800
LVL_IO, LVL_UNC = 0x1000, 0x2000
# mem_lvl_num values
LN_L1, LN_L2, LN_L3, LN_L4, LN_CXL, LN_ANY_CACHE, LN_LFB, LN_RAM, LN_PMEM = (
    1, 2, 3, 4, 9, 0xB, 0xC, 0xD, 0xE)
HOPS_0 = 1  # remote core, same node

OTHER, L1, LFB, L2, L3, LOCAL_DRAM, REMOTE_DRAM, REMOTE_CACHE, PMEM_CXL, PEER_CACHE = range(10)
NAMES = ["other", "L1", "LFB", "L2", "L3", "local DRAM", "remote DRAM", "remote cache",
         "PMEM/CXL", "peer cache (same node)"]


def classify(data_src: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(class, hops, remote) for an array of perf_mem_data_src values (vectorised)."""
    ds = np.asarray(data_src, dtype=np.uint64)
    lvl = (ds >> np.uint64(5)) & np.uint64(0x3FFF)
    num = (ds >> np.uint64(33)) & np.uint64(0xF)
    rem_bit = ((ds >> np.uint64(37)) & np.uint64(1)).astype(bool)
    hops = ((ds >> np.uint64(43)) & np.uint64(7)).astype(np.int8)
    same_node = hops == HOPS_0
    remote = rem_bit & ~same_node
    cls = np.full(ds.shape, OTHER, dtype=np.int8)
    rem_flag = remote.copy()

    def has(mask):
        return (lvl & np.uint64(mask)) != 0

    decided = has(LVL_MISS) & ~has(LVL_HIT)  # the level that missed: source unknown
    hit = ~decided & has(LVL_REM_RAM1 | LVL_REM_RAM2)
    cls[hit] = REMOTE_DRAM
    rem_flag[hit] = True
    decided |= hit

    cache = np.isin(num, [LN_L1, LN_L2, LN_L3, LN_L4, LN_ANY_CACHE]) & ~decided
    ram = (num == LN_RAM) & ~decided
    cls[ram] = np.where(remote[ram], REMOTE_DRAM, LOCAL_DRAM)
    cls[np.isin(num, [LN_PMEM, LN_CXL]) & ~decided] = PMEM_CXL
    cls[(num == LN_LFB) & ~decided] = LFB
    cls[cache & remote] = REMOTE_CACHE
    cls[cache & rem_bit & same_node] = PEER_CACHE
    local_cache = cache & ~rem_bit
    cls[local_cache & (num == LN_L1)] = L1
    cls[local_cache & (num == LN_L2)] = L2
    cls[local_cache & ~np.isin(num, [LN_L1, LN_L2])] = L3  # L3, L4, ANY_CACHE of this node
    decided |= np.isin(num, [LN_RAM, LN_PMEM, LN_CXL, LN_LFB, LN_L1, LN_L2, LN_L3, LN_L4,
                             LN_ANY_CACHE])

    # mem_lvl fallback, first match wins
    fb = ~decided
    ibs_local = fb & has(LVL_L3) & has(LVL_REM_CCE1)  # IBS pre-Zen4, Linux 6.1-6.5
    cls[ibs_local] = L3
    fb &= ~ibs_local
    cce = fb & has(LVL_REM_CCE1 | LVL_REM_CCE2)
    cls[cce] = np.where(same_node[cce], PEER_CACHE, REMOTE_CACHE)
    rem_flag[cce] = ~same_node[cce]
    fb &= ~cce
    for mask, value in ((LVL_LOC_RAM, LOCAL_DRAM), (LVL_L3, L3), (LVL_L2, L2),
                        (LVL_LFB, LFB), (LVL_L1, L1)):
        hit = fb & has(mask)
        cls[hit] = value
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
    # The values issue 18's audit quoted: what the kernel writes for a Haswell-EP /
    # Broadwell-EP load (base PEBS table, DSE 0x0b and 0x00) and a Haswell store that
    # missed L1 (precise_datala_hsw); collector/tests/test_hw_decode.c rebuilds them
    # from the ds.c tables.
    ("HSW-EP DSE 0x0b: REM_RAM1 with lvl_num L3", 0x12668202042, REMOTE_DRAM, 0, True),
    ("HSW-EP DSE 0x00: L3 miss", 0x10668080082, OTHER, 0, False),
    ("HSW store, L1 miss", 0x1E05080184, OTHER, 0, False),
    ("REMOTE + HOPS_0, lvl_num L2", DS(lvl=0x22, lvlnum=2, remote=1, blk=1, hops=1),
     PEER_CACHE, 1, False),
    ("REMOTE + HOPS_0, lvl_num RAM", DS(lvl=2, lvlnum=0xD, remote=1, blk=1, hops=1),
     LOCAL_DRAM, 1, False),
    ("Zen4 near CCX (ibs.c)", DS(lvl=0x402, lvlnum=0xB, remote=1, hops=1), PEER_CACHE, 1,
     False),
    ("lvl_num NA, REM_CCE1 + HOPS_0", DS(lvl=0x402, lvlnum=0xF, hops=1), PEER_CACHE, 1, False),
    ("IBS 6.1 pre-Zen4 local-node cache", DS(lvl=0x442, lvlnum=0xF), L3, 0, False),
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


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build(tmp_path_factory.mktemp("hw_harness"))


def _sweep() -> np.ndarray:
    """Every mem_lvl level alone, with HIT, MISS, both or neither, and the pairs the
    kernels write (L3|REM_CCE1), times every mem_lvl_num, the remote bit and hops 0-4."""
    levels = [0] + [1 << b for b in range(3, 14)] + [LVL_L3 | LVL_REM_CCE1]
    flags = [0, LVL_HIT, LVL_MISS, LVL_HIT | LVL_MISS, LVL_NA]
    out = [DS(lvl=lv | fl, lvlnum=num, remote=rem, hops=hops)
           for lv in levels for fl in flags for num in range(16) for rem in (0, 1)
           for hops in range(5)]
    return np.array(out, dtype=np.uint64)


def test_python_rule_is_the_collectors_rule(harness):
    """The numpy rule and nmp_memsrc_classify() agree value for value."""
    rng = np.random.default_rng(18)
    ds = np.concatenate([_sweep(), np.array([v[1] for v in VECTORS], dtype=np.uint64),
                         rng.integers(0, 1 << 48, 20000, dtype=np.uint64)])
    cls, hops, remote = classify(ds)
    got = c_classify(harness, ds.tolist())
    assert len(got) == len(ds)
    mismatch = [(hex(int(d)), (int(a), int(b), int(r)), g) for d, a, b, r, g
                in zip(ds, cls, hops, remote, got, strict=True) if (a, b, r) != g]
    assert not mismatch, mismatch[:10]


@pytest.mark.parametrize("what,ds,want,hops,remote", VECTORS, ids=[v[0] for v in VECTORS])
def test_collector_classifies_vector(harness, what, ds, want, hops, remote):
    (cls, h, r), = c_classify(harness, [ds])
    assert (NAMES[cls], h, bool(r)) == (NAMES[want], hops, remote), what
