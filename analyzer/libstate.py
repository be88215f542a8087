"""The system libraries' work on their own data (docs/analyzer.md): samples of a system
library's code (libc, libm, libstdc++, the dynamic linker) on data of a system library --
its tables and static state (libm's exp() tables, stdio's and the allocator's state) --,
in its own stack frame (vfprintf's work buffer), on memory only it touched (stdio's
stream buffer) or on the string literals the program passes it (format strings).  That is no array of the program's and
nothing a placement moves: the samples are counted apart, as the OpenMP runtime's are
(analyzer/runtime.py), and a finding names the functions, which are what the program
spends those accesses on.  What a library's code does to the program's own arrays
(memcpy into a heap block, qsort on a static array) stays the arrays'."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np

from numaprof.analyzer import attribution as att
from numaprof.analyzer import frames, symbols, tls
from numaprof.analyzer.objects import NO_STACK, Obj
from numaprof.analyzer.runtime import code_mappings, is_openmp_runtime
from numaprof.analyzer.varattr import RED_ZONE
from numaprof.syspaths import is_system_library

#: The share of the samples with an address from which the finding says what to cut.
NOTE_SHARE = 0.05


def _library_code(path: str) -> bool:
    """A system library other than an OpenMP runtime (which has a rule of its own)."""
    return is_system_library(path) and not is_openmp_runtime(path)


def library_samples(mt: dict, resolver: symbols.CodeResolver, regs: dict | None, pid, ip, addr, time, layers,
                    ivs: att.Intervals, objs: list[Obj],
                    threads: dict | None = None,
                    frames_of: dict[int, list[int]] | None = None) -> tuple[np.ndarray | None, Counter]:
    """(which samples are a system library's work on its own data, samples per (library,
    function)): the library's code accessing a static or file mapping of a system library,
    or -- where no object of the program's is -- its own stack frame, from the stack
    pointer (less the red zone) to the canonical frame address of the sampled function
    (its .eh_frame; needs the sampled registers) -- or, in the heap or an anonymous
    mapping where no object of the program's is, its locks and what they guard
    (_around_locks) and the threads' descriptors (_descriptors: at the pointers the
    ``threads`` table recorded) -- or a block the library allocated itself, or heap or
    anonymous memory in no object of the program's, that no code but a system library's
    touched in the whole run (_only_theirs; ``frames_of``: the allocation stacks' frames).
    (None, {}) without any."""
    code = code_mappings(mt, _library_code)
    if code is None or not len(addr):
        return None, Counter()
    idx = np.flatnonzero(att.locate(pid, ip, time, code[0]) >= 0)
    if not len(idx):
        return None, Counter()
    iv = att.locate_layers(pid[idx], addr[idx], time[idx], layers)
    where = np.where(iv >= 0, ivs.obj[np.maximum(iv, 0)], -1) if len(ivs) else np.full(len(idx), -1)
    theirs = np.zeros(len(idx), dtype=bool)
    unowned = np.zeros(len(idx), dtype=bool)
    literals: dict[tuple[int, int], bool] = {}
    for k, o in enumerate(where.tolist()):
        ob = objs[o] if o >= 0 else None
        if ob is not None and ob.kind in ("static", "mapping") and ob.path and is_system_library(ob.path):
            theirs[k] = True
        elif ob is not None and ob.kind == "mapping" and ob.read_only:
            key = (int(pid[idx[k]]), int(addr[idx[k]]) & 0xFFFFFFFFFFFFFFFF)
            if key not in literals:
                literals[key] = string_literal(resolver, *key)
            theirs[k] = literals[key]
        elif ob is None or ob.kind in ("stack", "mapping"):
            unowned[k] = True
    if regs is not None and unowned.any():
        theirs |= unowned & _own_frame(resolver, regs, pid, ip, addr, idx)
    heap = np.array([objs[o].kind == "mapping" and not objs[o].path.startswith("/") if o >= 0 else True
                     for o in where.tolist()], dtype=bool) & ~theirs
    pointers = tls.thread_pointers(threads) if threads is not None else {}
    if pointers and (unowned | heap).any():
        theirs |= (unowned | heap) & _descriptors(pointers, pid[idx], addr[idx])
        heap &= ~theirs
    if heap.any():
        charged = ip[idx] - regs["insn_off"][idx] if regs is not None else ip[idx]
        theirs |= heap & _around_locks(resolver, pid[idx], charged, addr[idx], heap)
    if frames_of is not None:
        # the code that does not keep memory the program's: any system library's, the
        # OpenMP runtime's too (a GOMP_parallel sample skidded into stdio's buffer, bfs)
        system = code_mappings(mt, is_system_library)
        not_program = att.locate(pid, ip, time, system[0]) >= 0 if system is not None else None
        theirs |= _only_theirs(where, theirs, objs, ivs, frames_of, code[0], pid, addr, idx, resolver,
                               not_program)
    if not theirs.any():
        return None, Counter()
    mask = np.zeros(len(addr), dtype=bool)
    mask[idx[theirs]] = True
    return mask, library_functions(resolver, pid[mask], ip[mask])


#: Library functions that allocate for their caller: C++'s operator new and new[] (all
#: their overloads mangle to `_Znw...` / `_Zna...`), and C functions that return a block
#: the caller owns.  An allocation through one of them is its caller's.
FOR_THE_CALLER = ("strdup", "strndup", "__strdup", "__strndup", "getline", "getdelim", "__getdelim",
                  "asprintf", "vasprintf", "__asprintf", "__vasprintf", "__vasprintf_internal",
                  "realpath", "open_memstream", "scandir", "tempnam", "backtrace_symbols")


def _for_the_caller(name: str | None) -> bool:
    if not name:
        return False
    base = name.split("@")[0]
    return base.startswith(("_Znw", "_Zna", "operator new")) or base in FOR_THE_CALLER


def allocated_by_library(mt: dict, frames_of: dict[int, list[int]], objs: list[Obj],
                         resolver: symbols.CodeResolver) -> np.ndarray:
    """Per object (and one more entry for "no object"): a heap object a system library
    allocated for itself -- its allocation stack's first frame, past the functions that
    allocate for their caller (operator new, strdup...: FOR_THE_CALLER), in a system
    library's code: the dynamic linker's link maps, stdio's buffers, and, around such
    blocks the shim sampled, the gaps it counts as theirs (analyzer/objects.py,
    _site_fills), where the program's own unsampled blocks may be."""
    out = np.zeros(len(objs) + 1, dtype=bool)
    code = code_mappings(mt, _library_code)
    if code is None:
        return out
    seen: dict[tuple[int, int], bool] = {}
    for k, ob in enumerate(objs):
        if ob.kind != "heap" or ob.stack == NO_STACK:
            continue
        key = (ob.pid, ob.stack)
        if key not in seen:
            seen[key] = _library_frame(frames_of.get(ob.stack, []), ob.pid, code[0], resolver)
        out[k] = seen[key]
    return out


def _library_frame(ips: list[int], pid: int, code: att.Intervals, resolver: symbols.CodeResolver) -> bool:
    """Whether the first frame of an allocation stack past the functions that allocate
    for their caller is in a system library's code."""
    for ip in ips:
        inside = att.locate(np.asarray([pid], dtype=np.int64), np.asarray([ip], dtype=np.uint64),
                            np.asarray([att.NEVER - np.uint64(1)]), code)[0] >= 0
        if not inside:
            return False
        found = resolver.elf_address(pid, int(ip) - 1)
        if not _for_the_caller(found[0].function_at(found[1]) if found is not None else None):
            return True
    return False


def library_code(mt: dict, pid, ip, time) -> np.ndarray:
    """Per sample: its instruction is in a system library's code."""
    code = code_mappings(mt, _library_code)
    if code is None or not len(ip):
        return np.zeros(len(ip), dtype=bool)
    return att.locate(pid, ip, time, code[0]) >= 0


#: Bytes either side of a sampled address looked at for the string literal holding it.
STRING_REACH = 256


def string_literal(resolver: symbols.CodeResolver, pid: int, addr: int) -> bool:
    """Whether the address is in a string literal of a loaded ELF file's read-only data
    (at no symbol): a run of printable characters, tabs and line ends ended by a NUL, the
    address on one of them or on its NUL -- a format string that scanf or printf parses,
    a mode string fopen reads.  The linker merges the compiler's `.rodata.str*` sections
    into `.rodata`, so the bytes are what tell."""
    found = resolver.elf_address(pid, addr)
    if found is None:
        return False
    info, v = found
    data, lo = None, v
    for reach in (STRING_REACH, 64, 16, 0):
        lo = max(v - reach, 0)
        data = info._code(lo, v - lo + 1 + reach)
        if data:
            break
        data = None
    if not data:
        return False
    at = v - lo
    end = at if data[at] == 0 else data.find(b"\0", at)
    if end < 0:
        return False
    text = data[data.rfind(b"\0", 0, end) + 1:end]
    return len(text) >= 1 and all(32 <= c < 127 or c in (9, 10, 13) for c in text)


def _only_theirs(where, theirs, objs: list[Obj], ivs: att.Intervals, frames_of: dict[int, list[int]],
                 code: att.Intervals, pid, addr, idx, resolver: symbols.CodeResolver,
                 not_program: np.ndarray | None = None) -> np.ndarray:
    """Of the library's samples ``idx`` (their objects ``where``): those on an object
    only a system library's code touched in the whole run -- a heap block it allocated for
    itself (allocated_by_library's test: stdio's stream buffer,
    which _IO_file_doallocate mallocs at a stream's first read), or heap or anonymous
    memory that holds no object of the program's (that buffer when the shim did not
    sample its allocation: fscanf's reads of the input, bfs).  A sample of the program's
    code anywhere in the object's address ranges keeps it the program's (conservative:
    over the whole run, and over the blocks of the program's inside a mapping); the
    samples of other code that is no program's (``not_program``, per sample: another
    system library's, the OpenMP runtime's) do not.  Limit: a
    small buffer of the program's that the shim did not sample and that only library
    functions touch (a line read by fgets and parsed by sscanf, in the heap) is counted
    here."""
    out = np.zeros(len(idx), dtype=bool)
    cand: dict[int, bool] = {}
    for o in np.unique(where[~theirs]).tolist():
        if o < 0:
            continue
        ob = objs[o]
        if ob.kind == "mapping" and not ob.path.startswith("/") and not ob.read_only:
            cand[o] = True
        elif ob.kind == "heap" and ob.stack != NO_STACK:
            cand[o] = _library_frame(frames_of.get(ob.stack, []), ob.pid, code, resolver)
    cand = {o for o, ok in cand.items() if ok}
    if not cand:
        return out
    others = np.ones(len(addr), dtype=bool) if not_program is None else ~not_program
    others[idx] = False
    o_pid, o_addr = pid[others], addr[others].astype(np.uint64)
    order = np.lexsort((o_addr, o_pid))
    o_pid, o_addr = o_pid[order], o_addr[order]
    for o in sorted(cand):
        rows = np.flatnonzero(ivs.obj == o)
        touched = False
        for r in rows.tolist():
            p = int(ivs.pid[r])
            lo, hi = np.searchsorted(o_pid, p, side="left"), np.searchsorted(o_pid, p, side="right")
            a = o_addr[lo:hi]
            if np.searchsorted(a, ivs.end[r], side="left") > np.searchsorted(a, ivs.start[r], side="left"):
                touched = True
                break
        if not touched:
            out |= (where == o) & ~theirs
    return out


#: The bytes at and above a thread's pointer that are its descriptor: glibc's `struct
#: pthread` (nptl/descr.h; its first member the TCB header that %fs points to), 2 304
#: bytes on x86-64 (TLS_TCB_SIZE), where the C library keeps each thread's cancellation
#: state, cleanup buffers and errno's neighbours.
DESCRIPTOR = 2304


def _descriptors(pointers: dict[int, list[int]], pid, addr) -> np.ndarray:
    """Per sample: the address is in a thread's descriptor, [pointer, + DESCRIPTOR), of a
    thread of its process (vfscanf's cancellation cleanup, `__libc_cleanup_push_defer`,
    on the main thread's descriptor in the dynamic linker's anonymous mapping)."""
    out = np.zeros(len(addr), dtype=bool)
    a = addr.astype(np.uint64)
    for p, tps in pointers.items():
        mine = pid == p
        if not mine.any():
            continue
        tp = np.asarray(sorted(set(tps)), dtype=np.uint64)
        at = np.searchsorted(tp, a[mine], side="right") - 1
        base = tp[np.maximum(at, 0)]
        out[mine] = (at >= 0) & (a[mine] - base < np.uint64(DESCRIPTOR))
    return out


#: How far below a library's lock its own structure reaches: glibc's stdio stream is
#: `struct locked_FILE { struct _IO_FILE_plus fp; _IO_lock_t lock; ... }` (libio/iofopen.c),
#: the FILE's 216 bytes and its vtable pointer right below the lock.
LOCK_REACH = 256
LINE = 64


def _around_locks(resolver: symbols.CodeResolver, pid, charged, addr, cand: np.ndarray) -> np.ndarray:
    """Of the samples ``cand`` (a system library's code on memory no object of the
    program's holds, in no file: the heap's or an anonymous mapping): those on a lock of
    the library's -- an atomic read-modify-write (a `lock`-prefixed instruction, `xchg`
    with memory), the stream lock that every fgets, fscanf or fputs call takes and
    releases -- or on the lines of the LOCK_REACH bytes below one, the structure it
    guards (the stream's buffer pointers).  The program's own buffers passed to the
    library (a line fgets fills) are elsewhere: after the lock, in blocks the shim
    sampled, or in the program's frames."""
    from capstone import x86

    from numaprof.analyzer import constants

    out = np.zeros(len(addr), dtype=bool)
    idx = np.flatnonzero(cand)
    atomic: dict[tuple[int, int], bool] = {}
    locks = []
    for k in idx.tolist():
        key = (int(pid[k]), int(charged[k]) & 0xFFFFFFFFFFFFFFFF)
        if key not in atomic:
            insn = constants.decoded(resolver, *key)
            atomic[key] = insn is not None and any(o.type == x86.X86_OP_MEM for o in insn.operands) and (
                x86.X86_PREFIX_LOCK in insn.prefix or insn.mnemonic == "xchg")
        if atomic[key]:
            locks.append(k)
    if not locks:
        return out
    a = addr.astype(np.int64)
    for p in np.unique(pid[locks]).tolist():
        lines = np.unique(a[locks][pid[locks] == p] // LINE)
        mine = idx[pid[idx] == p]
        line = a[mine] // LINE
        # the first lock line at or above each sample's line, within the reach
        at = np.searchsorted(lines, line)
        above = lines[np.minimum(at, len(lines) - 1)]
        out[mine] = (at < len(lines)) & (above - line >= 0) & (above - line <= LOCK_REACH // LINE)
    return out


def library_functions(resolver: symbols.CodeResolver, pid, ip) -> Counter:
    """Samples per (library file, function) of the code addresses ``ip``."""
    functions: Counter = Counter()
    names: dict[tuple[int, int], tuple[str, str]] = {}
    for p, i in zip(pid.tolist(), ip.tolist(), strict=True):
        key = (p, i)
        if key not in names:
            found = resolver.elf_address(p, i)
            fn = found[0].function_at(found[1]) if found is not None else None
            names[key] = (os.path.basename(found[0].path) if found is not None else "?", fn or "?")
        functions[names[key]] += 1
    return functions


def library_stack_samples(mt: dict, resolver: symbols.CodeResolver, pid, ip, time, objs: list[Obj],
                          obj) -> np.ndarray | None:
    """Which samples are a system library's code on a whole stack mapping (``obj``: each
    sample's object, after the program's variables were named by frame and register):
    stack memory that no variable of the program holds, outside the sampled function's
    own frame (`library_samples` took those), so in the frames of the library functions
    that called it -- strtof's digit buffers while a digit routine runs, vfscanf's work
    area while strtof runs.  A program's array passed to the library is named by the
    frame that holds it (analyzer/varattr.py) and stays the program's; so does any
    stack memory the program's own code touches.  Limit: a program's scalar of under 64
    bytes written by the library (`sscanf(line, "%f", &v)`) is not named by another
    frame and is counted here, one sample in each call.  None when there is none."""
    raw = np.array([o.kind == "stack" and o.key[0] == "map" for o in objs] + [False])
    on = raw[obj]
    if not on.any():
        return None
    code = code_mappings(mt, _library_code)
    if code is None:
        return None
    idx = np.flatnonzero(on)
    theirs = att.locate(pid[idx], ip[idx], time[idx], code[0]) >= 0
    if not theirs.any():
        return None
    mask = np.zeros(len(obj), dtype=bool)
    mask[idx[theirs]] = True
    return mask


def _own_frame(resolver: symbols.CodeResolver, regs: dict, pid, ip, addr, idx) -> np.ndarray:
    """Of the samples ``idx``: the address is in the sampled function's own frame."""
    sp = np.asarray(regs["sp"])[idx].astype(np.int64)
    bp = np.asarray(regs["bp"])[idx].astype(np.int64)
    a = addr[idx].astype(np.int64)
    out = np.zeros(len(idx), dtype=bool)
    rules: dict[tuple[int, int], tuple[int, int] | None] = {}
    for k, (p, i) in enumerate(zip(pid[idx].tolist(), ip[idx].tolist(), strict=True)):
        if (p, i) not in rules:
            found = resolver.elf_address(p, i)
            rules[(p, i)] = frames.frame_index(found[0]).cfa_rule(found[1]) if found is not None else None
        rule = rules[(p, i)]
        if rule is None or (rule[0] == frames.DW_BP and not bp[k]):
            continue
        cfa = (sp[k] if rule[0] == frames.DW_SP else bp[k]) + rule[1]
        out[k] = sp[k] - RED_ZONE <= a[k] < cfa
    return out


def library_note(n: int, with_address: int, functions: Counter) -> str:
    """The finding of the samples system libraries spent on their own data."""
    share = n / max(with_address, 1)
    top = ", ".join(f"{fn} ({lib}) {100.0 * c / n:.0f}%" for (lib, fn), c in functions.most_common(3)
                    if c >= 0.01 * n)
    head = (f"{n} samples ({100.0 * share:.1f}% of those with an address) were system libraries' work on "
            f"their own data — their tables, static state, locks, buffers and stack frames, and the "
            f"string literals passed to them — in {top}")
    if share < NOTE_SHARE:
        return f"{head}: left out of the objects and the traffic"
    return (f"{head}: no array of the program's and nothing a placement moves (read-only tables are in "
            "every core's caches); the calls to these functions are what costs — fewer calls, or a "
            "vectorised or inlined version of them. Left out of the objects and the traffic")
