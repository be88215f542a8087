"""glibc malloc's chunks, read from another process's memory (docs/record.md, "Attaching").

When numaprof attaches to a running program (`record -p PID`) no allocation shim saw
its allocations, yet its arrays are in its heap.  This module splits the heap into the
allocator's chunks from their headers, the way glibc's malloc/malloc.c and
malloc/arena.c lay them out on x86-64 (64-bit, 16-byte alignment):

- a chunk starts with two 8-byte words, ``prev_size`` and ``size``; the low bits of
  ``size`` are PREV_INUSE (1: the chunk before is in use), IS_MMAPPED (2) and
  NON_MAIN_ARENA (4); the address malloc returns is the chunk + 16;
- the main arena's chunks run from the start of ``[heap]`` (the brk area) to its top
  chunk, which ends at the break;
- another arena's chunks live in heaps aligned to HEAP_MAX_SIZE (64 MiB), each starting
  with a ``heap_info`` header (arena, previous heap, size, mprotect size[, page size]),
  the arena's ``malloc_state`` after the first one; a heap given up for a new one ends
  in fenceposts (a 16-byte chunk, then a 0-byte one);
- a chunk too large for an arena is a mapping of its own, flagged IS_MMAPPED, whose
  ``prev_size`` is its offset in the mapping (non-zero after memalign); adjacent ones
  share one line of /proc/PID/maps when the kernel merges their areas.  glibc up to 2.42
  counts the header in the size, 2.43 does not: the size or the size + 16 is a whole
  number of pages, which tells the two apart.

A chunk is in use when the next chunk's PREV_INUSE bit says so — except chunks cached in
a thread's tcache (and, at most 160 bytes, in fastbins), which glibc keeps looking in
use.  The tcache's lists are read from each thread's ``tcache_perthread_struct`` (found
by its size and checked entry by entry) and their chunks counted as free; fastbins are
listed only in the arena's private state, so chunks of at most 176 bytes may be free
ones counted as used (they are far below any useful threshold).

Nothing read is trusted: every size is checked (alignment, bounds, PREV_INUSE against
``prev_size``, the arena flag, no two free chunks side by side), every loop is bounded,
and a walk that meets something else (another allocator — jemalloc, tcmalloc, a pool —
corruption, a read that fails) stops and says where and why.  The program runs while
it is read; a walk that fails is tried again from fresh reads before it is given up.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Protocol

HDR = 16  # prev_size + size
ALIGN = 16  # MALLOC_ALIGNMENT on x86-64
MINSIZE = 32
PREV_INUSE, IS_MMAPPED, NON_MAIN_ARENA = 1, 2, 4
FLAGS = PREV_INUSE | IS_MMAPPED | NON_MAIN_ARENA
MMAP_HP = 1  # glibc 2.43: prev_size bit of an mmapped chunk on huge pages
HEAP_MAX_SIZE = 64 << 20  # 2 * DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
HEAP_INFO_SIZES = (32, 48)  # heap_info before / since glibc 2.35 (its pagesize field)
MALLOC_STATE_SIZES = (2200, 2192)  # since / before glibc 2.27 (have_fastchunks)
# tcache_perthread_struct: (chunk size, bytes per count, bins) — glibc 2.26-2.29 (char
# counts), 2.30-2.41 (uint16_t counts), 2.42+ (12 more bins for large chunks)
TCACHE_LAYOUTS = ((0x250, 1, 64), (0x290, 2, 64), (0x300, 2, 76))
TCACHE_SMALL_BINS = 64
MAX_TCACHE_SMALL_CHUNK = MINSIZE + (TCACHE_SMALL_BINS - 1) * ALIGN  # 1040
MAX_CHUNKS = 1 << 22  # chunks walked per process: beyond, the rest stays unsplit
MAX_PAGE_PROBES = 1 << 18  # page starts probed for mmapped chunks per process
RETRIES = 3
BLOCK = 1 << 16


class Memory(Protocol):
    """Reads another process's memory: up to ``size`` bytes at ``addr`` (fewer at the end
    of what is readable); raises OSError when nothing at ``addr`` can be read."""

    def read(self, addr: int, size: int) -> bytes: ...


class Unreadable(Exception):
    """A read at an address failed or came back short."""

    def __init__(self, addr: int):
        super().__init__(f"cannot read memory at {addr:#x}")
        self.addr = addr


@dataclass(frozen=True)
class Chunk:
    """One malloc chunk: ``addr`` is what malloc returned, ``size`` what
    malloc_usable_size would say."""
    addr: int
    size: int
    in_use: bool
    where: str  # "brk" (main arena) | "arena" (another arena's heap) | "mmap"


@dataclass
class RegionWalk:
    """One walked area: the main arena's [heap], another arena's heap, or a run of
    mmapped chunks.  ``problem`` says why a walk stopped before its end ("" if it did
    not); an arena walk that stopped keeps no chunks (nothing after the fault is sure)."""
    kind: str
    start: int
    end: int
    chunks: list[Chunk] = field(default_factory=list)
    problem: str = ""


@dataclass
class HeapWalk:
    regions: list[RegionWalk] = field(default_factory=list)
    tcache_free: int = 0  # chunks found in tcache lists (free, though they look in use)
    notes: list[str] = field(default_factory=list)

    def chunks(self) -> list[Chunk]:
        return [c for r in self.regions for c in r.chunks]

    def problems(self) -> list[str]:
        return [f"{r.kind} at {r.start:#x}: {r.problem}" for r in self.regions if r.problem]


class _Reader:
    """Words of the other process, read in 64 KiB blocks (the headers of small chunks
    are read from a cached block, not one system call each)."""

    def __init__(self, mem: Memory):
        self.mem = mem
        self.blocks: dict[int, bytes] = {}

    def clear(self) -> None:
        self.blocks.clear()

    def words(self, addr: int, n: int = 2) -> tuple[int, ...]:
        size = 8 * n
        base = addr & ~(BLOCK - 1)
        if addr + size > base + BLOCK:  # across a block boundary: read it as it is
            return struct.unpack_from(f"<{n}Q", self._direct(addr, size))
        blk = self.blocks.get(base)
        if blk is None:
            try:
                blk = self.mem.read(base, BLOCK)
            except OSError:
                blk = b""
            if len(blk) < addr - base + size:  # the block's start or end is not readable
                return struct.unpack_from(f"<{n}Q", self._direct(addr, size))
            if len(self.blocks) >= 64:
                self.blocks.clear()
            self.blocks[base] = blk
        if len(blk) < addr - base + size:
            raise Unreadable(addr)
        return struct.unpack_from(f"<{n}Q", blk, addr - base)

    def _direct(self, addr: int, size: int) -> bytes:
        try:
            data = self.mem.read(addr, size)
        except OSError:
            raise Unreadable(addr) from None
        if len(data) < size:
            raise Unreadable(addr)
        return data

    def probe(self, addr: int) -> tuple[int, int] | None:
        """The two header words at ``addr``, read alone (a page scan reads one header per
        page, not the page); None if they cannot be read."""
        try:
            data = self.mem.read(addr, HDR)
        except OSError:
            return None
        if len(data) < HDR:
            return None
        return struct.unpack("<2Q", data)


class _Bad(Exception):
    """The walk met something that is not a chunk of glibc's."""


