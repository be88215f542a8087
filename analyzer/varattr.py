"""Attribution of samples to variables where the address alone names no object
(docs/analyzer.md, stack objects and attribution by code).

A sample whose address falls in no allocation or symbol -- only in a whole mapping
(`[stack]`, a thread's `stack@…`, `[heap]`, `anon@…`) or in nothing -- is named by the
code that made the access, from the registers the software backend records with it
(docs/profile-format.md: `sp`, `bp`, `insn_off`, `base_reg`, `index_reg`, `base_off`):

1. **frame** -- the canonical frame address of the sampled function (its CFA rule at the
   sampled ip applied to `sp` or `bp`) places the address in one of the function's
   locals (DW_AT_location relative to the frame base, DW_AT_frame_base; a local of a
   block or of an inlined function too);
2. **register** -- at the charged instruction (ip − `insn_off`) a pointer variable's
   location list puts it in the access's base register (a Fortran automatic array in
   `rbx`, a pointer parameter), or its value is the stack pointer and the access's base
   register holds that same pointer (`mov %rsp,%r12`); a pointer to a structure names
   the access by type and member, as perf's data-type profiling does
   (tools/perf/util/annotate-data.c: the type of the register the instruction accesses
   memory through, and the member at its offset);
3. **frame** again, for what is left on a stack: the frames seen at other samples of the
   program (the caller of `memset`, whose local the libc code is clearing) place it.

One logical object per declared variable (or type and member), whichever thread or
call made an instance of it; each instance is the variable's storage in one frame (or
what one pointer value points to), so a pattern is classified from offsets within each
instance.  An object is thread-private when every access to each instance came from the
thread whose stack frame holds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from numaprof.analyzer import cxxnames, datatype, dwarfloc, frames, symbols

INSN_OFF_UNKNOWN = -(1 << 15)  # samples.insn_off: too far to store
BASE_OFF_UNKNOWN = -(1 << 31)  # samples.base_off: too far to store
RED_ZONE = 128  # bytes below the stack pointer a leaf function may use (x86-64 psABI)
SPILL_SLOT = 8  # bytes of the highest spill slot (a general or scalar floating register)
MIN_OBSERVED = 64  # bytes: locals this size or larger are looked for in other frames
MAX_OBSERVED = 4096  # frame instances compared with the samples left on a stack
ADDR_MASK = (1 << 64) - 1

FRAME, REGISTER, TYPE, SPILL = "frame", "register", "type", "spill"


@dataclass
class Samples:
    """The registers of the samples with an address (parallel arrays)."""
    pid: np.ndarray
    tid: np.ndarray
    time: np.ndarray
    ip: np.ndarray
    addr: np.ndarray
    size: np.ndarray
    sp: np.ndarray
    bp: np.ndarray
    insn_off: np.ndarray
    base_reg: np.ndarray
    base_off: np.ndarray
    region: np.ndarray  # the mapping (any id) holding each address, -1 none
    #: whether each address is on the stack mapping that holds the sample's stack pointer:
    #: the sampled thread's own stack, beyond its frame too (a caller's local reached
    #: through a callee's pointer); None: not known, the frame alone says
    own_stack: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.addr)


@dataclass
class VarObject:
    """One logical object named by a variable, or by a type and member."""
    key: tuple
    name: str
    site: str
    attribution: str  # frame | register | type | spill
    kind: str = "stack"  # stack (its instances are on stacks) | heap
    thread_private: bool = False


@dataclass
class Attribution:
    objects: list[VarObject]
    sample: np.ndarray  # int64: the samples attributed (indexes into Samples)
    instance: np.ndarray  # int64: each one's instance
    inst_pid: np.ndarray  # int64, per instance
    inst_start: np.ndarray  # uint64
    inst_end: np.ndarray  # uint64 (exclusive)
    inst_obj: np.ndarray  # int64: index into objects

    @staticmethod
    def empty() -> Attribution:
        z = np.zeros(0, dtype=np.int64)
        u = np.zeros(0, dtype=np.uint64)
        return Attribution([], z, z, z, u, u, z)


class _Found:
    """Attributions collected sample group by sample group."""

    def __init__(self):
        self.keys: dict[tuple, int] = {}
        self.objects: list[VarObject] = []
        self.parts: list[tuple] = []  # (samples, object, start, size, owner)

    def object(self, key: tuple, name: str, site: str, how: str) -> int:
        k = self.keys.get(key)
        if k is None:
            k = self.keys[key] = len(self.objects)
            self.objects.append(VarObject(key, name, site, how))
        return k

    def add(self, samples, obj: int, start, size: int, owner) -> None:
        if len(samples):
            n = len(samples)
            self.parts.append((samples, np.full(n, obj, dtype=np.int64), np.asarray(start, dtype=np.int64),
                               np.full(n, size, dtype=np.int64), np.broadcast_to(np.asarray(owner, dtype=np.int64), (n,))))


def _slot_name(var) -> str:
    """A local's name; a pointer variable's own slot is ``p (pointer)``: its accesses load
    or store the pointer, and ``p`` alone names the array it points to (a heap object).
    So is a std::vector's (its three pointers; ``v`` names its elements)."""
    pointer = var.handle or (var.type is not None and var.type.pointer)
    return f"{var.name} (pointer)" if pointer else var.name


def unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a 2-D integer array in ascending order, and each row's index
    among them: ``np.unique(keys, axis=0, return_inverse=True)``, by one lexsort (numpy
    sorts such rows as opaque bytes, several times slower)."""
    if len(keys) == 0:
        return keys[:0], np.zeros(0, dtype=np.int64)
    order = np.lexsort(keys.T[::-1])
    s = keys[order]
    new = np.ones(len(s), dtype=bool)
    new[1:] = (s[1:] != s[:-1]).any(axis=1)
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return s[new], inverse


def attribute(s: Samples, candidate: np.ndarray, in_stack: np.ndarray, resolver) -> Attribution:
    """Names the ``candidate`` samples (no object holds their address, or only a whole
    mapping) by frame or register where the DWARF of their code allows; ``in_stack``
    marks the samples whose address is in a stack mapping.  ``resolver`` is the
    analysis' :class:`~numaprof.analyzer.symbols.CodeResolver`."""
    n = len(s)
    has = np.asarray(s.sp) != 0
    if n == 0 or not has.any() or not candidate.any():
        return Attribution.empty()
    addr = np.asarray(s.addr).astype(np.int64)
    sp = np.asarray(s.sp).astype(np.int64)
    bp = np.asarray(s.bp).astype(np.int64)
    base_reg = np.asarray(s.base_reg).astype(np.int64) - 1
    base_off = np.asarray(s.base_off).astype(np.int64)
    bknown = (base_reg >= 0) & (base_off != BASE_OFF_UNKNOWN)
    bval = addr - base_off  # the access's base register value, where bknown
    tid = np.asarray(s.tid).astype(np.int64)

    # one frame per (pid, ip, insn_off): of every sample when stack samples are to be
    # placed in the frames seen at other samples (_observed), else of the candidates only
    idx = np.flatnonzero(has if (candidate & in_stack).any() else has & candidate)
    keys = np.stack([np.asarray(s.pid)[idx].astype(np.int64), np.asarray(s.ip)[idx].astype(np.int64),
                     np.asarray(s.insn_off)[idx].astype(np.int64)], axis=1)
    ukeys, inv = unique_rows(keys)
    inv = inv.reshape(-1)
    U = len(ukeys)
    pcf: list[frames.PcFrame | None] = [None] * U
    fis: list[frames.FrameIndex | None] = [None] * U
    charged = [0] * U
    bias = [0] * U  # runtime minus link-time address of the sample's code
    cfa_reg = np.full(U, -1, dtype=np.int64)
    cfa_off = np.zeros(U, dtype=np.int64)
    fb_reg = np.full(U, -2, dtype=np.int64)  # -2 none, BASIS_FB: the CFA, else a register
    fb_off = np.zeros(U, dtype=np.int64)
    for u, (pid, ip, off) in enumerate(ukeys.tolist()):
        if off == INSN_OFF_UNKNOWN:
            continue
        found = resolver.elf_address(pid, ip & ADDR_MASK)
        if found is None:
            continue
        info, vaddr = found
        fi = frames.frame_index(info)
        if not fi.usable:
            continue
        fr = fi.frame_at(vaddr, vaddr - off)
        if fr is None:
            continue
        pcf[u], fis[u], charged[u], bias[u] = fr, fi, vaddr - off, (ip & ADDR_MASK) - vaddr
        if fr.cfa is not None:
            cfa_reg[u], cfa_off[u] = fr.cfa
        if fr.frame_base is not None:
            fb_reg[u], fb_off[u] = fr.frame_base
    g = np.full(n, -1, dtype=np.int64)
    g[idx] = inv
    gg = np.maximum(g, 0)
    bp_ok = bp != 0  # rbp not stored (no frame pointer then: docs/profile-format.md, bp_sp)
    cfa_ok = (g >= 0) & ((cfa_reg[gg] == frames.DW_SP) | ((cfa_reg[gg] == frames.DW_BP) & bp_ok))
    cfa = np.where(cfa_reg[gg] == frames.DW_SP, sp, bp) + cfa_off[gg]
    fbr = fb_reg[gg]
    fb = np.where(fbr == dwarfloc.BASIS_FB, cfa, np.where(fbr == frames.DW_SP, sp, bp)) + fb_off[gg]
    fb_ok = (g >= 0) & (((fbr == dwarfloc.BASIS_FB) & cfa_ok) | (fbr == frames.DW_SP)
                        | ((fbr == frames.DW_BP) & bp_ok))
    # the sample's own frame (its owner is the sampled thread): [sp - red zone, CFA)
    own = cfa_ok & (addr >= sp - RED_ZONE) & (addr < cfa)
    # whose memory an access is: the sampled thread's when in its frame or elsewhere on
    # its own stack (a caller's `double v[5]` written through the callee's pointer);
    # -1 (anyone's) otherwise
    own_memory = own if s.own_stack is None else own | np.asarray(s.own_stack, dtype=bool)
    owner_of = np.where(own_memory, tid, -1)
    basis = {dwarfloc.BASIS_FB: (fb, fb_ok), frames.DW_SP: (sp, g >= 0), frames.DW_BP: (bp, (g >= 0) & bp_ok)}

    found = _Found()
    later = np.zeros(n, dtype=bool)
    left = np.asarray(candidate, dtype=bool) & (g >= 0)
    for members in _by_kind(np.flatnonzero(left), g):
        u = int(g[members[0]])
        fr = pcf[u]
        if fr is None:
            continue
        a = addr[members]
        free = np.ones(len(members), dtype=bool)
        for sl in fr.slots:
            if not sl.var.name:
                continue  # a compiler-made variable: no name to give
            if sl.basis == dwarfloc.BASIS_EXPR:
                start, okm = dwarfloc.evaluate(sl.expr, sp[members], bp[members], fb[members], cfa[members])
                used = {o.op_name for o in sl.expr}
                if "DW_OP_fbreg" in used:
                    okm = okm & fb_ok[members]
                if "DW_OP_call_frame_cfa" in used:
                    okm = okm & cfa_ok[members]
            else:
                val, ok = basis[sl.basis]
                start, okm = val[members] + sl.offset, ok[members]
            # an array of a size the DWARF does not give extends at most to the CFA
            end = start + sl.size if sl.size > 0 else np.where(cfa_ok[members], cfa[members], start)
            hit = free & okm & (a >= start) & (a < end)
            if hit.any() and _header_scalar(sl.var):
                # a system header's inlined scalar (`__x` of std::sqrt) holds the user's
                # value: named after where that came from, when the stores say
                taken = _header_value(found, members, hit, fis[u], charged[u], addr, cfa, cfa_ok, owner_of)
                free &= ~taken
                hit &= ~taken
            if hit.any():
                obj = found.object(("var", *sl.var.key), _slot_name(sl.var), sl.var.site, FRAME)
                m = members[hit]
                found.add(m, obj, start[hit], sl.size, owner_of[m])
                free &= ~hit
        # an address on a stack outside this frame is a local of another frame (the
        # caller's `rng`, which a library's member function reaches through `this`): the
        # locals of the frames seen at other samples are looked for first (_observed),
        # what the pointer's type says after
        deferred = free & in_stack[members] & ~own[members]
        later[members[deferred]] = True
        calls = _CallNamer(resolver, int(ukeys[u][0]), bias[u])
        _by_code(found, members, free & ~deferred, fr, fis[u], charged[u], cfa_reg[u], a, sp, base_reg, bknown,
                 bval, own_memory, tid, calls)
    for part in found.parts:
        left[part[0]] = False
    # (not the sampled frame's own memory: a frame that returned held it before)
    _observed(found, s, left & in_stack & ~own, pcf, g, basis, addr, tid, sp)
    for part in found.parts:
        left[part[0]] = False
    for members in _by_kind(np.flatnonzero(left & later), g):
        u = int(g[members[0]])
        _by_code(found, members, np.ones(len(members), dtype=bool), pcf[u], fis[u], charged[u], cfa_reg[u],
                 addr[members], sp, base_reg, bknown, bval, own_memory, tid,
                 _CallNamer(resolver, int(ukeys[u][0]), bias[u]))
    for part in found.parts:
        left[part[0]] = False
    _spills(found, left & in_stack & own & bknown, pcf, fis, charged, g, cfa, base_reg, addr, tid)
    _merge_aliases(found, s, in_stack)
    return _instances(found, s, in_stack, n)


