"""The arrays of a running process, found when numaprof attaches to it (`record -p PID`).

No allocation shim saw the process allocate, so its heap is read instead: glibc
malloc's chunks (analyzer/heapwalk.py) in use and at least the allocation threshold
large become rows of the objects table (kind KIND_ATTACH), each named after the
variable that pointed to it when it was found — a static pointer of the program (a
global ``double *field``, a member ``grid.energy``, an element ``rows[3]``), read from
the process's memory.  docs/record.md ("Attaching") says what is found and what is not.

Memory is read through /proc/PID/mem, which the kernel allows to the process's own user
when it may ptrace it (``ptrace_may_access`` in PTRACE_MODE_ATTACH: same user and a
dumpable process, and with the Yama module's ``kernel.yama.ptrace_scope`` = 1 only a
parent of the process, or CAP_SYS_PTRACE).  Reading does not stop the process; a page it
never touched reads as the shared zero page, so first touch stays the program's.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import time
from dataclasses import dataclass, field

import numpy as np

from numaprof.analyzer import heapwalk, staticvars, symbols
from numaprof.syspaths import is_system_path

KIND_ATTACH = 7  # objects.kind: a chunk found in the heap when numaprof attached
NO_STACK = 0xFFFFFFFF
STATIC_READ_LIMIT = 1 << 20  # bytes: larger static symbols are data, not pointers
RANGE_GAP = 4096  # static symbols closer than this are read in one go
FOREIGN_ALLOCATORS = {"libjemalloc": "jemalloc", "libtcmalloc": "tcmalloc",
                      "libmimalloc": "mimalloc", "libtbbmalloc": "TBB's scalable allocator",
                      "libhoard": "Hoard", "libsnmalloc": "snmalloc"}


@dataclass(frozen=True)
class FoundObject:
    """An allocation found in the heap: what malloc returned, its usable size, where it
    lives (brk / arena / mmap), and the variable that held its address ("" if none)."""
    addr: int
    size: int
    where: str
    holder: str = ""
    time: int = 0  # allocated at (CLOCK_MONOTONIC ns); 0: before the recording began
    free_time: int = 0  # released at; 0: still in use at the end


@dataclass
class Snapshot:
    """What attaching found: the objects, a summary for the manifest (``info``), and the
    one line to tell the user when the heap could not be split (``warning``); ``taken``:
    when the walk began (CLOCK_MONOTONIC ns, the samples' clock)."""
    objects: list[FoundObject] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    warning: str | None = None
    taken: int = 0


def across(start: Snapshot, end: Snapshot | None) -> list[FoundObject]:
    """The allocations of a recording from the heap read when numaprof attached and again
    when it stopped: a chunk in both (same address and size) lived all along; a chunk
    only at the start was released during the recording, and one only at the end was
    allocated during it.  When they happened is not known: from the start's walk (an
    allocation) and until the end's (a release), except where a released chunk and a new
    one overlap (the allocator reused the memory, or grew the chunk in place): both then
    change hands halfway through.  Without a usable end walk (the process ended, the heap
    changed while read), the start's chunks stand alone."""
    if end is None or end.info.get("status") not in ("ok", "empty"):
        return list(start.objects)
    before = {(o.addr, o.size): o for o in start.objects}
    after = {(o.addr, o.size): o for o in end.objects}
    out = [dataclasses.replace(o, holder=o.holder or after[k].holder)
           for k, o in before.items() if k in after]
    gone = sorted((o for k, o in before.items() if k not in after), key=lambda o: o.addr)
    new = sorted((o for k, o in after.items() if k not in before), key=lambda o: o.addr)
    half = (start.taken + end.taken) // 2
    reused_gone, reused_new = set(), set()
    j = 0
    for i, g in enumerate(gone):  # both sorted by address: a sweep
        while j < len(new) and new[j].addr + new[j].size <= g.addr:
            j += 1
        k = j
        while k < len(new) and new[k].addr < g.addr + g.size:
            reused_gone.add(i)
            reused_new.add(k)
            k += 1
    out += [dataclasses.replace(g, free_time=half if i in reused_gone else end.taken)
            for i, g in enumerate(gone)]
    out += [dataclasses.replace(n, time=half if k in reused_new else start.taken)
            for k, n in enumerate(new)]
    start.info.update(at_end={"status": end.info.get("status"), "allocated": len(new),
                              "released": len(gone)})
    return out


class ProcMemory:
    """Another process's memory through /proc/PID/mem (pread at the address)."""

    def __init__(self, pid: int, proc: str = "/proc"):
        self.fd = os.open(f"{proc}/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)

    def read(self, addr: int, size: int) -> bytes:
        if addr < 0 or addr >= 1 << 63:
            raise OSError(errno.EIO, "address out of range")
        return os.pread(self.fd, size, addr)

    def close(self) -> None:
        os.close(self.fd)


@dataclass(frozen=True)
class MapLine:
    start: int
    end: int
    perms: str
    pgoff: int
    inode: int
    path: str


def read_maps(pid: int, proc: str = "/proc") -> list[MapLine]:
    """/proc/PID/maps as MapLine rows."""
    out = []
    with open(f"{proc}/{pid}/maps", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            parts = line.rstrip("\n").split(None, 5)
            if len(parts) < 5:
                continue
            lo, _, hi = parts[0].partition("-")
            try:
                out.append(MapLine(int(lo, 16), int(hi, 16), parts[1], int(parts[2], 16),
                                   int(parts[4]), parts[5].strip() if len(parts) > 5 else ""))
            except ValueError:
                continue
    return out


def refused_advice(proc: str = "/proc") -> str:
    """Why reading a process's memory may be refused, and what to do, in a few words."""
    try:
        with open(f"{proc}/sys/kernel/yama/ptrace_scope") as f:
            scope = f.read().strip()
    except OSError:
        scope = None
    if scope == "1":
        return ("kernel.yama.ptrace_scope is 1: only the process's parent may read it; run "
                "numaprof as root or with CAP_SYS_PTRACE, or set kernel.yama.ptrace_scope=0")
    if scope in ("2", "3"):
        return (f"kernel.yama.ptrace_scope is {scope}: only CAP_SYS_PTRACE may read another "
                "process's memory; run numaprof as root")
    return ("reading another process's memory needs its user and a dumpable process "
            "(setuid programs and PR_SET_DUMPABLE 0 are not), or CAP_SYS_PTRACE")


def snapshot(pid: int, threshold: int, proc: str = "/proc") -> Snapshot:
    """Splits the heap of process ``pid`` into its allocations of at least ``threshold``
    bytes and names them; never raises for what the process holds (a foreign allocator,
    a heap changing or damaged, memory it may not read): the snapshot says so."""
    snap = Snapshot(info={"allocator": "glibc", "status": "ok"}, taken=time.monotonic_ns())
    try:
        maps = read_maps(pid, proc)
    except OSError as e:
        return _refused(snap, pid, proc, e)
    for m in maps:
        base = os.path.basename(m.path)
        for prefix, name in FOREIGN_ALLOCATORS.items():
            if base.startswith(prefix):
                snap.info.update(allocator=name, status="foreign")
                snap.warning = (f"process {pid} allocates with {name} ({m.path}), not glibc "
                                "malloc: its heap is not split into allocations (heap arrays "
                                "stay whole mappings)")
                return snap
    try:
        mem = ProcMemory(pid, proc)
    except OSError as e:
        return _refused(snap, pid, proc, e)
    try:
        return _walk(snap, mem, pid, maps, threshold)
    finally:
        mem.close()


def _refused(snap: Snapshot, pid: int, proc: str, e: OSError) -> Snapshot:
    if e.errno in (errno.ENOENT, errno.ESRCH):
        why = f"process {pid} is gone"
        snap.info.update(status="gone", reason=why)
    else:
        why = f"reading the memory of process {pid} was refused ({e.strerror})"
        snap.info.update(status="refused", reason=f"{why}: {refused_advice(proc)}")
    snap.warning = (f"{snap.info['reason'] if snap.info['status'] == 'refused' else why}; "
                    "its heap is not split into allocations (heap arrays stay whole mappings)")
    return snap


def _walk(snap: Snapshot, mem: ProcMemory, pid: int, maps: list[MapLine], threshold: int) -> Snapshot:
    areas = [heapwalk.Area(m.start, m.end, m.perms, m.path) for m in maps]
    try:
        walk = heapwalk.walk(mem, areas, os.sysconf("SC_PAGE_SIZE"))
    except OSError as e:  # the process went away while it was read
        return _refused(snap, pid, "/proc", e)
    chunks = walk.chunks()
    live = [c for c in chunks if c.in_use and c.size >= threshold]
    problems = walk.problems()
    snap.info.update(
        chunks=len(chunks), in_use=sum(c.in_use for c in chunks), tcache_free=walk.tcache_free,
        objects=len(live), threshold=threshold,
        areas=[{"kind": r.kind, "start": r.start, "end": r.end, "chunks": len(r.chunks),
                "problem": r.problem} for r in walk.regions],
        notes=walk.notes)
    if problems:
        snap.info["status"] = "partial"
        snap.info["reason"] = "; ".join(problems[:4])
        snap.warning = (f"part of the heap of process {pid} was not split into allocations "
                        f"(not glibc malloc's, damaged, or changing while read): {problems[0]}"
                        + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    elif not any(r.kind == "[heap]" for r in walk.regions) and not chunks:
        snap.info["status"] = "empty"
    holders = static_holders(mem, maps, np.array(sorted(c.addr for c in live), dtype=np.uint64))
    snap.objects = [FoundObject(c.addr, c.size, c.where, holders.get(c.addr, "")) for c in live]
    snap.info["named"] = sum(1 for o in snap.objects if o.holder)
    return snap


def static_holders(mem, maps: list[MapLine], targets: np.ndarray) -> dict[int, str]:
    """{address: variable} for the targets that a static variable of the program (its
    executable or its own shared libraries, not the system's) points to: a pointer, or a
    pointer inside a struct or an array (``grid.energy``, ``rows[3]``)."""
    out: dict[int, tuple[int, str]] = {}
    if not len(targets):
        return {}
    for path, start, pgoff in _program_files(maps):
        info = symbols.elf_info(path)
        if info is None:
            continue
        bias = info.load_bias(start, pgoff)
        if bias is None:
            continue
        syms = sorted((s for s in info.objects if s.writable and 8 <= s.size <= STATIC_READ_LIMIT),
                      key=lambda s: s.address)
        for lo, hi, group in _ranges(syms):
            try:
                data = mem.read(lo + bias, hi - lo)
            except OSError:
                continue
            for sym in group:
                off0 = sym.address - lo
                chunk = data[off0:off0 + sym.size]
                first = (-(sym.address + bias)) % 8
                n = (len(chunk) - first) // 8
                if n <= 0:
                    continue
                words = np.frombuffer(chunk, dtype="<u8", count=n, offset=first)
                hits = np.flatnonzero(np.isin(words, targets))
                for k in hits.tolist():
                    offset = first + 8 * k
                    name = holder_name(info, sym, offset)
                    rank = (offset != 0, len(name))
                    addr = int(words[k])
                    if addr not in out or rank < out[addr][0]:
                        out[addr] = (rank, name)
    return {a: name for a, (_, name) in out.items()}


def _program_files(maps: list[MapLine]):
    """(path, start, pgoff) of the first mapping of each of the program's own ELF files."""
    seen = set()
    for m in maps:
        if not m.path.startswith("/") or m.path in seen or is_system_path(m.path):
            continue
        seen.add(m.path)
        try:
            st = os.stat(m.path)
        except OSError:
            continue
        if m.inode and st.st_ino != m.inode:
            continue  # replaced (rebuilt) since the process mapped it: its symbols lie
        yield m.path, m.start, m.pgoff


def _ranges(syms):
    """Groups symbols sorted by address into ranges read at once."""
    group: list = []
    lo = hi = 0
    for s in syms:
        if group and (s.address > hi + RANGE_GAP or s.address + s.size - lo > 16 * STATIC_READ_LIMIT):
            yield lo, hi, group
            group = []
        if not group:
            lo, hi = s.address, s.address + s.size
        group.append(s)
        hi = max(hi, s.address + s.size)
    if group:
        yield lo, hi, group


def holder_name(info: symbols.ElfInfo, sym: symbols.StaticSymbol, offset: int) -> str:
    """The expression naming the word at ``offset`` in static ``sym``: the variable, or
    its member or element from the DWARF type (``grid.energy``, ``rows[3]``); without
    DWARF, ``sym+0x18``."""
    base = staticvars.display_name(sym.name, info, sym.address)
    path = staticvars.member_path(info, sym.address, offset)
    if path is not None:
        return base + path
    return base if offset == 0 else f"{base}+{offset:#x}"


def write_objects(profile_dir, pid: int, objects: list[FoundObject]) -> None:
    """Appends the objects found to the profile's objects table (kind KIND_ATTACH, no
    call stack; alive from before the first sample unless ``across`` found otherwise).
    Raises OSError."""
    from numaprof.analyzer.profile import read_table
    from numaprof.analyzer.writer import write_table

    if not objects:
        return
    old = read_table(profile_dir, "objects")
    n = len(objects)
    new = {"time": [o.time for o in objects], "free_time": [o.free_time for o in objects],
           "pid": [pid] * n, "tid": [0] * n,
           "addr": [o.addr for o in objects], "size": [o.size for o in objects],
           "kind": [KIND_ATTACH] * n, "stack": [NO_STACK] * n, "prev": [0] * n,
           "holder": [o.holder for o in objects], "sample_period": [0] * n}
    # every column of the table is rewritten with its new rows (a column left as it was
    # would have fewer rows than the others)
    for col in old:
        new.setdefault(col, [0] * n)
    write_table(profile_dir, "objects",
                **{col: [*old[col].tolist(), *values] for col, values in new.items()})
