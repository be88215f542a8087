"""The glibc heap walker on heap images built byte by byte (analyzer/heapwalk.py).

Each image lays out chunks as glibc's malloc.c and arena.c do on x86-64 (headers,
PREV_INUSE, footers of free chunks, top, heap_info, fenceposts, mmapped chunks of both
layouts, tcache lists); the tests check what the walker finds, and that a damaged or
foreign heap, or a read that fails, stops the walk cleanly with a reason.
"""

from __future__ import annotations

import errno
import struct

import pytest

from numaprof.analyzer import heapwalk as hw

PAGE = 4096
P, M, A = hw.PREV_INUSE, hw.IS_MMAPPED, hw.NON_MAIN_ARENA


class Image:
    """A sparse address space: segments of bytes; a read past a segment's end is short,
    a read outside any segment fails like /proc/PID/mem (EIO)."""

    def __init__(self):
        self.segs: dict[int, bytearray] = {}
        self.reads = 0

    def add(self, start: int, size: int) -> bytearray:
        self.segs[start] = bytearray(size)
        return self.segs[start]

    def put(self, addr: int, data: bytes) -> None:
        for s, b in self.segs.items():
            if s <= addr and addr + len(data) <= s + len(b):
                b[addr - s:addr - s + len(data)] = data
                return
        raise AssertionError(f"no segment for {addr:#x}")

    def words(self, addr: int, *values: int) -> None:
        self.put(addr, struct.pack(f"<{len(values)}Q", *values))

    def read(self, addr: int, size: int) -> bytes:
        self.reads += 1
        for s, b in self.segs.items():
            if s <= addr < s + len(b):
                return bytes(b[addr - s:addr - s + size])
        raise OSError(errno.EIO, "Input/output error")


def lay_arena(img: Image, first: int, end: int, chunks: list[tuple[int, bool]], flags: int = 0) -> list[hw.Chunk]:
    """Writes chunks (size, in use) from ``first`` and a top chunk up to ``end``, as glibc
    leaves them: PREV_INUSE from the chunk before, a free chunk's size in the next
    one's prev_size; ``flags`` (NON_MAIN_ARENA) on the chunks in use.  Returns what the
    walker should find."""
    pos, prev_free, prev_size = first, False, 0
    out = []
    where = "arena" if flags & A else "brk"
    for size, used in chunks:
        img.words(pos, prev_size if prev_free else 0, size | (0 if prev_free else P) | (flags if used else 0))
        out.append(hw.Chunk(pos + 16, size - 8, used, where))
        prev_free, prev_size = not used, size
        pos += size
    assert pos < end
    img.words(pos, prev_size if prev_free else 0, (end - pos) | (0 if prev_free else P))
    return out


def walk(img: Image, areas: list[tuple[int, int, str]]) -> hw.HeapWalk:
    return hw.walk(img, [hw.Area(s, e, "rw-p", path) for s, e, path in areas], PAGE)


HEAP = 0x5555_0000_0000


def test_main_heap_chunks_in_use_and_free():
    img = Image()
    img.add(HEAP, 0x80000)
    want = lay_arena(img, HEAP, HEAP + 0x80000,
                     [(0x290, True), (0x18010, True), (0x14000, False), (0x12010, True), (0x30, True),
                      (0x1810, True)])
    w = walk(img, [(HEAP, HEAP + 0x80000, "[heap]")])
    assert w.problems() == []
    assert w.chunks() == want
    assert [c.in_use for c in w.chunks()] == [True, True, False, True, True, True]
    assert w.chunks()[1].addr == HEAP + 0x290 + 16 and w.chunks()[1].size == 0x18010 - 8


def test_free_chunk_before_top_is_a_damaged_heap():
    # glibc merges a free chunk into the top chunk; one before it says the walk is wrong
    img = Image()
    img.add(HEAP, 0x10000)
    lay_arena(img, HEAP, HEAP + 0x10000, [(0x290, True), (0x1000, False)])
    w = walk(img, [(HEAP, HEAP + 0x10000, "[heap]")])
    assert w.chunks() == []
    assert "top chunk" in w.regions[0].problem