class _CallNamer:
    """Names the block a call of one process's code returned (frames.CALL origins) as a
    heap block from that call is named (objects.call_result_name; the resolver's lines and
    the parsed sources are cached there)."""

    def __init__(self, resolver, pid: int, bias: int):
        self.resolver, self.pid, self.bias = resolver, pid, bias

    def __call__(self, o: frames.Origin) -> frames.Origin | None:
        from numaprof.analyzer import objects  # naming by source: only for these samples

        named = objects.call_result_name(self.resolver, self.pid, o.key[1] + self.bias)
        if named is None:
            return None
        name, site = named
        return frames.Origin(name, ("call", self.pid, site, name), site, None, REGISTER)


def _held_value(found: _Found, v: frames.Variable | frames.Copy) -> tuple[int, int]:
    """(object, slot size) of a frame slot holding what FrameIndex.slot_value says: an
    array's elements kept in the frame (its copy or temporary), or a variable's value --
    a pointer's copy is the pointer's, not the array it points to (which register
    attribution keys by the variable)."""
    if isinstance(v, frames.Copy):
        return found.object(v.key, v.name, v.site, SPILL), max(SPILL_SLOT, v.size)
    pointer = v.type is not None and v.type.pointer
    return (found.object(("pointer" if pointer else "var", *v.key), _slot_name(v), v.site, SPILL),
            max(SPILL_SLOT, v.type.size if v.type is not None else 0))