class _Budget(_Bad):
    """Too many chunks: those walked so far (checked) are kept, the rest is not split."""

    def __init__(self, chunks: list[Chunk]):
        super().__init__(f"more than {MAX_CHUNKS} chunks: the rest is not split")
        self.chunks = chunks


def _arena_chain(rd: _Reader, first: int, end: int, main: bool, budget: list[int]) -> list[Chunk]:
    """The chunks from ``first`` up to ``end`` (the top chunk ends there; an old heap of
    another arena ends in fenceposts just before it).  Raises _Bad or Unreadable."""
    where = "brk" if main else "arena"
    out: list[Chunk] = []
    pos = first
    prev: tuple[int, int, int] | None = None  # (size, flags, index in out or -1) of the chunk before
    prev_prev_free = False
    while True:
        if budget[0] <= 0:
            raise _Budget(out[:-1])  # the last one's state is in the header not read
        budget[0] -= 1
        if pos + HDR > end:
            raise _Bad(f"a chunk header at {pos:#x} runs past the end {end:#x}")
        prev_size, size = rd.words(pos)
        csize, flags = size & ~FLAGS, size & FLAGS
        prev_in_use = bool(flags & PREV_INUSE)
        if prev is None:
            if not prev_in_use:
                raise _Bad(f"the first chunk at {pos:#x} says the memory before it is a free chunk")
        else:
            p_size, p_flags, p_index = prev
            if prev_in_use:
                if not main and p_index >= 0 and not p_flags & NON_MAIN_ARENA:
                    raise _Bad(f"chunk at {pos - p_size:#x} is in use but not flagged NON_MAIN_ARENA")
            else:
                if p_index < 0:
                    raise _Bad(f"the fencepost at {pos - p_size:#x} is marked free")
                if prev_size != p_size:
                    raise _Bad(f"chunk at {pos:#x}: prev_size {prev_size:#x} is not the size "
                               f"{p_size:#x} of the free chunk before it")
                if prev_prev_free:
                    raise _Bad(f"two free chunks side by side before {pos:#x}")
                c = out[p_index]
                out[p_index] = Chunk(c.addr, c.size, False, where)
            prev_prev_free = not prev_in_use
        if flags & IS_MMAPPED:
            raise _Bad(f"chunk at {pos:#x} is flagged mmapped inside an arena")
        if main and flags & NON_MAIN_ARENA:
            raise _Bad(f"chunk at {pos:#x} of the main arena is flagged NON_MAIN_ARENA")
        if csize == 0:
            # the last fencepost of a heap another arena gave up for a new one
            if main or flags != PREV_INUSE or prev is None or end - pos > 2 * HDR:
                raise _Bad(f"chunk at {pos:#x} has size 0")
            return out
        if csize % ALIGN:
            raise _Bad(f"chunk at {pos:#x} has a size {csize:#x} that is not a multiple of {ALIGN}")
        if pos + csize > end:
            raise _Bad(f"chunk at {pos:#x} of size {csize:#x} runs past the end {end:#x}")
        if pos + csize == end:
            if not prev_in_use and prev is not None:
                raise _Bad(f"the top chunk at {pos:#x} follows a free chunk")
            return out  # the top chunk: the arena's free space at its end
        if csize == HDR:
            # a fencepost (16 bytes, in use): the end of a heap another arena gave up, or
            # in the main arena a gap in the break (another sbrk user): what follows is
            # not this area's
            if flags & ~PREV_INUSE:
                raise _Bad(f"chunk at {pos:#x} has size 16 but is no fencepost")
            if main:
                raise _Bad(f"a fencepost at {pos:#x}: the break was moved by another sbrk "
                           "user; the rest is not walked")
            prev = (csize, flags, -1)
        elif csize < MINSIZE:
            raise _Bad(f"chunk at {pos:#x} has size {csize:#x}, below the minimum {MINSIZE}")
        else:
            # usable: the chunk less its header, plus the next chunk's prev_size word
            out.append(Chunk(pos + HDR, csize - HDR + 8, True, where))
            prev = (csize, flags, len(out) - 1)
        pos += csize