@pytest.mark.parametrize("damage, says", [
    (lambda img: img.words(HEAP + 0x290 + 8, 0x18018 | P), "not a multiple of 16"),
    (lambda img: img.words(HEAP + 0x290 + 8, 0 | P), "has size 0"),
    (lambda img: img.words(HEAP + 0x290 + 8, (1 << 60) | P), "runs past the end"),
    (lambda img: img.words(HEAP + 0x290 + 8, 0x10 | P | M), "flagged mmapped"),
    (lambda img: img.words(HEAP + 0x290 + 8, 0x18010 | P | A), "NON_MAIN_ARENA"),
    (lambda img: img.words(HEAP + 0x290 + 0x18010, 0x12345), "prev_size"),
    (lambda img: img.words(HEAP + 0x290 + 8, 0x10 | P), "another sbrk user"),
    (lambda img: img.words(HEAP + 8, 0x290), "the first chunk"),
])
def test_damaged_sizes_stop_the_walk_with_a_reason(damage, says):
    img = Image()
    img.add(HEAP, 0x80000)
    lay_arena(img, HEAP, HEAP + 0x80000, [(0x290, True), (0x18010, False), (0x12010, True)])
    damage(img)
    w = walk(img, [(HEAP, HEAP + 0x80000, "[heap]")])
    assert w.chunks() == []  # nothing of a walk that went wrong is kept
    assert says in w.regions[0].problem
    assert img.reads < 1000  # stopped, not scanning on


def test_a_changing_heap_is_read_again():
    img = Image()
    img.add(HEAP, 0x40000)
    want = lay_arena(img, HEAP, HEAP + 0x40000, [(0x290, True), (0x18010, True)])
    good = bytes(img.segs[HEAP][0x298:0x2a0])
    img.words(HEAP + 0x298, 0x7)  # damaged while the walker reads it the first time
    real_read, calls = img.read, []

    def read(addr, size):
        data = real_read(addr, size)
        calls.append(addr)
        if len(calls) == 1:
            img.put(HEAP + 0x298, good)  # the program finished its update
        return data
    img.read = read
    w = walk(img, [(HEAP, HEAP + 0x40000, "[heap]")])
    assert w.problems() == [] and w.chunks() == want


