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
thread: thread-private, as a stack local is.  Shared libraries' TLS blocks, placed by
the dynamic linker after the executable's, are not named here.
"""

from __future__ import annotations

import numpy as np

from numaprof.analyzer import symbols


def layout(info: symbols.ElfInfo) -> tuple[int, list[symbols.StaticSymbol]] | None:
    """(offset of the executable's TLS block below the thread pointer, its variables), or
    None when ``info`` is no executable (a shared library) or has no TLS."""
    try:
        segs = list(info.elf.iter_segments())
        tls = next((s for s in segs if s["p_type"] == "PT_TLS"), None)
        if tls is None or not _executable(info.elf, segs):
            return None
        align = max(int(tls["p_align"]), 1)
        firstbyte = -(int(tls["p_vaddr"]) % align) % align
        memsz = int(tls["p_memsz"])
        offset = -(-(memsz - firstbyte) // align) * align + firstbyte
        out = []
        for name in (".symtab", ".dynsym"):
            sec = info.elf.get_section_by_name(name)
            if sec is None:
                continue
            for sym in sec.iter_symbols():
                if sym["st_info"]["type"] == "STT_TLS" and sym["st_size"] > 0 and sym.name:
                    value, size = int(sym["st_value"]), int(sym["st_size"])
                    if value + size <= memsz:
                        out.append(symbols.StaticSymbol(sym.name, value, size, ".tbss", True))
            if out:
                break
    except symbols.DAMAGED:
        return None
    return (offset, out) if out else None


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