def _walk_with_retries(kind: str, start: int, end: int, rd: _Reader, attempt, budget) -> RegionWalk:
    """Runs ``attempt()`` until a walk succeeds (the program may move its heap while it
    is read), at most RETRIES times; a failed walk keeps no chunks."""
    region = RegionWalk(kind, start, end)
    problem = ""
    for _ in range(RETRIES):
        saved = budget[0]
        try:
            region.chunks = attempt()
            region.problem = ""
            return region
        except Unreadable as e:
            problem = f"cannot read memory at {e.addr:#x}"
        except _Budget as e:
            region.chunks, region.problem = e.chunks, str(e)
            return region
        except _Bad as e:
            problem = str(e)
        budget[0] = saved
        rd.clear()
    region.chunks = []
    region.problem = problem
    return region


def walk_main_heap(rd: _Reader, start: int, end: int, budget: list[int]) -> RegionWalk:
    """The main arena: ``[heap]`` from its first chunk (its start, aligned) to its end."""
    first = (start + ALIGN - 1) & ~(ALIGN - 1)
    return _walk_with_retries("[heap]", start, end, rd,
                              lambda: _arena_chain(rd, first, end, True, budget), budget)


def heap_info_at(rd: _Reader, base: int, readable_end: int, page: int) -> tuple[int, list[int]] | None:
    """(end of the heap, candidate first chunks) if a plausible ``heap_info`` is at
    ``base`` (HEAP_MAX_SIZE-aligned), else None."""
    try:
        ar_ptr, prev, size, mprotect_size = rd.words(base, 4)
    except Unreadable:
        return None
    if (size < page or size % page or size > HEAP_MAX_SIZE or mprotect_size < size
            or mprotect_size > HEAP_MAX_SIZE or base + size > readable_end):
        return None
    if prev and (prev % HEAP_MAX_SIZE or prev == base):
        return None
    firsts: list[int] = []
    if ar_ptr - base in HEAP_INFO_SIZES:  # the arena's first heap: malloc_state follows
        for ms in MALLOC_STATE_SIZES:
            p = ar_ptr + ms
            p += (-(p + HDR)) % ALIGN
            firsts.append(p)
    else:
        if ar_ptr % 8 or (ar_ptr & ~(HEAP_MAX_SIZE - 1)) + HEAP_INFO_SIZES[0] > ar_ptr:
            return None
        firsts = [base + s for s in HEAP_INFO_SIZES]
    return base + size, list(dict.fromkeys(firsts))


