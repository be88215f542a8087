"""Stack frames from DWARF (docs/analyzer.md, stack objects): the canonical frame address
(CFA) at a code address from the call-frame information (.eh_frame, else .debug_frame),
and what a function keeps where at one of its instructions -- the variables stored in its
frame (their offsets from the frame base, DW_AT_frame_base, or from the stack or frame
pointer) and the pointers held in registers (location lists: a variable-length or
Fortran automatic array, a pointer parameter).

Lexical blocks and inlined subroutines are walked: a local of a block or of an inlined
function lives in the frame of the function it was compiled into, and is named after
the function that declares it.  Everything is read once per ELF file
(:func:`frame_index`, kept with the file's parsed DWARF) and per code address.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import replace

import numpy as np
from elftools.dwarf.callframe import FDE
from elftools.dwarf.locationlists import (
    BaseAddressEntry,
    LocationEntry,
    LocationExpr,
    LocationParser,
)

from numaprof.analyzer import cxxnames, datatype, staticvars, symbols, tls
from numaprof.analyzer.dwarfloc import (
    BASIS_FB,
    DW_BP,
    DW_SP,
    classify,
    frame_base,
    memory_argument,
    value_parts,
)
from numaprof.analyzer.frametypes import (  # noqa: F401 (the records, also frames.Copy & co.)
    _CONSTANT,
    _CYCLE,
    _ERRORS,
    _NEUTRAL,
    _OFFSETS,
    CALL,
    CONST,
    REFERENCE,
    TP,
    Copy,
    Held,
    Origin,
    PcFrame,
    Slot,
    Variable,
    _Func,
    _Loc,
    _Var,
)
from numaprof.analyzer.values import (  # noqa: F401 (frames.EXPRESSION & co.)
    _MATH,
    _SINCOS,
    COPY_DEPTH,
    DW_XMM0,
    EXPRESSION,
    ValueTracking,
)

EXPLORE = 8192  # instructions looked at for the definitions that reach one register
DW_AX = 0  # DWARF number of rax (System V x86-64 psABI)


def _offset(how: str, k: int) -> Origin:
    return Origin("", (how, k), "", None, how)


def _moved(o: Origin | None, by: int) -> Origin | None:
    """``o`` plus a constant: the thread pointer's or a constant's offset moves; a
    pointer's object does not (the tracking's rule: a pointer moved along is the same
    array's)."""
    return _offset(o.how, o.key[1] + by) if by and o is not None and o.how in _OFFSETS else o


def _sum(a: Origin | None, b: Origin | None, scale: int = 1) -> Origin | None:
    """What a + b * scale is, one of them a constant or the thread pointer plus one: the
    thread pointer's offset, a constant, or the pointer the other is."""
    if a is None or b is None:
        return None
    if b.how == CONST and a.how in _OFFSETS:
        return _offset(a.how, a.key[1] + b.key[1] * scale)
    if a.how == CONST and scale == 1:
        return _offset(TP, a.key[1] + b.key[1]) if b.how == TP else None if b.how == CONST else b
    if b.how == CONST and a.how not in _OFFSETS:
        return a
    return None


