"""The compiler's constants (docs/analyzer.md, "Constants"): loads of literals that a
compiler put in an ELF file's read-only data at no symbol (x86 has no floating-point
or vector immediates: `mulps .LC5(%rip), %xmm7` reads `{0.5, 0.5, 0.5, 0.5}` from
`.rodata.cst16`), read at an address fixed in the instruction (RIP-relative or
absolute, no base or index register).  Such a load costs what an immediate would: the
same few lines are read on every pass and stay in every core's L1.  A timer sample
charged to one was taken in arithmetic (the skid rules charge the access before the
interrupted instruction, docs/backends.md), and a hardware sample of one is almost
always an L1 hit.
That is no array of the program's and nothing a placement moves: the samples are counted
apart, as a system library's work on its own tables is (analyzer/libstate.py), and a
finding names the lines that read them.  A table at no symbol read through an index
(`movss .LC0(,%rax,4), %xmm0`) is data, and stays the file's read-only object."""

from __future__ import annotations

import functools
import os
from collections import Counter

import numpy as np

from numaprof.analyzer import cxxnames, symbols, varattr
from numaprof.analyzer.objects import Obj

#: The share of the samples with an address from which the finding says what it means.
NOTE_SHARE = 0.05
#: Sections of read-only data where compilers put literals (.rodata, .rodata.cst16,
#: .rodata.str1.1, ...)
_SECTIONS = (".rodata",)


def constant_reads(resolver: symbols.CodeResolver, objs: list[Obj], a_obj: np.ndarray, pid: np.ndarray,
                   ip: np.ndarray, addr: np.ndarray, regs: dict | None) -> np.ndarray | None:
    """Which samples read a literal constant: on the read-only mapping object of an ELF
    file (no symbol holds the address), in a `.rodata*` section, by an instruction whose
    memory operand has no base or index register (the sample's ``base_reg`` and
    ``index_reg``; without those columns, the instruction at ``ip`` decoded, as the
    hardware backends sample the access itself).  None when there is none."""
    files = np.array([o.kind == "mapping" and o.path.startswith("/") for o in objs] + [False], dtype=bool)
    cand = np.flatnonzero(files[a_obj])  # a_obj -1 (no object) indexes the trailing False
    if not len(cand):
        return None
    if regs is not None and "index_reg" in regs:
        fixed = (regs["base_reg"][cand] == 0) & (regs["index_reg"][cand] == 0)
        cand = cand[fixed]
    else:
        cand = cand[_fixed_operands(resolver, pid[cand], ip[cand])]
    if not len(cand):
        return None
    keys = np.stack([np.asarray(pid[cand]).astype(np.int64), np.asarray(addr[cand]).astype(np.int64)])
    pairs, inverse = np.unique(keys, axis=1, return_inverse=True)
    literal = np.array([_in_literals(resolver, int(p), int(a) & 0xFFFFFFFFFFFFFFFF) for p, a in pairs.T.tolist()],
                       dtype=bool)
    cand = cand[literal[inverse.ravel()]]
    if not len(cand):
        return None
    mask = np.zeros(len(addr), dtype=bool)
    mask[cand] = True
    return mask


def _in_literals(resolver: symbols.CodeResolver, pid: int, addr: int) -> bool:
    found = resolver.elf_address(pid, addr)
    sec = found[0].section_at(found[1]) if found is not None else None
    return sec is not None and not sec[1] and sec[0].startswith(_SECTIONS)


def _fixed_operands(resolver: symbols.CodeResolver, pid: np.ndarray, ip: np.ndarray) -> np.ndarray:
    """Per sample: whether the instruction at ip has a memory operand at a fixed address."""
    keys = np.stack([np.asarray(pid).astype(np.int64), np.asarray(ip).astype(np.int64)])
    pairs, inverse = np.unique(keys, axis=1, return_inverse=True)
    fixed = np.array([_fixed_operand(resolver, int(p), int(i) & 0xFFFFFFFFFFFFFFFF) for p, i in pairs.T.tolist()],
                     dtype=bool)
    return fixed[inverse.ravel()]


@functools.cache
def _decoder():
    import capstone

    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    return md


def decoded(resolver: symbols.CodeResolver, pid: int, ip: int):
    """The instruction at run-time address ``ip`` of process ``pid``, decoded by Capstone
    with its operands; None when no ELF file's code is there."""
    found = resolver.elf_address(pid, ip)
    code = found[0]._code(found[1], 16) if found is not None else None
    return next(_decoder().disasm(code, found[1], 1), None) if code else None


def _fixed_operand(resolver: symbols.CodeResolver, pid: int, ip: int) -> bool:
    from capstone import x86

    insn = decoded(resolver, pid, ip)
    if insn is None:
        return False
    mems = [o.mem for o in insn.operands if o.type == x86.X86_OP_MEM]
    return any(m.segment == 0 and m.index == 0 and m.base in (0, x86.X86_REG_RIP) for m in mems)


def constants_finding(resolver: symbols.CodeResolver, n: int, with_address: int, pid: np.ndarray,
                      ip: np.ndarray, insn_off: np.ndarray | None, weight: np.ndarray | None) -> str:
    """The finding of ``n`` samples on the compiler's constants, with the lines of the
    instructions they are charged to (``ip`` less ``insn_off`` where it is known)."""
    charged = np.asarray(ip).astype(np.int64)
    if insn_off is not None:
        off = np.asarray(insn_off).astype(np.int64)
        charged = np.where(off == varattr.INSN_OFF_UNKNOWN, charged, charged - off)
    return constants_note(n, with_address, constant_sites(resolver, pid, charged, weight))


def constant_sites(resolver: symbols.CodeResolver, pid: np.ndarray, ip: np.ndarray,
                   weight: np.ndarray | None) -> Counter:
    """Samples per source line (`function@file:line`, else the function) of the code
    addresses ``ip``."""
    sites: Counter = Counter()
    w = np.ones(len(ip)) if weight is None else np.asarray(weight, dtype=np.float64)
    keys = np.stack([np.asarray(pid).astype(np.int64), np.asarray(ip).astype(np.int64)])
    pairs, inverse = np.unique(keys, axis=1, return_inverse=True)
    per = np.bincount(inverse.ravel(), weights=w, minlength=pairs.shape[1])
    for (p, i), n in zip(pairs.T.tolist(), per.tolist(), strict=True):
        sl = resolver.resolve(int(p), int(i) & 0xFFFFFFFFFFFFFFFF)
        if sl is None or not sl.function:
            sites["?"] += n
            continue
        where = f"@{os.path.basename(sl.file)}:{sl.line}" if sl.file and sl.line > 0 else ""
        sites[f"{cxxnames.readable(varattr.bare_function(sl.function))}{where}"] += n
    return sites


def constants_note(n: int, with_address: int, sites: Counter) -> str:
    """The finding of the samples on the compiler's constants."""
    share = n / max(with_address, 1)
    total = max(sum(sites.values()), 1)
    top = ", ".join(f"{site} {100.0 * c / total:.0f}%" for site, c in sites.most_common(3) if c >= 0.01 * total)
    head = (f"{n} samples ({100.0 * share:.1f}% of those with an address) read the compiler's constants — "
            f"literals at fixed addresses in read-only data, at no symbol, in {top}")
    if share < NOTE_SHARE:
        return f"{head}: left out of the objects and the traffic"
    return (f"{head}: loads as cheap as an immediate, always in cache, so the time sampled there was "
            "spent in arithmetic, not waiting on memory; no placement changes it. Left out of the objects "
            "and the traffic")