def walk_arena_heap(rd: _Reader, base: int, readable_end: int, page: int,
                    budget: list[int]) -> RegionWalk | None:
    """Another arena's heap at ``base``, or None when no heap_info is there."""
    found = heap_info_at(rd, base, readable_end, page)
    if found is None:
        return None
    end, firsts = found

    def attempt():
        problem = None
        for first in firsts:
            try:
                return _arena_chain(rd, first, end, False, budget)
            except _Bad as e:
                problem = problem or e
        raise problem

    return _walk_with_retries("arena heap", base, end, rd, attempt, budget)


def _mmapped_header(prev_size: int, size: int, page: int) -> int | None:
    """The length of the mapping whose start holds this header of an mmapped chunk,
    or None if it is not one."""
    if size & FLAGS != IS_MMAPPED or prev_size not in (0, MMAP_HP):
        return None
    csize = size & ~FLAGS
    if csize and csize % page == 0:
        return csize  # glibc ≤ 2.42: the size counts the header
    if (csize + HDR) % page == 0 and csize + HDR >= page:
        return csize + HDR  # glibc 2.43
    return None


def _mmapped_chunk(rd: _Reader, base: int, length: int) -> Chunk:
    """The chunk of the mapping [base, base + length): at its start, or further on after
    memalign / posix_memalign / aligned_alloc (its prev_size then says how far)."""
    def header_fits(p: int) -> int | None:
        hdr = rd.probe(p)
        if hdr is None:
            return None
        prev_size, size = hdr
        off = p - base
        if prev_size & ~MMAP_HP != off or size & FLAGS != IS_MMAPPED:
            return None
        csize = size & ~FLAGS
        if csize == length - off:
            return csize - HDR  # glibc ≤ 2.42
        if csize == length - off - HDR:
            return csize - HDR + 8  # glibc 2.43
        return None

    align = 32
    while align <= length // 2:
        # where _int_memalign puts the aligned chunk: at the first aligned address
        # (glibc 2.43), or at the first one at least MINSIZE past the block's start
        # (before)
        user = (base + HDR + align - 1) & ~(align - 1)
        for u in (user, user + align):
            if base < u - HDR and u < base + length:
                usable = header_fits(u - HDR)
                if usable is not None:
                    return Chunk(u, usable, True, "mmap")
        align <<= 1
    usable = header_fits(base)
    if usable is None:  # the stale header of the whole block: count the block
        usable = length - HDR
    return Chunk(base + HDR, usable, True, "mmap")


def walk_mmapped(rd: _Reader, start: int, end: int, page: int, budget: list[int],
                 probes: list[int]) -> list[RegionWalk]:
    """Runs of mmapped chunks in an anonymous area [start, end): each page start that
    holds an mmapped chunk's header begins one; the area may also hold a thread stack
    or the program's own mappings, merged with them by the kernel."""
    out: list[RegionWalk] = []
    pos = start
    run: RegionWalk | None = None
    while pos + HDR <= end:
        if run is None:  # searching: one probe per page
            if probes[0] <= 0:
                break
            probes[0] -= 1
        hdr = rd.probe(pos)
        length = _mmapped_header(*hdr, page) if hdr is not None else None
        if length is None or pos + length > end:
            run = None
            pos += page
            continue
        if budget[0] <= 0:
            break
        budget[0] -= 1
        if run is None:
            run = RegionWalk("mmapped chunks", pos, pos)
            out.append(run)
        run.chunks.append(_mmapped_chunk(rd, pos, length))
        pos += length
        run.end = pos
    return out


def mark_tcache(rd: _Reader, chunks: list[Chunk]) -> tuple[list[Chunk], int]:
    """The chunks with those in a thread's tcache marked free; and how many.

    Each thread's ``tcache_perthread_struct`` is a chunk of a known size whose entries
    are 0 or the address of a chunk of that entry's size class (checked for every
    entry, so that an array of the program's is not taken for one); each list is
    followed through its ``next`` words, safe-linked since glibc 2.32 (``(position >> 12)
    ^ pointer``) or not, one link at a time, at most the bin's capacity.
    """
    by_addr = {c.addr: i for i, c in enumerate(chunks)}
    sizes = {c.addr: _chunk_size(c) for c in chunks}
    free: set[int] = set()
    for c in chunks:
        if not c.in_use or c.where == "mmap":
            continue
        csize = _chunk_size(c)
        for tsize, cbytes, nbins in TCACHE_LAYOUTS:
            if csize != tsize:
                continue
            heads = _tcache_heads(rd, c.addr, cbytes, nbins, sizes)
            for tidx, head in heads:
                free.update(_tcache_list(rd, head, tidx, sizes))
    if not free:
        return chunks, 0
    out = list(chunks)
    for a in free:
        i = by_addr[a]
        out[i] = Chunk(out[i].addr, out[i].size, False, out[i].where)
    return out, len(free)