def test_a_foreign_allocator_in_the_brk_area_is_not_walked():
    # jemalloc-like: the area starts with the allocator's own metadata (counters and
    # pointers), no glibc chunk headers
    img = Image()
    img.add(HEAP, 0x40000)
    for k in range(0, 0x1000, 16):
        img.words(HEAP + k, HEAP + 0x1000 + 8 * k, k // 16 + 3)
    w = walk(img, [(HEAP, HEAP + 0x40000, "[heap]")])
    assert w.chunks() == []
    assert w.regions[0].problem


def test_random_bytes_never_crash_or_loop():
    import random
    rnd = random.Random(7)
    for _ in range(200):
        img = Image()
        size = rnd.choice([0x1000, 0x4000, 0x20000])
        img.add(HEAP, size)
        img.put(HEAP, bytes(rnd.getrandbits(8) for _ in range(256)))
        for _k in range(rnd.randrange(0, 40)):  # plausible headers here and there
            off = rnd.randrange(0, size - 16) & ~15
            img.words(off + HEAP, rnd.choice([0, 0x20, 0x290]), rnd.choice([0x21, 0x291, 0x1001, 0x10, 0x3]))
        w = walk(img, [(HEAP, HEAP + size, "[heap]"), (HEAP + 0x100000, HEAP + 0x100000 + size, "")])
        assert img.reads < 20000
        for c in w.chunks():
            assert HEAP <= c.addr < HEAP + size + 0x100000


def test_truncated_read_stops_cleanly():
    # the area says 0x40000 but only 0x20000 bytes can be read (unmapped under the walk)
    img = Image()
    img.add(HEAP, 0x40000)
    lay_arena(img, HEAP, HEAP + 0x40000, [(0x290, True), (0x18010, True), (0x14000, True)])
    img.segs[HEAP] = img.segs[HEAP][:0x18000]
    w = walk(img, [(HEAP, HEAP + 0x40000, "[heap]")])
    assert w.chunks() == []
    assert "cannot read memory" in w.regions[0].problem


def test_chunk_budget_bounds_the_walk(monkeypatch):
    """A heap of more chunks than the walker takes: those before the limit are kept,
    the rest is said to be unsplit."""
    monkeypatch.setattr(hw, "MAX_CHUNKS", 50)
    img = Image()
    img.add(HEAP, 0x10000)
    want = lay_arena(img, HEAP, HEAP + 0x10000, [(0x40, True)] * 200)
    w = walk(img, [(HEAP, HEAP + 0x10000, "[heap]")])
    assert w.chunks() == want[:49]
    assert "more than 50 chunks" in w.regions[0].problem


MMAP = 0x7F00_0000_0000


@pytest.mark.parametrize("new_layout", [False, True], ids=["glibc<=2.42", "glibc>=2.43"])
def test_mmapped_chunks_merged_into_one_area(new_layout):
    """Two mapped chunks side by side (one line of /proc/PID/maps), after a thread stack
    merged with them, and one from posix_memalign(4096): each found, with its size."""
    img = Image()
    stack = 8 * PAGE
    lens = [40 * PAGE, 10 * PAGE, 6 * PAGE]
    total = stack + sum(lens)
    img.add(MMAP, total)
    img.words(MMAP + 8, 0x7F00_1234_5678)  # stack contents: no chunk header
    base, want = MMAP + stack, []
    for k, length in enumerate(lens):
        size_field = length - 16 if new_layout else length
        img.words(base, 0, size_field | M)
        if k == 2:  # memalign(4096): the aligned chunk further on, prev_size = its offset
            user = base + PAGE + (0 if new_layout else 0)
            off = user - 16 - base
            img.words(user - 16, off, (size_field - off) | M)
            want.append(hw.Chunk(user, (size_field - off) - (8 if new_layout else 16), True, "mmap"))
        else:
            want.append(hw.Chunk(base + 16, size_field - (8 if new_layout else 16), True, "mmap"))
        base += length
    w = walk(img, [(MMAP, MMAP + total, "")])
    assert w.chunks() == want
    assert [r.kind for r in w.regions] == ["mmapped chunks"]


def test_mmapped_header_that_overruns_its_area_is_not_a_chunk():
    img = Image()
    img.add(MMAP, 4 * PAGE)
    img.words(MMAP, 0, (64 * PAGE) | M)
    assert walk(img, [(MMAP, MMAP + 4 * PAGE, "")]).chunks() == []


ARENA = 0x7F10_0000_0000  # aligned to HEAP_MAX_SIZE


@pytest.mark.parametrize("info_size, state_size", [(48, 2200), (32, 2200), (32, 2192)],
                         ids=["glibc>=2.35", "glibc2.27-2.34", "glibc<2.27"])
def test_arena_heaps_with_their_heap_info(info_size, state_size):
    """A thread's arena: its first heap (heap_info, malloc_state, chunks flagged
    NON_MAIN_ARENA, top) and the heap it gave up before (fenceposts at its end)."""
    img = Image()
    size = 0x40000
    old = ARENA + hw.HEAP_MAX_SIZE
    img.add(ARENA, size)
    img.add(old, size)
    ar_ptr = ARENA + info_size
    img.words(ARENA, ar_ptr, 0, size, size)
    first = ar_ptr + state_size
    first += (-(first + 16)) % 16
    want = lay_arena(img, first, ARENA + size, [(0x290, True), (0x19010, True), (0x2000, False),
                                                 (0x3010, True)], flags=A)
    # the older heap: chunks, the old top (freed), a 16-byte fencepost, a 0-byte one
    img.words(old, ar_ptr, ARENA, size, size)
    pos = old + info_size
    img.words(pos, 0, 0x20010 | P | A)
    want.append(hw.Chunk(pos + 16, 0x20010 - 8, True, "arena"))
    pos += 0x20010
    old_top = old + size - pos
    fence = (old_top - 32) & ~15
    img.words(pos, 0, fence | P)
    want.append(hw.Chunk(pos + 16, fence - 8, False, "arena"))
    img.words(pos + fence, fence, 16)  # the old top was freed: PREV_INUSE cleared
    img.words(pos + fence + 16, 16, 0 | P)
    w = walk(img, [(ARENA, ARENA + size, ""), (old, old + size, "")])
    assert w.problems() == []
    assert [c for c in w.chunks()] == want


def test_arena_chunk_in_use_without_its_flag_is_refused():
    img = Image()
    img.add(ARENA, 0x40000)
    img.words(ARENA, ARENA + 48, 0, 0x40000, 0x40000)
    lay_arena(img, ARENA + 48 + 2208, ARENA + 0x40000, [(0x290, True), (0x19010, True)], flags=0)
    w = walk(img, [(ARENA, ARENA + 0x40000, "")])
    assert w.chunks() == [] and "NON_MAIN_ARENA" in w.regions[0].problem


def test_tcache_lists_make_their_chunks_free():
    """Chunks in a thread's tcache look in use; the walker follows the lists (safe-linked
    as since glibc 2.32, and plain) and counts them free."""
    img = Image()
    img.add(HEAP, 0x40000)
    sizes = [(0x290, True), (0x30, True), (0x30, True), (0x30, True), (0x50, True), (0x20010, True)]
    chunks = lay_arena(img, HEAP, HEAP + 0x40000, sizes)
    tc = chunks[0].addr
    x, y, z, v = (c.addr for c in chunks[1:5])
    entries = tc + 2 * 64  # uint16_t counts[64], then the entries
    img.words(entries + 8 * 1, x)  # bin 1: chunks of 0x30
    img.words(x, (x >> 12) ^ z)  # x -> z, safe-linked
    img.words(z, z >> 12)  # the end, safe-linked
    img.words(entries + 8 * 3, v)  # bin 3: chunks of 0x50, plain links (glibc < 2.32)
    img.words(v, 0)
    w = walk(img, [(HEAP, HEAP + 0x40000, "[heap]")])
    state = {c.addr: c.in_use for c in w.chunks()}
    assert w.tcache_free == 3
    assert state[x] is False and state[z] is False and state[v] is False
    assert state[y] is True and state[tc] is True


def test_tcache_cycle_and_wrong_class_do_not_mislead():
    img = Image()
    img.add(HEAP, 0x40000)
    chunks = lay_arena(img, HEAP, HEAP + 0x40000, [(0x290, True), (0x30, True), (0x30, True),
                                                  (0x290, True), (0x20010, True)])
    tc, x, y, fake = (c.addr for c in chunks[:4])
    entries = tc + 2 * 64
    img.words(entries + 8, x)
    img.words(x, (x >> 12) ^ y)
    img.words(y, (y >> 12) ^ x)  # a cycle (damaged): followed once
    # a chunk of the struct's size whose "entries" point at chunks of the wrong class: an
    # array of the program's, not a tcache
    img.words(fake + 2 * 64 + 8 * 5, chunks[4].addr)
    w = walk(img, [(HEAP, HEAP + 0x40000, "[heap]")])
    state = {c.addr: c.in_use for c in w.chunks()}
    assert w.tcache_free == 2 and state[chunks[4].addr] is True