def _header_scalar(var) -> bool:
    """A scalar variable of a system header's inlined function (`float __x` of
    std::sqrt(float) from <cmath>): its name is the library's, its value the user's."""
    return bool(var.file) and symbols.is_system_source(var.file) and var.type is not None and \
        var.type.kind == "base"


def _header_value(found: _Found, members: np.ndarray, hit: np.ndarray, fi: frames.FrameIndex, pc: int,
                  addr, cfa, cfa_ok, owner_of) -> np.ndarray:
    """The samples ``members[hit]`` on a system header's scalar in the frame named by
    the value its slot holds at pc (frames.FrameIndex.slot_value: an array's copy or
    temporary, a user variable's value), as a spill slot is; returns which of
    ``members`` were."""
    taken = np.zeros(len(members), dtype=bool)
    sel = hit & cfa_ok[members]
    if not sel.any():
        return taken
    slot = addr[members] - cfa[members]
    for k in np.unique(slot[sel]).tolist():
        v = fi.slot_value(pc, int(k))
        if v is None:
            continue
        if not isinstance(v, frames.Copy) and v.file and symbols.is_system_source(v.file):
            continue
        obj, size = _held_value(found, v)
        mine = sel & (slot == k)
        m = members[mine]
        found.add(m, obj, cfa[m] + int(k), size, owner_of[m])
        taken |= mine
    return taken