class FrameIndex(ValueTracking):
    """The frames of one ELF file's functions (see the module docstring)."""

    def __init__(self, info: symbols.ElfInfo):
        self.info = info
        self.usable = info.elf.get_section_by_name(".debug_info") is not None
        self.types = datatype.Types()
        self._fdes: tuple[np.ndarray, np.ndarray, list] | None = None
        self._rows: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._cfa_at: dict[int, tuple[int, int] | None] = {}
        self._cu_funcs: dict[int, tuple[np.ndarray, np.ndarray, list, list]] = {}
        self._funcs: dict[int, _Func | None] = {}
        self._files: dict[int, list[str]] = {}
        self._at: dict[tuple[int, int], PcFrame | None] = {}
        self._busy: set[tuple] = set()  # definitions being followed (_agree)
        self._work = 0  # registers one origin() may still follow (datatype.WORK)

    # -- call-frame information -------------------------------------------------------
    def cfa_rule(self, vaddr: int) -> tuple[int, int] | None:
        """(DW_SP or DW_BP, offset): the CFA at link-time code address ``vaddr`` is that
        register plus offset; None when no FDE covers it or the rule is another register
        or an expression (a realigned stack: the CFA is read from memory)."""
        if vaddr not in self._cfa_at:  # asked again and again by the slots' reaching stores
            self._cfa_at[vaddr] = self._cfa_rule(vaddr)
        return self._cfa_at[vaddr]

    def _cfa_rule(self, vaddr: int) -> tuple[int, int] | None:
        if self._fdes is None:
            self._fdes = self._read_fdes()
        starts, ends, fdes = self._fdes
        i = int(np.searchsorted(starts, np.uint64(vaddr), side="right")) - 1
        if i < 0 or vaddr >= int(ends[i]):
            return None
        rows = self._rows.get(i)
        if rows is None:
            rows = self._rows[i] = _cfa_rows(fdes[i])
        pcs, regs, offs = rows
        j = int(np.searchsorted(pcs, np.uint64(vaddr), side="right")) - 1
        if j < 0 or regs[j] not in (DW_SP, DW_BP):
            return None
        return int(regs[j]), int(offs[j])

    def _read_fdes(self):
        fdes = []
        try:
            dw = self.info.dwarf()
            entries = dw.EH_CFI_entries() if dw.has_EH_CFI() else dw.CFI_entries() if dw.has_CFI() else []
            fdes = [e for e in entries if isinstance(e, FDE) and e["address_range"] > 0]
        except _ERRORS:
            fdes = []
        fdes.sort(key=lambda e: e["initial_location"])
        starts = np.array([e["initial_location"] for e in fdes], dtype=np.uint64)
        ends = np.array([e["initial_location"] + e["address_range"] for e in fdes], dtype=np.uint64)
        return starts, ends, fdes

    # -- functions and their variables ------------------------------------------------
    def frame_at(self, ip: int, charged: int) -> PcFrame | None:
        """The frame at link-time addresses ``ip`` (where the registers were sampled: the
        CFA) and ``charged`` (the instruction that accessed memory: what is where)."""
        key = (ip, charged)
        if key in self._at:
            return self._at[key]
        out = None
        if self.usable:
            try:
                out = self._frame_at(ip, charged)
            except _ERRORS:
                out = None  # damaged DWARF: no frame
        self._at[key] = out
        return out

    def _frame_at(self, ip: int, charged: int) -> PcFrame | None:
        f = self._function_at(charged)
        if f is None or (ip != charged and self._function_at(ip) is not f):
            return None  # the walk from the access to ip left the function
        cfa = self.cfa_rule(ip)
        slots: list[Slot] = []
        held: list[Held] = []
        later: list[Slot] = []
        parts: list[Slot] = []
        for v in f.vars:
            loc = next((c for c in v.locs if c.lo is None or c.lo <= charged < c.hi), None)
            t = v.var.type
            if loc is None or loc.kind != "mem":
                # where the variable lives in the frame at other instructions: its home
                # slot, which the code spills to or reloads from here
                home = next((c for c in v.locs if c.kind == "mem" and c.basis == BASIS_FB), None)
                if home is not None and t is not None and t.size > 0:
                    later.append(Slot(home.basis, home.off, t.size, v.var, False))
                elif home is None and t is not None:
                    # no home: the slots its value is read from where the DWARF says so
                    # (dwarfloc.value_parts), after the homes (gcc reuses a slot: a
                    # variable's home at some instructions, another's value at others)
                    parts.extend(Slot(BASIS_FB, k, n, v.var, False)
                                 for k, n in sorted({(c.off, c.size) for c in v.locs if c.kind == "part"}))
            if loc is None or loc.kind == "part":
                continue
            if loc.kind == "mem" and loc.basis == DW_BP and (cfa is None or cfa[0] != DW_BP):
                # rbp as a general register (the CFA is not kept from it here): it holds
                # the variable's address, as another register would (a Fortran automatic
                # array's block at -O3: `DW_OP_breg6 (rbp): 0`), not a slot of the frame
                if t is not None:
                    held.append(Held(DW_BP, loc.off, replace(v.var, type=datatype.pointer_to(t)), ref=True))
                continue
            if loc.kind == "mem":
                if t is not None and (t.size > 0 or t.kind == "array"):
                    in_scope = v.scope is None or any(a <= charged < b for a, b in v.scope)
                    slots.append(Slot(loc.basis, loc.off, t.size, v.var, in_scope, loc.expr))
            elif loc.kind == "ptrslot":
                continue  # the frame holds its address, not it (_pointer_home)
            elif loc.kind == "ref" and t is not None:
                # the register holds the variable's address: a pointer to it, as far as
                # what is reached through the register goes
                held.append(Held(loc.basis, loc.off, replace(v.var, type=datatype.pointer_to(t)), ref=True))
            elif t is not None and t.pointer:
                held.append(Held(loc.basis, loc.off, v.var))
        # in scope first; an array without a known size (to the CFA) after the others
        slots.sort(key=lambda s: (not s.in_scope, s.size == 0))
        return PcFrame(f.name, f.key, cfa, f.frame_base, tuple(slots + later + parts), tuple(held), bool(f.vars))

    def _function_at(self, vaddr: int) -> _Func | None:
        dw = self.info.dwarf()
        # the functions of the CUs seen so far first: no .debug_aranges parse per address
        for lo, hi, depth, dies in self._cu_funcs.values():
            hit = np.flatnonzero((lo <= vaddr) & (vaddr < hi))
            if len(hit):
                return self._function(dw, dies[max(hit.tolist(), key=lambda i: depth[i])])
        cu = symbols._cu_at(dw, vaddr)
        if cu is None or cu.cu_offset in self._cu_funcs:
            return None
        got = self._cu_funcs.get(cu.cu_offset)
        if got is None:
            got = self._cu_funcs[cu.cu_offset] = _functions(dw, cu)
        lo, hi, depth, dies = got
        hit = np.flatnonzero((lo <= vaddr) & (vaddr < hi))
        if not len(hit):
            return None
        return self._function(dw, dies[max(hit.tolist(), key=lambda i: depth[i])])

    def _function(self, dw, die) -> _Func:
        if die.offset not in self._funcs:
            self._funcs[die.offset] = self._read_function(dw, die.cu, die)
        return self._funcs[die.offset]

    def _read_function(self, dw, cu, die) -> _Func:
        files = self._files.get(cu.cu_offset)
        if files is None:
            files = self._files[cu.cu_offset] = symbols._cu_files(dw, cu)
        parser = LocationParser(dw.location_lists())
        version = cu.header["version"]
        top = cu.get_top_DIE()
        cu_base = top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes else 0
        name = symbols._die_name(die)
        fb = frame_base(cu, die)
        ranges = symbols._die_ranges(dw, die)
        # where a variable without a declaration (a compiler-made one) is said to be: the
        # function's first line (an outlined OpenMP region has no declaration either)
        where = self.info.line_at(min(lo for lo, _ in ranges)) if ranges else None
        where = (where[0], where[1]) if where else ("?", 0)
        out: list[_Var] = []
        todo = [(die, None, name)]
        while todo:
            scope_die, scope, owner = todo.pop()
            for ch in scope_die.iter_children():
                if ch.tag in ("DW_TAG_variable", "DW_TAG_formal_parameter"):
                    v = self._variable(ch, owner, files, parser, version, cu_base, scope, where)
                    if v is not None:
                        out.append(v)
                elif ch.tag == "DW_TAG_lexical_block":
                    todo.append((ch, symbols._die_ranges(dw, ch) or scope, owner))
                elif ch.tag == "DW_TAG_inlined_subroutine":
                    todo.append((ch, symbols._die_ranges(dw, ch) or scope, symbols._die_name(ch)))
        return _Func(name, die.offset, fb, out, ranges)

    def _variable(self, die, owner, files, parser, version, cu_base, scope, where) -> _Var | None:
        attr = die.attributes.get("DW_AT_location")
        if attr is None:
            return None
        origin = die
        for _ in range(4):
            if "DW_AT_abstract_origin" not in origin.attributes:
                break
            origin = origin.get_DIE_from_attribute("DW_AT_abstract_origin")
        name = datatype._name(origin)
        if "DW_AT_artificial" in origin.attributes and name != "this":
            # a compiler-made parameter (GCC's OpenMP data pointer): never an object's
            # name, but its type tells what the registers loaded from it hold
            if die.tag != "DW_TAG_formal_parameter":
                return None
            name = ""
        elif not name:
            return None
        fi = origin.attributes.get("DW_AT_decl_file")
        line = origin.attributes.get("DW_AT_decl_line")
        if fi is not None and 0 <= fi.value < len(files) and line is not None:
            file, line = files[fi.value], int(line.value)
        else:
            file, line = where
        t = self.types.of(origin)
        var = Variable(name, owner, file, line, t, die.tag == "DW_TAG_formal_parameter", self.types.handle(t))
        locs = []
        parsed = parser.parse_from_attribute(attr, version, die)
        entries = [(None, None, parsed.loc_expr)] if isinstance(parsed, LocationExpr) else []
        if not isinstance(parsed, LocationExpr):
            base = cu_base
            for e in parsed:
                if isinstance(e, BaseAddressEntry):
                    base = e.base_address
                elif isinstance(e, LocationEntry) and e.begin_offset >= 0:
                    lo = e.begin_offset if e.is_absolute else base + e.begin_offset
                    hi = e.end_offset if e.is_absolute else base + e.end_offset
                    entries.append((lo, hi, e.loc_expr))
        # a record passed in memory (over 16 bytes: the psABI's MEMORY class) lies whole in
        # the caller's argument area, whichever of its pieces the DWARF describes
        in_memory = var.parameter and t is not None and t.kind == "record" and t.size > 16
        for lo, hi, expr in entries:
            ops = datatype.parse_expr(die.cu.structs, expr)
            c = classify(ops)
            if c is None and in_memory:
                c = memory_argument(ops)
            if c is not None:
                locs.append(_Loc(lo, hi, *c))
            else:
                locs.extend(_Loc(lo, hi, "part", BASIS_FB, k, size=n) for k, n in value_parts(ops))
        return _Var(var, scope, locs) if locs else None

    # -- where a pointer came from --------------------------------------------------
    def origin(self, pc: int, reg: int, calls: bool = False) -> Origin | None:
        """What register ``reg`` (DWARF number) holds at link-time address ``pc``, from
        the variables' locations there or the instructions that set it (the module
        docstring of analyzer/datatype.py); None when that cannot be told.  With
        ``calls``, also the block a call returned when no variable holds it (how
        "call": the caller names it from the call's source line)."""
        o = self._tracked(pc, reg)
        if o is None or o.how in _OFFSETS:
            return None  # a thread-local variable's accesses are named by their address
        return o if calls or o.how != CALL else None

    def _tracked(self, pc: int, reg: int) -> Origin | None:
        """origin(), and the offsets the tracking follows (TP, CONST), once per pc and reg."""
        key = (pc, reg, "origin")
        if key not in self._at:
            try:
                self._work = datatype.WORK
                o = self._origin(pc, reg, datatype.STEPS) if self.usable else None
                self._at[key] = None if o in _NEUTRAL else o
            except _ERRORS:
                self._at[key] = None
        return self._at[key]

    def frame_register(self, pc: int, reg: int) -> bool:
        """Whether ``reg`` addresses the frame at pc: the stack pointer, or rbp where the
        CFA is kept relative to it (a frame pointer; at -O2 rbp is often a general
        register holding any pointer)."""
        if reg == DW_SP:
            return True
        if reg != DW_BP:
            return False
        rule = self.cfa_rule(pc)
        return rule is not None and rule[0] == DW_BP

    def _origin(self, pc: int, reg: int, steps: int) -> Origin | None:
        if reg < 0 or self.frame_register(pc, reg):
            return None
        v = self._held_at(pc, reg)
        if v is not None:
            held = Origin(v.name, ("var", *v.key), v.site, v.type, "register" if v.name else "type")
            if v.parameter:
                return held  # what the caller passed: the root here
            # a local pointer set from another array's element or a structure's member
            # (`double *c = u[i][j]`, `u = lv->u`): that array is the object, not the view
            deeper = self._walk(pc, reg, steps)
            return deeper if deeper is not None and deeper.how == "type" and deeper.name else held
        return self._walk(pc, reg, steps)

    def _walk(self, pc: int, reg: int, steps: int) -> Origin | None:
        """_origin() from the instructions before pc that set reg."""
        moved = [0]  # constants added to reg on the way back (an offset's, TP and CONST)
        return _moved(self._walk_back(pc, reg, steps, moved), moved[0])

    def _walk_back(self, pc: int, reg: int, steps: int, moved: list[int]) -> Origin | None:
        self._work -= 1
        if self._work < 0:  # a function whose branches multiply the ways to follow
            return None
        f = self._function_at(pc)
        if f is None:
            return None
        insns, addrs = self._code(f)
        start = bisect.bisect_left(addrs, pc) - 1
        for k in range(start, max(start - datatype.WALK, -1), -1):
            ins = insns[k]
            if ins.op == "ret" or (ins.op == "jmp" and not ins.addr < ins.disp <= pc):
                # nothing above falls through to here: a block reached by jumps only (gcc
                # puts a loop's rare branch after the function's return); a jump forward
                # into what was walked (a loop entered in its middle) leads here itself
                return self._reaching(f, pc, reg, steps)
            if reg not in ins.writes:
                if ins.op == "call" and reg in datatype.CALLER_SAVED:
                    return self._named_after(insns, k, reg)  # a call's result: `p = malloc(n)`
                continue
            if ins.op == "step" and ins.dst == reg:
                if ins.src < 0 or steps <= 0:
                    moved[0] += ins.disp
                    continue  # the same pointer, moved along (an iterator)
                # reg += src: reg the pointer, or src the pointer and reg an offset (a
                # call's result: an offset as likely as a block)
                o = self._walk(ins.addr, reg, steps - 1)
                if o is not None and o.how in _OFFSETS:
                    return _sum(o, self._origin(ins.addr, ins.src, steps - 1))
                if o is not None and o.how != CALL:
                    return o
                alt = self._origin(ins.addr, ins.src, steps - 1)
                return alt if alt is not None else o
            if steps <= 0:
                return None
            if ins.op == "copy":
                return self._origin(ins.addr, ins.src, steps - 1)
            if ins.op == "lea" and ins.dst == reg and ins.base == reg and ins.index < 0:
                moved[0] += ins.disp
                continue
            if ins.op == "lea" and ins.dst == reg and ins.base >= 0:
                # the base's object (an index moves along it), or an offset's sum
                o = (self._walk(ins.addr, reg, steps - 1) if ins.base == reg
                     else self._origin(ins.addr, ins.base, steps - 1))
                if o is None or o.how not in _OFFSETS:
                    return o
                if ins.index >= 0:
                    o = _sum(o, self._origin(ins.addr, ins.index, steps - 1), ins.scale)
                return _moved(o, ins.disp)
            if ins.op in ("tp", "const") and ins.dst == reg:
                named = self._named_after(insns, k, reg) if ins.op == "const" else None
                return named or _offset(TP if ins.op == "tp" else CONST, ins.disp)
            if ins.op == "addtp" and ins.dst == reg:
                return _sum(_offset(TP, 0), self._walk(ins.addr, reg, steps - 1))
            if ins.op == "load" and ins.dst == reg:
                return self._loaded(ins, steps - 1)
            if ins.op == "addload" and ins.dst == reg:
                # an element's offset plus the elements' address read from a structure (a
                # Fortran array component: `add (descriptor of g%perm), %r9`), or the
                # pointer plus an offset read from memory
                o = self._loaded(ins, steps - 1)
                return o if o is not None else self._walk(ins.addr, reg, steps - 1)
            return self._named_after(insns, k, reg)
        if start >= 0 and start < datatype.WALK and addrs[0] == min(lo for lo, _ in f.ranges):
            # back at the function's entry without a write: a parameter's register
            v = self._held_at(addrs[0], reg)
            if v is not None and v.name:
                return Origin(v.name, ("var", *v.key), v.site, v.type, "register")
            return None
        if start - datatype.WALK >= 0:
            # set further up than the walk looks (a long Fortran procedure keeps an
            # automatic array's address in r15 from its malloc on, while its location
            # list stops after a few instructions)
            return self._reaching(f, pc, reg, steps)
        return None

    def _reaching(self, f: _Func, pc: int, reg: int, steps: int) -> Origin | None:
        """What ``reg`` holds at ``pc`` from the instructions that set it on every way into
        pc (reaching definitions over the function's branches): their one origin, or None
        when they differ, when a way comes from the function's entry (the caller's value),
        from an indirect jump or from a restore (pop), or past EXPLORE instructions.  A
        register set once before a long loop, or set on each branch to the same array (a
        Fortran procedure rotating its automatic arrays' addresses through r10, r12 and
        r15), is that array wherever it is read.  A call on a way defines rax (its result)
        and leaves the other caller-saved registers unknown: a caller-saved register is
        followed only where every way sets it after the last call (gfortran -O3 keeps a
        dummy argument's address in rcx, reloaded from the frame after each call)."""
        if reg == DW_SP or steps <= 0:
            return None
        insns, _ = self._code(f)
        clobbered = None if reg != DW_AX and reg in datatype.CALLER_SAVED else False

        def sets(ins: datatype.Insn) -> bool | None:
            if ins.op == "call":
                return True if reg == DW_AX else clobbered
            return None if reg in ins.writes and ins.op == "pop" else reg in ins.writes

        return self._agree(("reg", pc, reg), self._defs(f, pc, sets),
                           lambda d: self._walk(insns[d].next, reg, steps - 1))

    def _reaching_store(self, load: datatype.Insn, steps: int) -> Origin | None:
        """What a frame slot read by ``load`` holds, from the stores to it on every way
        into the load (as _reaching for a register): the registers stored agree."""
        slot = self._cfa_offset(load.addr, load.base, load.disp)
        f = self._function_at(load.addr)
        if slot is None or f is None or steps <= 0:
            return None
        insns, _ = self._code(f)

        def stores(st: datatype.Insn) -> bool:
            return (st.op in ("store", "istore") and st.index < 0 and self.frame_register(st.addr, st.base)
                    and self._cfa_offset(st.addr, st.base, st.disp) == slot)

        return self._agree(("slot", load.addr, slot), self._defs(f, load.addr, stores),
                           lambda d: _CONSTANT if insns[d].op == "istore" else
                           self._origin(insns[d].addr, insns[d].src, steps - 1))

    def _agree(self, key: tuple, defs: set[int] | None, origin_of):
        """The one origin of the definitions ``defs`` (origin_of(index)), or the one
        value (slot_value's Variable or Copy), told apart by their keys; those that lead
        back to a definition being followed (around a loop) add nothing, and when all of
        them do, neither does ``key`` (_CYCLE): a pointer the code passes round a loop
        through several frame slots is what it was when it entered the loop."""
        if not defs or key in self._busy:
            return _CYCLE if defs and key in self._busy else None
        self._busy.add(key)
        try:
            found, constant = None, False
            values = []
            for d in sorted(defs):
                o = origin_of(d)
                if o is None:
                    return None
                values.append(o)
            # a running value started from scalars' values, of an array's values (RSBench's
            # `sigT = E * w.T; ... sigT += ...`): the scalars' ways add nothing but make
            # it a temporary, as a constant's do
            scalar = any(isinstance(o, Copy) and o.scalar for o in values) and \
                any(isinstance(o, Copy) and not o.scalar and not o.pointer for o in values)
            for o in values:
                if o is _CYCLE:
                    continue
                if o is _CONSTANT or (scalar and isinstance(o, Copy) and o.scalar):
                    constant = True
                    continue
                if isinstance(o, Copy) and isinstance(found, Copy) and o.key != found.key and \
                        not o.pointer and not found.pointer and \
                        (o.of_key, o.function) == (found.of_key, found.function):
                    # an array's elements as they were read on one way, computed on
                    # another (a running value started from an element): its temporaries
                    found = replace(found, computed=True)
                    continue
                if (isinstance(o, Origin) and isinstance(found, Origin) and o.how == found.how and o.how in _OFFSETS
                        and o.key != found.key and self._same_tls(o.key[1], found.key[1])):
                    # a pointer moved along one thread-local array round a loop
                    found = min(o, found, key=lambda x: x.key[1])
                    continue
                if o is None or (found is not None and o.key != found.key):
                    return None
                found = o
            if found is None:
                return _CONSTANT if constant else _CYCLE
            if constant and isinstance(found, Copy) and not found.computed and not found.pointer:
                found = replace(found, computed=True)  # an element on one way, a constant on another
            return found
        finally:
            self._busy.discard(key)

    def _same_tls(self, a: int, b: int) -> bool:
        """Whether the thread pointer plus ``a`` and plus ``b`` are in one thread-local
        variable of the executable (analyzer/tls.py)."""
        v = tls.variable_at(self.info, a)
        return v is not None and v == tls.variable_at(self.info, b)

    def _tls_offset(self, ins: datatype.Insn, base: Origin | None | bool = False) -> int | None:
        """The offset from the thread pointer of the memory ``ins`` reads when that is a
        constant: `%fs:0xc0(%rcx)` with rcx a constant, `0x28(%rdx)` with rdx the thread
        pointer plus one.  ``base``: what the base register holds, if known."""
        if ins.base < 0 or ins.base == datatype.RIP:
            return ins.disp if ins.tls and ins.base < 0 else None
        if self.frame_register(ins.addr, ins.base):
            return None
        o = self._tracked(ins.addr, ins.base) if base is False else base
        if o is not None and o.how == (CONST if ins.tls else TP):
            return o.key[1] + ins.disp
        return None

    def _defs(self, f: _Func, pc: int, sets) -> set[int] | None:
        """The instructions ``sets`` accepts that reach pc on some way through the
        function's branches, not passing another; None when a way comes from the entry
        or code not decoded, when sets() says None (a value it cannot follow), when an
        indirect jump may lead anywhere, or past EXPLORE instructions."""
        insns, addrs = self._code(f)
        preds = self._preds(f)
        start = bisect.bisect_left(addrs, pc)
        if preds is None or start >= len(addrs) or addrs[start] != pc:
            return None
        seen, todo, defs = {start}, [start], set()
        while todo:
            for p in preds[todo.pop()]:
                if p < 0 or len(seen) > EXPLORE:
                    return None
                if p in seen:
                    continue
                seen.add(p)
                hit = sets(insns[p])
                if hit is None:
                    return None
                if hit:
                    defs.add(p)
                else:
                    todo.append(p)
        return defs

    def _preds(self, f: _Func) -> list[list[int]] | None:
        """Each instruction's predecessors in the function (-1: its entry, or code not
        decoded); None when an indirect jump could lead anywhere."""
        if f.preds is None:
            insns, addrs = self._code(f)
            at = {a: k for k, a in enumerate(addrs)}
            entry = min(lo for lo, _ in f.ranges)
            preds: list[list[int]] = [[] for _ in insns]
            for k, ins in enumerate(insns):
                if ins.addr == entry:
                    preds[k].append(-1)
                if k + 1 < len(insns) and ins.op not in ("jmp", "ret") and ins.next == addrs[k + 1]:
                    preds[k + 1].append(k)
                if ins.op in ("jmp", "jcc"):
                    if not ins.disp:
                        f.preds = False
                        return None
                    t = at.get(ins.disp)
                    if t is not None:
                        preds[t].append(k)
            for k in range(len(insns)):
                if not preds[k] and not insns[k].nop:
                    # reached by no branch: code not decoded, or an exception's landing pad
                    # (alignment padding after a jump is reached by nothing)
                    preds[k].append(-1)
            f.preds = preds
        return f.preds or None

    def _static_pointer(self, address: int) -> Origin | None:
        """What a pointer loaded from the static variable at link-time ``address`` is
        (``mov center_table(%rip), %rbp``): the array it points to, named after it."""
        found = staticvars.pointer_at(self.info, address)
        if found is None:
            return None
        name, die, decl = found
        files = self._files.get(decl.cu.cu_offset)
        if files is None:
            files = self._files[decl.cu.cu_offset] = symbols._cu_files(self.info.dwarf(), decl.cu)
        fi, line = decl.attributes.get("DW_AT_decl_file"), decl.attributes.get("DW_AT_decl_line")
        site = "static pointer"
        if fi is not None and line is not None and 0 <= fi.value < len(files):
            site += f"@{os.path.basename(files[fi.value])}:{int(line.value)}"
        return Origin(name, ("static", self.info.path, address), site, self.types.resolve(die), "register")

    def _named_after(self, insns: list[datatype.Insn], k: int, reg: int) -> Origin | None:
        """The variable whose location is ``reg`` after ``insns[k]`` set it, as long as
        nothing sets it again: the value a call returned (``scratch = malloc(n)``, its
        location list starting an instruction or two after the call) or an instruction
        computed, which the walk back cannot follow further."""
        for ins in insns[k + 1 : k + 1 + datatype.WALK]:
            v = self._held_at(ins.addr, reg)
            if v is not None and v.name:
                return Origin(v.name, ("var", *v.key), v.site, v.type, "register")
            if reg in ins.writes or ins.op == "call":
                break
        if insns[k].op == "call" and reg == DW_AX:
            # what the call returned, in no variable: a compiler's temporary (gfortran's
            # malloc of a WHERE mask), or a pointer whose variable's location is lost
            return Origin("", (CALL, insns[k].next), "", None, CALL)
        return None

    def _loaded(self, ins: datatype.Insn, steps: int) -> Origin | None:
        """What a pointer loaded by ``ins`` from memory is."""
        if ins.base == datatype.RIP:
            return self._static_pointer(ins.disp)
        if ins.tls:
            base = self._origin(ins.addr, ins.base, steps) if ins.base >= 0 else None
            off = self._tls_offset(ins, base)
            return self._tls_pointer(off) if off is not None else None
        if self.frame_register(ins.addr, ins.base):
            if ins.index >= 0:
                return None
            v = self._slot_at(ins.addr, ins.base, ins.disp)
            held = None
            if v is not None and v.type is not None and v.type.kind == "record" and v.name and v.parameter:
                # a pointer member of a record passed by value, in the caller's argument
                # area (RSBench's `data.poles`)
                member = self._member_pointer(ins, v)
                if member is not None:
                    return member
            if v is not None and v.type is not None and v.type.pointer and v.name and \
                    self._home_holds(ins, v):
                held = Origin(v.name, ("var", *v.key), v.site, v.type, "register")
                if v.parameter:
                    return held
            if held is None:
                home = self._pointer_home(ins)
                if home is not None:
                    return home
            # what was stored there before: a register the compiler spilled, or the
            # value of a local pointer into another array (as in _origin)
            store = self._spill(ins)
            deeper = (self._origin(store.addr, store.src, steps) if store is not None
                      else self._reaching_store(ins, steps))
            if held is None or (deeper is not None and deeper.how == "type" and deeper.name):
                return deeper
            return held
        fr = self.frame_at(ins.addr, ins.addr) if ins.index < 0 else None
        for h in fr.held if fr is not None else ():
            # a pointer variable stored at base + disp, loaded: its value (an OpenMP
            # outlined function's shared arguments, fields of the block its caller
            # filled: Fortran's `x` at `DW_OP_breg3 (rbx): 0; DW_OP_plus_uconst: 8`)
            if h.ref and h.reg == ins.base and h.add == ins.disp and h.var.name:
                own = self.types.pointee(h.var.type)
                if own is not None and own.pointer:
                    return Origin(h.var.name, ("var", *h.var.key), h.var.site, own, "register")
        o = self._origin(ins.addr, ins.base, steps)
        if o is not None and o.how == TP:
            return self._tls_pointer(o.key[1] + ins.disp)
        if o is None or o.type is None:
            return None
        pointee = self.types.pointee(o.type)
        if pointee is not None and pointee.kind == "array":
            pointee = self.types.element(o.type)
        if pointee is None:
            return None
        if pointee.kind == "record":
            off = ins.disp % pointee.size if ins.index >= 0 and pointee.size else ins.disp
            path, mtype = self.types.member_path(pointee, off)
            if not path or mtype is None or not (mtype.pointer or mtype.descriptor):
                return None
            key: tuple = ("type", pointee.name, *path)
            if pointee.artificial and any(m.reference and m.name == path[0] for m in pointee.members):
                key = (*key, REFERENCE)  # the shared variable's address: what it loads is the variable
            return Origin(datatype.member_name(pointee, path), key, _type_site(pointee, o.site), mtype, "type")
        if pointee.pointer and o.name:
            if o.key[-1:] == (REFERENCE,):
                return Origin(o.name, o.key[:-1], o.site, pointee, "type")
            return Origin(o.name + "[]", (*o.key, "[]"), o.site, pointee, "type")
        return None

    def _tls_pointer(self, off: int) -> Origin | None:
        """What a pointer loaded from the thread pointer plus ``off`` is: the thread-local
        pointer variable there, its pointee the object (a threadprivate pointer)."""
        v = tls.variable_at(self.info, off)
        t = self.types.resolve(v.type) if v is not None and v.type is not None else None
        if t is None or not t.pointer:
            return None
        return Origin(v.name, ("tls", self.info.path, v.symbol), "thread-local pointer", t, "register")

    def _home_holds(self, load: datatype.Insn, v: Variable) -> bool:
        """Whether the frame slot ``load`` reads, ``v``'s home (its location at other
        instructions: _frame_at's later slots), still holds v: no store reaching the load
        put something else there.  gcc reuses a home slot once the variable's location
        ends (bucket_sort's `cell` at 0x30(%rsp), its location list ending before the
        OpenMP record's pointer is spilled to the same slot across a barrier).  A store
        keeps v there when v's location list puts v in the slot at that store or right
        after it, or v is in the register stored.  Unknown stores (no reaching
        definitions) keep the home's word."""
        f = self._function_at(load.addr)
        slot = self._cfa_offset(load.addr, load.base, load.disp)
        if f is None or slot is None or f.frame_base is None:
            return True
        fb = f.frame_base[1] if f.frame_base[0] == BASIS_FB else None
        mine = next((w for w in f.vars if w.var.key == v.key), None)
        if mine is None or fb is None:
            return True

        def in_slot(pc: int) -> bool:
            loc = next((c for c in mine.locs if c.lo is None or c.lo <= pc < c.hi), None)
            return loc is not None and loc.kind == "mem" and loc.basis == BASIS_FB and fb + loc.off == slot

        if in_slot(load.addr):
            return True
        insns, _ = self._code(f)

        def stores(st: datatype.Insn) -> bool:
            return (st.op in ("store", "vstore") and st.index < 0 and self.frame_register(st.addr, st.base)
                    and self._cfa_offset(st.addr, st.base, st.disp) == slot)

        defs = self._defs(f, load.addr, stores)
        if not defs:
            return True
        for d in defs:
            st = insns[d]
            if in_slot(st.addr) or in_slot(st.next):
                continue
            stored = self._value_at(f, st.addr, st.src)
            if stored is None or stored.key != v.key:
                return False
        return True

    def _pointer_home(self, load: datatype.Insn) -> Origin | None:
        """The array whose address the frame slot ``load`` reads holds: a variable located
        elsewhere in the function as `DW_OP_fbreg k; DW_OP_deref` at that slot (gfortran
        keeps an automatic array's address there across calls)."""
        slot = self._cfa_offset(load.addr, load.base, load.disp)
        f = self._function_at(load.addr)
        if slot is None or f is None or f.frame_base is None or f.frame_base[0] != BASIS_FB:
            return None
        found = {v.var.key: v.var for v in f.vars for c in v.locs
                 if c.kind == "ptrslot" and f.frame_base[1] + c.off == slot and v.var.name and v.var.type}
        if len(found) != 1:
            return None
        v = next(iter(found.values()))
        return Origin(v.name, ("var", *v.key), v.site, datatype.pointer_to(v.type), "register")

    def _spill(self, load: datatype.Insn) -> datatype.Insn | None:
        """The store of a register to the frame slot ``load`` reads (the same offset from
        the CFA), the nearest before it in the function."""
        slot = self._cfa_offset(load.addr, load.base, load.disp)
        f = self._function_at(load.addr)
        if slot is None or f is None:
            return None
        insns, addrs = self._code(f)
        start = bisect.bisect_left(addrs, load.addr) - 1
        for k in range(start, max(start - datatype.WALK, -1), -1):
            st = insns[k]
            if st.op == "store" and st.index < 0 and self.frame_register(st.addr, st.base) and \
                    self._cfa_offset(st.addr, st.base, st.disp) == slot:
                return st
        return None

    def _cfa_offset(self, pc: int, reg: int, disp: int) -> int | None:
        """``reg`` + ``disp`` (reg the stack or frame pointer) as an offset from the CFA."""
        rule = self.cfa_rule(pc)
        return disp - rule[1] if rule is not None and rule[0] == reg else None

    def _held_at(self, pc: int, reg: int) -> Variable | None:
        fr = self.frame_at(pc, pc)
        if fr is None:
            return None
        held = [h.var for h in fr.held if h.reg == reg and h.add == 0]
        # one value in several variables (`struct work *w = arg;` of a thread's start
        # routine): the one whose type says what it points to, not the `void *`
        typed = [v for v in held if v.type is not None and v.type.pointer and v.type.target is not None]
        return (typed or held or [None])[0]

    def _member_pointer(self, load: datatype.Insn, v: Variable) -> Origin | None:
        """The pointer member of the record parameter ``v`` (in the frame) that ``load``
        reads whole, as an origin named `v.member`; None if it reads no pointer member."""
        fr = self.frame_at(load.addr, load.addr)
        slot = next((sl for sl in fr.slots if sl.var is v), None) if fr is not None else None
        at = self._cfa_offset(load.addr, load.base, load.disp)
        if slot is None or slot.basis != BASIS_FB or at is None or fr.frame_base != (BASIS_FB, 0):
            return None  # (the frame base is the CFA, as GCC's DW_OP_call_frame_cfa)
        path, mtype = self.types.member_path(v.type, at - slot.offset)
        if not path or mtype is None or not mtype.pointer or load.size != 8:
            return None
        sep = "%" if v.type.fortran else "."
        return Origin(sep.join([v.name, *path]), ("var", *v.key, *path), v.site, mtype, "register")

    def _slot_at(self, pc: int, reg: int, disp: int) -> Variable | None:
        """The variable stored at ``reg`` + ``disp`` (the stack or frame pointer) at pc."""
        fr = self.frame_at(pc, pc)
        if fr is None:
            return None
        fb = None  # the frame base as (register, k): FB = register + k at pc
        if fr.frame_base is not None and fr.frame_base[0] != BASIS_FB:
            fb = fr.frame_base
        elif fr.frame_base is not None and fr.cfa is not None:
            fb = (fr.cfa[0], fr.cfa[1] + fr.frame_base[1])
        for sl in fr.slots:
            if sl.basis == BASIS_FB:
                if fb is None or fb[0] != reg:
                    continue
                off = disp - fb[1]
            elif sl.basis == reg:
                off = disp
            else:
                continue
            if sl.offset <= off < sl.offset + sl.size:
                return sl.var
        return None

    def _code(self, f: _Func) -> tuple[list, list[int]]:
        if f.code is None:
            insns: list = []
            for lo, hi in sorted(f.ranges):
                code = self.info._code(lo, hi - lo)
                if code:
                    insns.extend(datatype.decode(code, lo))
            f.code = (insns, [i.addr for i in insns])
        return f.code


