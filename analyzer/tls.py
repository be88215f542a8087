"""Thread-local variables of the program: OpenMP threadprivate arrays, C11 `_Thread_local`,
C++ `thread_local`, Fortran threadprivate module variables.

Each thread has its own copy of the program's static TLS block, which on x86-64 lies just
below the thread's pointer (TLS variant II: U. Drepper, "ELF Handling For Thread-Local
Storage", 2013, §3.4.6 and §4.3): the executable's block, the first, starts at tp −
offset, where offset is its PT_TLS segment's size rounded up to the segment's alignment
(glibc's _dl_determine_tlsoffset: `roundup(memsz − firstbyte, align) + firstbyte`, with
`firstbyte = −(p_vaddr mod align) mod align`), and a variable is at that start plus its
STT_TLS symbol's value.  The collector records each thread's pointer (threads.tls_base,
written by the allocation shim as the thread starts), and a `%fs`-relative access's
address with it (docs/backends.md).  A variable is one object with an instance per
thread: thread-private, as a stack local is.  A shared library loaded with the program
has its block further down, at an offset the dynamic linker chose; the shim records it
(dl_iterate_phdr's dlpi_tls_data below the thread pointer: the tls_modules table), and
the library's variables are named the same way.
"""

from __future__ import annotations

import bisect
import weakref
from typing import NamedTuple

import numpy as np

from numaprof.analyzer import staticvars, symbols