def _by_code(found: _Found, members, free, fr: frames.PcFrame, fi: frames.FrameIndex, pc: int, cfa_reg: int, a,
             sp, base_reg, bknown, bval, own, tid, calls: _CallNamer) -> None:
    """Samples ``members`` (those ``free``) of one frame named by the pointers its
    variables hold, else by where the base register's pointer came from (a block a
    call returned: by the call's source line, ``calls``)."""
    for h in fr.held:
        if not free.any():
            return
        _held(found, h, fi, pc, members, free, a, sp, cfa_reg, base_reg, bknown, bval, own, tid)
    # what no location names: where the base register's pointer came from
    br, bk = base_reg[members], bknown[members]
    for reg in np.unique(br[free & bk]).tolist():
        if fi.frame_register(pc, reg):
            continue
        o = fi.origin(pc, reg, calls=True)
        if o is not None and o.how == frames.CALL:
            o = calls(o)
        sel = free & bk & (br == reg)
        if o is not None and _name(found, o, fi.types, members[sel], a[sel], bval[members[sel]], own, tid):
            free &= ~sel


def _held(found: _Found, h: frames.Held, fi: frames.FrameIndex, pc: int, members, free, a, sp, cfa_reg,
          base_reg, bknown, bval, own, tid) -> None:
    """Samples of one frame accessing what the pointer variable ``h`` points to: through
    the register that holds it (its location list), or through another register holding
    the same value when that value is the stack pointer of a frame-pointer function (a
    dynamically sized local: `mov %rsp,%r12`), or inside its pointee when that has a
    known size."""
    if not h.var.name:
        return
    m = members
    br, bk, bv = base_reg[m], bknown[m], bval[m]
    through = bk & (br == h.reg)
    if h.reg == frames.DW_SP and cfa_reg == frames.DW_BP:
        val = sp[m] + h.add
        vknown = np.ones(len(m), dtype=bool)
    else:
        val = bv + h.add
        vknown = through
    pointee = fi.types.pointee(h.var.type)
    psize = pointee.size if pointee is not None else 0
    same = vknown & bk & (bv == val)
    inside = vknown & (psize > 0) & (a >= val) & (a < val + psize)
    hit = free & (through | same | inside)
    if not hit.any():
        return
    v = h.var
    # a local pointer into another array (`double *c = u[i][j]`) names that array
    o = fi.origin(pc, h.reg) if not v.parameter and not fi.frame_register(pc, h.reg) else None
    if o is None:
        o = frames.Origin(v.name, ("var", *v.key), v.site, v.type, REGISTER)
    if _name(found, o, fi.types, m[hit], a[hit], val[hit], own, tid):
        free &= ~hit


def _name(found: _Found, o: frames.Origin, types: datatype.Types, m, a, val, own, tid) -> bool:
    """Attributes samples ``m`` (addresses ``a``) to what the pointer ``o`` (value ``val``
    at each access) points to: its own object, or, for a pointer to a structure, the
    structure's type and the member each access falls in.  False when nothing names it."""
    pointee = types.pointee(o.type)
    if pointee is not None and pointee.kind == "record" and pointee.size > 0:
        # the structures themselves (their members: `g->n`, the pointer `g->energy`),
        # named by their type as perf's data-type profiling names them
        if pointee.artificial or pointee.name.endswith("(anonymous)"):
            return False
        obj = found.object(("record", pointee.name), cxxnames.readable(pointee.name),
                           frames._type_site(pointee, o.site), TYPE)
        found.add(m, obj, val, pointee.size, np.where(own[m], tid[m], -1))
        return True
    if not o.name:
        return False
    size = pointee.size if pointee is not None and pointee.kind == "array" else 0
    # what a pointer variable points to is another object than the variable's own
    # storage in its frame (a spilled pointer), though both bear its name
    key = ("points", *o.key[1:]) if o.key[0] == "var" else o.key
    obj = found.object(key, o.name, o.site, o.how)
    found.add(m, obj, val, size, np.where(own[m], tid[m], -1))
    return True