def _type_site(t: datatype.TypeInfo, fallback: str) -> str:
    """Where a record type is declared: `struct grid@lookup.c:12`."""
    if not t.line or not t.file or t.artificial:
        return fallback
    return f"{cxxnames.readable(t.name)}@{os.path.basename(t.file)}:{t.line}"


def frame_index(info: symbols.ElfInfo) -> FrameIndex:
    """The frames of an ELF file, built on first use and kept with it."""
    if info.frames is None:
        info.frames = FrameIndex(info)
    return info.frames


def _cfa_rows(fde) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pc, CFA register, offset) rows of an FDE's decoded table (register -1: an
    expression)."""
    pcs, regs, offs = [], [], []
    try:
        for row in fde.get_decoded().table:
            rule = row.get("cfa")
            if rule is None:
                continue
            pcs.append(row["pc"])
            regs.append(rule.reg if rule.expr is None and rule.reg is not None else -1)
            offs.append(rule.offset or 0)
    except _ERRORS:
        pass
    return (np.array(pcs, dtype=np.uint64), np.array(regs, dtype=np.int64), np.array(offs, dtype=np.int64))


def _functions(dw, cu):
    """Every subprogram of a CU with code, at any nesting depth, as arrays (low, high),
    nesting depths and DIEs, one row per range.  Unlike symbols._code_scopes it walks into
    subprograms without code too: GCC nests an OpenMP region's outlined function
    (`sweep._omp_fn.0`) in the abstract DIE of the procedure it was outlined from, and a
    Fortran contained procedure in its host."""
    lo, hi, depth, dies = [], [], [], []
    todo = [(cu.get_top_DIE(), 0)]
    while todo:
        die, d = todo.pop()
        for ch in die.iter_children():
            if ch.tag == "DW_TAG_subprogram":
                for a, b in symbols._die_ranges(dw, ch):
                    lo.append(a)
                    hi.append(b)
                    depth.append(d + 1)
                    dies.append(ch)
                if ch.has_children:
                    todo.append((ch, d + 1))
            elif ch.has_children and ch.tag in ("DW_TAG_namespace", "DW_TAG_class_type",
                                                "DW_TAG_structure_type", "DW_TAG_module",
                                                "DW_TAG_lexical_block"):
                todo.append((ch, d))
    return np.array(lo, dtype=np.uint64), np.array(hi, dtype=np.uint64), depth, dies