def _chunk_size(c: Chunk) -> int:
    if c.where == "mmap":
        return c.size + HDR
    return c.size + HDR - 8


def _fits_bin(csize: int | None, tidx: int) -> bool:
    if csize is None:
        return False
    if tidx < TCACHE_SMALL_BINS:
        return csize == MINSIZE + tidx * ALIGN
    return csize > MAX_TCACHE_SMALL_CHUNK


def _tcache_heads(rd: _Reader, addr: int, cbytes: int, nbins: int, sizes: dict) -> list[tuple[int, int]]:
    """The (bin, first chunk) of a tcache_perthread_struct at ``addr``; none if an entry
    is a chunk of another size class (then it is not one)."""
    try:
        entries = rd.words(addr + cbytes * nbins, nbins)
    except Unreadable:
        return []
    heads = []
    for tidx, e in enumerate(entries):
        if e == 0 or e not in sizes:
            continue  # empty, or a chunk in an area that was not walked
        if not _fits_bin(sizes[e], tidx):
            return []
        heads.append((tidx, e))
    return heads


def _tcache_list(rd: _Reader, head: int, tidx: int, sizes: dict) -> list[int]:
    out = [head]
    seen = {head}
    e = head
    while len(out) < 0xFFFF:
        try:
            (raw,) = rd.words(e, 1)
        except Unreadable:
            break
        if raw == 0 or raw == e >> 12:  # the end, plain or safe-linked
            break
        nxt = None
        for cand in (raw ^ (e >> 12), raw):
            if _fits_bin(sizes.get(cand), tidx) and cand not in seen:
                nxt = cand
                break
        if nxt is None:
            break  # a link that leads to no chunk of the bin: stop here
        out.append(nxt)
        seen.add(nxt)
        e = nxt
    return out


@dataclass(frozen=True)
class Area:
    """One line of /proc/PID/maps."""
    start: int
    end: int
    perms: str
    path: str


def walk(mem: Memory, areas: list[Area], page: int = 4096) -> HeapWalk:
    """Every chunk glibc malloc has in the process whose memory ``mem`` reads, given its
    areas (/proc/PID/maps): the main arena, the other arenas' heaps, mmapped chunks."""
    rd = _Reader(mem)
    hw = HeapWalk()
    budget = [MAX_CHUNKS]
    probes = [MAX_PAGE_PROBES]
    anon = [a for a in areas if a.perms.startswith("rw") and a.path == ""]
    for a in areas:
        if a.path == "[heap]" and a.perms.startswith("rw"):
            hw.regions.append(walk_main_heap(rd, a.start, a.end, budget))
    claimed: list[tuple[int, int]] = []
    for a in anon:
        base = (a.start + HEAP_MAX_SIZE - 1) & ~(HEAP_MAX_SIZE - 1)
        while base + HDR <= a.end:
            region = walk_arena_heap(rd, base, a.end, page, budget)
            if region is not None:
                hw.regions.append(region)
                claimed.append((base, region.end))
            base += HEAP_MAX_SIZE
    for a in anon:
        for lo, hi in _unclaimed(a.start, a.end, claimed):
            hw.regions.extend(walk_mmapped(rd, lo, hi, page, budget, probes))
    if budget[0] <= 0:
        hw.notes.append(f"more than {MAX_CHUNKS} chunks: the rest of the heap is not split")
    if probes[0] <= 0:
        hw.notes.append(f"more than {MAX_PAGE_PROBES} pages of anonymous memory searched for "
                        "mmapped chunks: the rest is not searched")
    chunks = hw.chunks()
    marked, hw.tcache_free = mark_tcache(rd, chunks)
    if hw.tcache_free:
        it = iter(marked)
        for r in hw.regions:
            r.chunks = [next(it) for _ in r.chunks]
    return hw


def _unclaimed(lo: int, hi: int, claimed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for a, b in sorted(claimed):
        if b <= lo or a >= hi:
            continue
        if a > lo:
            out.append((lo, a))
        lo = max(lo, b)
    if lo < hi:
        out.append((lo, hi))
    return out