def _observed(found: _Found, s: Samples, todo: np.ndarray, pcf, g, basis, addr, tid, sp) -> None:
    """The samples left on a stack: placed in the array locals of the frames seen at
    other samples (a caller's local cleared by memset in libc), the frame seen nearest in
    time when several held that address.  On the owner's own stack, a frame that can be
    live at the sample: a caller's local lies above the stack pointer, so one below it
    had returned and its memory is another frame's now (Rodinia's hotspot3D: the compute
    loop's spills were readinput's `str`, read at the start, 246 samples)."""
    rest = np.flatnonzero(todo)
    if not len(rest):
        return
    time = np.asarray(s.time).astype(np.int64)
    pid = np.asarray(s.pid).astype(np.int64)
    # frame instances: (pid, owner tid, variable, start, size) with the time they were seen
    inst: dict[tuple, list[int]] = {}
    by_func: dict[int, list[int]] = {}
    for u, fr in enumerate(pcf):
        if fr is not None and any(sl.size >= MIN_OBSERVED for sl in fr.slots):
            by_func.setdefault(fr.func_key, []).append(u)
    if not by_func:
        return
    order = np.argsort(g, kind="stable")
    bounds = np.searchsorted(g[order], np.arange(len(pcf) + 1))
    for us in by_func.values():
        slots = {}
        for u in us:
            for sl in pcf[u].slots:
                if sl.size >= MIN_OBSERVED and sl.var.name:
                    slots.setdefault((sl.var.key, sl.basis, sl.offset), sl)
        m = np.concatenate([order[bounds[u]:bounds[u + 1]] for u in us])
        for sl in slots.values():
            val, ok = basis[sl.basis]
            mm = m[ok[m]]
            if not len(mm):
                continue
            start = val[mm] + sl.offset
            k = np.stack([pid[mm], tid[mm], start], axis=1)
            uk, ui = unique_rows(k)
            ui = ui.reshape(-1)
            t0 = np.full(len(uk), np.iinfo(np.int64).max)
            t1 = np.full(len(uk), np.iinfo(np.int64).min)
            np.minimum.at(t0, ui, time[mm])
            np.maximum.at(t1, ui, time[mm])
            for (p, t, st), a, b in zip(uk.tolist(), t0.tolist(), t1.tolist(), strict=True):
                inst[(p, t, sl.var.key, st)] = [sl.size, a, b, sl]
    if not inst:
        return
    items = sorted(inst.items(), key=lambda kv: -kv[1][0])[:MAX_OBSERVED]
    best = np.full(len(rest), np.iinfo(np.int64).max)
    pick = np.full(len(rest), -1, dtype=np.int64)
    a, t, p, who, below = addr[rest], time[rest], pid[rest], tid[rest], sp[rest]
    for j, ((ip, owner, _, st), (size, t0, t1, _)) in enumerate(items):
        inside = (p == ip) & (a >= st) & (a < st + size) & ((who != owner) | (below <= st))
        if not inside.any():
            continue
        dist = np.maximum(0, np.maximum(t0 - t, t - t1))
        better = inside & (dist < best)
        best[better] = dist[better]
        pick[better] = j
    for j in np.unique(pick[pick >= 0]).tolist():
        (ip, owner, _, st), (size, _, _, sl) = items[j]
        sel = rest[pick == j]
        obj = found.object(("var", *sl.var.key), _slot_name(sl.var), sl.var.site, FRAME)
        found.add(sel, obj, np.full(len(sel), st), size, owner)


def _by_kind(idx: np.ndarray, g: np.ndarray) -> list[np.ndarray]:
    """The samples ``idx`` in groups of one frame kind each (``g``: one per sampled pc),
    so that a frame is read once per group, not per sample."""
    if not len(idx):
        return []
    order = idx[np.argsort(g[idx], kind="stable")]
    return np.split(order, np.flatnonzero(np.diff(g[order])) + 1)