def layout(info: symbols.ElfInfo, recorded: int | None = None) -> tuple[int, list[symbols.StaticSymbol]] | None:
    """(offset of the module's TLS block below the thread pointer, its variables): the
    executable's computed, a shared library's as ``recorded`` (tls_modules); None
    without TLS, or for a library whose offset was not recorded."""
    try:
        segs = list(info.elf.iter_segments())
        tls = next((s for s in segs if s["p_type"] == "PT_TLS"), None)
        if tls is None:
            return None
        align = max(int(tls["p_align"]), 1)
        firstbyte = -(int(tls["p_vaddr"]) % align) % align
        memsz = int(tls["p_memsz"])
        if _executable(info.elf, segs):
            offset = -(-(memsz - firstbyte) // align) * align + firstbyte
        elif recorded:
            offset = recorded
        else:
            return None
        out = []
        for name in (".symtab", ".dynsym"):
            sec = info.elf.get_section_by_name(name)
            if sec is None:
                continue
            for name, value, size in _tls_symbols(info.elf, sec):
                if value + size <= memsz:
                    out.append(symbols.StaticSymbol(name, value, size, ".tbss", True))
            if out:
                break
    except symbols.DAMAGED:
        return None
    return (offset, out) if out else None


STT_TLS = 6


class Variable(NamedTuple):
    """A thread-local variable of an executable, where it is from the thread pointer."""
    symbol: str  # its STT_TLS symbol
    name: str  # as the source calls it (gfortran's `__work_lhs_MOD_fjac` is `fjac`)
    start: int  # its first byte from the thread pointer (negative: below it)
    size: int
    type: object  # its DWARF type DIE, None without DWARF


_by_tp: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def variable_at(info: symbols.ElfInfo, tp_offset: int) -> Variable | None:
    """The executable's thread-local variable holding the byte ``tp_offset`` from the
    thread pointer, the address its code computes as ``%fs:0`` plus a constant (the
    local-exec model: `mov %fs:0, %rdx; lea -0x1790(%rdx), %rdx`, or `movsd
    %fs:0xc0(%rcx), %xmm4` with rcx a constant); None for a shared library's code
    (its block's offset is the dynamic linker's) or outside every variable."""
    found = _by_tp.get(info)
    if found is None:
        found = _by_tp[info] = _tp_variables(info)
    starts, vs = found
    i = bisect.bisect_right(starts, tp_offset) - 1
    return vs[i] if i >= 0 and tp_offset < vs[i].start + vs[i].size else None


def _tp_variables(info: symbols.ElfInfo) -> tuple[list[int], list[Variable]]:
    try:
        segs = list(info.elf.iter_segments())
        executable = _executable(info.elf, segs)
    except symbols.DAMAGED:
        return [], []
    found = layout(info) if executable else None
    if found is None:
        return [], []
    offset, syms = found
    out = []
    for sym in sorted(syms, key=lambda s: s.address):
        declared = staticvars.thread_local(info, sym.address)
        name = declared[0] if declared else staticvars.display_name(sym.name)
        out.append(Variable(sym.name, name, sym.address - offset, sym.size, declared[1] if declared else None))
    return [v.start for v in out], out


def _tls_symbols(elf, tab):
    """(name, value, size) of the thread-local variables of symbol table ``tab``.  ELF64
    little-endian tables are decoded with numpy, as symbols.ElfInfo does (pyelftools'
    per-symbol parsing took half a second on libc and libstdc++ at every report)."""
    if elf.elfclass == 64 and elf.little_endian:
        raw = np.frombuffer(tab.data(), dtype=symbols._SYM64)
        strtab = elf.get_section(tab["sh_link"]).data()
        for i in np.flatnonzero(((raw["info"] & 0xF) == STT_TLS) & (raw["size"] > 0) & (raw["name"] > 0)).tolist():
            off = int(raw["name"][i])
            end = strtab.find(b"\0", off)
            name = strtab[off : end if end >= 0 else len(strtab)].decode("utf-8", "replace")
            if name:
                yield name, int(raw["value"][i]), int(raw["size"][i])
        return
    for sym in tab.iter_symbols():
        if sym["st_info"]["type"] == "STT_TLS" and sym["st_size"] > 0 and sym.name:
            yield sym.name, int(sym["st_value"]), int(sym["st_size"])


DF_1_PIE = 0x08000000


def _executable(elf, segs) -> bool:
    """A program, not a shared library: ET_EXEC, or a position-independent executable
    (DF_1_PIE in DT_FLAGS_1; glibc's libc.so.6 also has an interpreter and runs)."""
    if elf["e_type"] == "ET_EXEC":
        return True
    dyn = next((s for s in segs if s["p_type"] == "PT_DYNAMIC"), None)
    if dyn is None:
        return False
    return any(t.entry.d_tag == "DT_FLAGS_1" and int(t.entry.d_val) & DF_1_PIE for t in dyn.iter_tags())


def module_offsets(mt: dict, mappings: symbols.Mappings) -> dict[tuple[int, str], int]:
    """(pid, path) -> the offset of that module's static TLS block below each thread's
    pointer, as the shim recorded it (tls_modules: the module's load address and the
    offset; the path is the mapping's at that address)."""
    out: dict[tuple[int, str], int] = {}
    if not mt or not len(mt.get("pid", ())):
        return out
    for pid, base, off in zip(np.asarray(mt["pid"]).tolist(), np.asarray(mt["base"]).tolist(),
                              np.asarray(mt["offset"]).tolist(), strict=True):
        m = mappings.find(int(pid), int(base))
        if m is not None and str(m[3]).startswith("/") and off > 0:
            out[(int(pid), str(m[3]))] = int(off)
    return out


def thread_pointers(tt: dict) -> dict[int, list[int]]:
    """pid -> the thread pointers the collector recorded for its threads."""
    col = tt.get("tls_base")
    if col is None or not len(col):
        return {}
    tp = np.asarray(col).astype(np.uint64)
    pid = np.asarray(tt["pid"]).astype(np.int64)
    out: dict[int, list[int]] = {}
    for p, t in zip(pid[tp > 0].tolist(), tp[tp > 0].tolist(), strict=True):
        out.setdefault(int(p), []).append(int(t))
    return out


def rows(pointers: dict[int, list[int]], pid: int, offset: int, syms: list[symbols.StaticSymbol]):
    """(pid, start, size, symbol) of each thread's copy of each variable."""
    for tp in sorted(set(pointers.get(pid, []))):
        if tp < offset:
            continue
        for sym in syms:
            yield pid, tp - offset + sym.address, sym.size, sym