def _spills(found: _Found, todo: np.ndarray, pcf, fis, charged, g, cfa, base_reg, addr, tid) -> None:
    """The samples left in the sampled function's own frame, accessed through the stack
    or frame pointer where no variable of the function is stored: register spills and
    the compiler's temporaries (a kernel short of registers reloads them in its inner
    loop).  A slot every store into which (on the ways to the access) stored one named
    variable's register is that variable's copy, named after it; one whose stores all
    stored an element read from one array is that array's copy, ``lhs (copy)``, and
    one whose stores stored values computed from its elements its temporary, ``lhs
    (temp)``, one object per array and function (frames.FrameIndex.slot_value); the
    others are one
    object per function,
    ``(spills) function``, private to each thread: what perf's data-type profiling
    counts under a pseudo type of its own rather than a variable
    (tools/perf/util/annotate-data.c, "(stack operation)")."""
    rest = np.flatnonzero(todo & np.isin(base_reg, (frames.DW_SP, frames.DW_BP)))
    if not len(rest):
        return
    # per frame kind (one per sampled pc), then per function: a loop per pc, not per sample
    by_func: dict[str, list[np.ndarray]] = {}
    for members in _by_kind(rest, g):
        u = int(g[members[0]])
        fr = pcf[u]
        # a function whose DWARF describes its locals, at this pc or elsewhere (the outlined
        # loop of a parallel region keeps all of them in registers): what is in its frame
        # is none of them, not an array of its (an array at -g1 has no DWARF to say so)
        if fr is None or not (fr.slots or fr.described):
            continue
        slot = addr[members] - cfa[members]
        copied = np.zeros(len(members), dtype=bool)
        for k in np.unique(slot).tolist():
            var = fis[u].slot_value(charged[u], int(k))
            if var is None:
                continue
            hit = slot == k
            m = members[hit]
            obj, size = _held_value(found, var)
            found.add(m, obj, cfa[m] + int(k), size, tid[m])
            copied |= hit
        if not copied.all():
            by_func.setdefault(fr.function, []).append(members[~copied])
    for function, parts in by_func.items():
        m = np.concatenate(parts)
        # one instance per frame: the slots between the lowest and the highest accessed
        below = cfa[m] - addr[m]
        low, high = int(below.max()), int(below.min())
        obj = found.object(("spill", function), spill_name(function), cxxnames.readable(function), SPILL)
        found.add(m, obj, cfa[m] - low, low - high + SPILL_SLOT, tid[m])


def spill_name(function: str) -> str:
    """``(spills) f`` for the function ``f(int) [clone ._omp_fn.0]``."""
    return f"(spills) {bare_function(function)}"


def bare_function(function: str) -> str:
    """A demangled function without its parameters and clone suffix: ``f`` for
    ``f(int) [clone ._omp_fn.0]``."""
    base = function.split(" [clone", 1)[0]
    depth = 0
    for i, ch in enumerate(base):
        if ch in "<":
            depth += 1
        elif ch in ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i and not base[:i].endswith("operator"):
            return base[:i]
    return base


_PATH = re.compile(r"^(?:(?:struct|union|class)\s+)?(?:[\w:<>, ]*?(?:\.|->|::|%))?(\w+)((?:\[\])*)$")


def alias_key(name: str) -> tuple[str, int] | None:
    """(leaf name, subscripts) of a name made by code attribution: ``u[][]`` and
    ``struct level.u[][]`` -> ``("u", 2)``; None for other names."""
    m = _PATH.match(name)
    return (m.group(1), len(m.group(2)) // 2) if m else None


def _plainness(name: str) -> int:
    """Fewer is plainer: a variable (``u[][]``) before a member path (``lv->u``) before a
    type's member (``struct level.u[][]``)."""
    return (name.startswith(("struct ", "union ", "class ")) * 2 +
            any(sep in name for sep in (".", "->", "::", "%")))


def _merge_aliases(found: _Found, s: Samples, in_stack: np.ndarray) -> None:
    """One object for one array reached through several pointers: a grid's rows read
    through a local ``u`` and through ``lv->u`` are the same memory.  Objects named by
    register or type (not a frame's local) merge when their names have the same leaf and
    depth (``u[][]``, ``struct level.u[][]``), none of their samples is on a stack, and
    their samples share a memory region (the heap mapping holding the rows), and at most
    one of them is a qualified name (two records' members of one name are not merged);
    the merged object takes the plainest name, then the one with most samples.  Pointer
    arrays (``u[]``, the rows' pointers) stay apart from what they point to."""
    if len(found.objects) < 2 or not found.parts:
        return
    smp = np.concatenate([p[0] for p in found.parts])
    obj = np.concatenate([p[1] for p in found.parts])
    region = np.asarray(s.region).astype(np.int64)[smp]
    stack = np.asarray(in_stack, dtype=bool)[smp]
    counts = np.bincount(obj, minlength=len(found.objects))
    groups: dict[tuple, list[tuple[int, set]]] = {}
    for k, o in enumerate(found.objects):
        key = alias_key(o.name) if o.attribution != FRAME else None
        mine = obj == k
        if key is None or not mine.any() or stack[mine].any():
            continue
        groups.setdefault(key, []).append((k, set(np.unique(region[mine]).tolist()) - {-1}))
    remap = np.arange(len(found.objects))
    for members in groups.values():
        qualified = {found.objects[k].name for k, _ in members if _plainness(found.objects[k].name)}
        if len(qualified) > 1:
            continue  # `struct a.x` and `struct b.x`: two records' members, not one array
        merged: list[tuple[list[int], set]] = []
        for k, regions in members:
            hit = [g for g in merged if g[1] & regions]
            keep = ([k] + [x for g in hit for x in g[0]], regions.union(*(g[1] for g in hit)))
            merged = [g for g in merged if g not in hit] + [keep]
        for ks, _ in merged:
            if len(ks) > 1:
                rep = min(ks, key=lambda k: (_plainness(found.objects[k].name), -counts[k], k))
                remap[ks] = rep
    if np.array_equal(remap, np.arange(len(found.objects))):
        return
    used = sorted(set(remap.tolist()) & set(np.flatnonzero(counts).tolist()))
    lut = np.full(len(found.objects), -1, dtype=np.int64)
    lut[used] = np.arange(len(used))
    lut = lut[remap]  # every object -> its merged object's new index
    found.objects = [found.objects[k] for k in used]
    found.keys = {key: int(lut[k]) for key, k in found.keys.items() if lut[k] >= 0}
    found.parts = [(p[0], lut[p[1]], *p[2:]) for p in found.parts]


def _instances(found: _Found, s: Samples, in_stack: np.ndarray, n: int) -> Attribution:
    """Instances of the objects found: one per (process, object, start) where the extent
    is known (a frame's local, a pointer to an array of known size); where it is not (a
    pointer's target), one per (process, object, memory region) from the lowest pointer
    value to the last byte accessed: the rows of a `double ***` grid in the heap are one
    instance, a thread's private copy on its own stack another."""
    if not found.parts:
        return Attribution.empty()
    smp = np.concatenate([p[0] for p in found.parts])
    obj = np.concatenate([p[1] for p in found.parts])
    start = np.concatenate([p[2] for p in found.parts])
    size = np.concatenate([p[3] for p in found.parts])
    owner = np.concatenate([p[4] for p in found.parts])
    pid = np.asarray(s.pid).astype(np.int64)[smp]
    addr = np.asarray(s.addr).astype(np.int64)[smp]
    end = np.where(size > 0, start + size, addr + np.maximum(np.asarray(s.size).astype(np.int64)[smp], 1))
    known = size > 0
    where = np.where(known, start, np.asarray(s.region).astype(np.int64)[smp])
    keys = np.stack([pid, obj, known.astype(np.int64), where], axis=1)
    ukeys, inst = unique_rows(keys)
    inst = inst.reshape(-1)
    m = len(ukeys)
    i_start = np.full(m, np.iinfo(np.int64).max)
    i_end = np.full(m, np.iinfo(np.int64).min)
    # an instance holds every access named by it, also one before the pointer it was
    # named through (a negative displacement: `p[-1]`, a record's member reached from
    # the pointer to the next one)
    acc_end = addr + np.maximum(np.asarray(s.size).astype(np.int64)[smp], 1)
    np.minimum.at(i_start, inst, np.minimum(start, addr))
    np.maximum.at(i_end, inst, np.maximum(end, acc_end))
    tid = np.asarray(s.tid).astype(np.int64)[smp]
    stack = np.asarray(in_stack, dtype=bool)[smp]
    n_obj = len(found.objects)
    all_stack = np.bincount(obj, weights=stack, minlength=n_obj) == np.bincount(obj, minlength=n_obj)
    foreign = np.bincount(obj, weights=(owner != tid), minlength=n_obj) > 0
    for k, o in enumerate(found.objects):
        o.kind = "stack" if all_stack[k] else "heap"
        o.thread_private = bool(all_stack[k] and not foreign[k])
    return Attribution(found.objects, smp, inst, ukeys[:, 0], i_start.astype(np.uint64),
                       i_end.astype(np.uint64), ukeys[:, 1])
