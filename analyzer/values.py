"""What a frame slot or a register holds at an instruction (docs/analyzer.md, the spill
rules): the value of a named variable, a copy of an array's or member's element, a
temporary computed from them, or an array's pointer -- followed back through the
reaching definitions of the registers and slots of one function.  A mixin of
frames.FrameIndex, whose CFA rules, variables, decoded code and reaching definitions it
uses."""

from __future__ import annotations

import bisect
from dataclasses import replace

from numaprof.analyzer import datatype, staticvars, symbols, tls
from numaprof.analyzer.frametypes import (
    _CONSTANT,
    _CYCLE,
    _ERRORS,
    CALL,
    Copy,
    Origin,
    Variable,
    _Func,
)

COPY_DEPTH = 10  # registers and frame slots followed back for the value one slot holds (Rodinia
# cfd's flux sums take 10: 6 left 3 % of its samples unnamed; 16 names no more)
DW_XMM0, DW_XMM1 = 17, 18
#: C library math functions (and their f and l forms) by name: the registers of their
#: floating-point arguments, which their result in xmm0 is computed from (System V ABI)
_MATH = {**{n: (DW_XMM0,) for n in (
    "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "fabs", "floor", "ceil", "round",
    "trunc", "rint", "nearbyint", "erf", "erfc", "tgamma", "lgamma")},
         **{n: (DW_XMM0, DW_XMM1) for n in ("pow", "atan2", "hypot", "fmin", "fmax", "fmod", "copysign", "fdim")}}

#: Copy.of_key[0] of a value computed from two scalars (`b * h2inv`)
EXPRESSION = "expr"
#: The math functions that return their results through pointers to the frame
_SINCOS = {"sincos", "sincosf", "sincosl"}
DW_SI, DW_DI = 4, 5  # DWARF numbers of rsi and rdi (System V x86-64 psABI)


class ValueTracking:
    """The value tracking of frames.FrameIndex (its methods are FrameIndex's)."""

    def slot_value(self, pc: int, slot: int) -> Variable | Copy | None:
        """The variable whose value the frame slot at CFA + ``slot`` holds at link-time
        address ``pc``: every store to the slot on the ways into pc (reaching
        definitions, as _reaching_store) stored the register that one named variable
        was in at that store (its location list there), a spill the DWARF does not
        describe once the value is in the frame; or a Copy: every store stored an
        element read from one array (_register_value), or one computed from its elements
        (_computed).  None when the stores differ,
        when one stored a value of neither (a hoisted product), or when that cannot be
        told.
        The stack-slot tracking of perf's data-type profiling
        (tools/perf/util/annotate-data.c: the type of the register stored into a stack
        slot becomes the slot's, struct type_state_stack)."""
        key = (pc, slot, "slot")
        if key not in self._at:
            try:
                v = self._slot_value(pc, slot) if self.usable else None
                self._at[key] = None if v is _CYCLE or v is _CONSTANT else v
            except _ERRORS:
                self._at[key] = None
        return self._at[key]

    def _slot_value(self, pc: int, slot: int, depth: int = COPY_DEPTH) -> Variable | Copy | None:
        f = self._function_at(pc)
        if f is None:
            return None
        insns, addrs = self._code(f)

        def stores(st: datatype.Insn) -> bool:
            if st.op == "call":
                return slot in self._results_at(f, st)
            return (st.op in ("store", "vstore", "istore") and st.index < 0
                    and self.frame_register(st.addr, st.base) and self._cfa_offset(st.addr, st.base, st.disp) == slot)

        at = bisect.bisect_left(addrs, pc)
        if at < len(addrs) and addrs[at] == pc and stores(insns[at]):
            defs: set[int] | None = {at}  # the access is the store itself
        else:
            defs = self._defs(f, pc, stores)
        return self._agree(("vslot", pc, slot), defs, lambda d: self._stored_value(f, insns[d], depth))

    def _stored_value(self, f: _Func, st: datatype.Insn, depth: int) -> Variable | Copy | Origin | None:
        """What the store ``st`` put in a frame slot (slot_value): a constant, a named
        variable's or an array's value (_register_value), or, from a general register
        holding a pointer whose origin is known but no variable (the compiler's own copy
        of `variables + 5 * i`, reloaded round a loop), that array's pointer."""
        if st.op == "istore":
            return _CONSTANT
        if st.op == "call":  # sincos(x, &s, &c): both results are x's temporaries
            return self._math_value(f, st, (DW_XMM0,), depth)
        v = self._register_value(f, st.addr, st.src, depth)
        if v is None and st.op == "store":
            o = self.origin(st.addr, st.src)
            # not a pointer read from another pointer's target (`u[]`): an OpenMP data
            # record's member holding a shared variable's address reads as one, and the
            # pointer it yields is the variable's own value, which that name would not say
            if o is not None and o.name and o.how != CALL and not o.name.endswith("[]"):
                return Copy(o.name, o.key, f.name, 8, pointer=True)
        return v

    def _register_value(self, f: _Func, pc: int, reg: int, depth: int) -> Variable | Copy | None:
        """What register ``reg`` holds just before ``pc``: the value of the named variable
        located there (its location list), or a copy of an element of one array or
        member: every definition reaching pc read it from that array (a load through a
        pointer whose origin is known, or from a static variable), copied a register
        holding one, or reloaded a frame slot holding one.  perf's data-type profiling
        gives a register the type of the memory it was loaded from in the same way
        (tools/perf/util/annotate-data.c, update_insn_state)."""
        v = self._value_at(f, pc, reg, user=True)
        if v is not None or depth <= 0:
            return v
        insns, _ = self._code(f)

        def sets(ins: datatype.Insn) -> bool | None:
            if ins.op == "call":
                if reg == DW_XMM0 and self._math_arguments(ins):
                    return True
                return None if reg in datatype.CALLER_SAVED else False
            return reg in ins.writes

        return self._agree(("value", pc, reg), self._defs(f, pc, sets),
                           lambda d: self._defined_value(f, insns[d], reg, depth - 1))

    def _math_value(self, f: _Func, call: datatype.Insn, args: tuple[int, ...], depth: int) -> Copy | None:
        """What a math function's result is: sqrtf(x) a temporary of the array (or
        variable) x is an element or temporary of."""
        for arg in args:
            v = self._register_value(f, call.addr, arg, depth)
            if isinstance(v, Copy) and v.of_key[0] != "static":
                return v if v.computed else replace(v, computed=True)
        return None

    def _results_at(self, f: _Func, call: datatype.Insn) -> tuple[int, ...]:
        """The frame slots (CFA offsets) a call to sincos (sincosf, sincosl) writes its
        results to: gcc turns `sin(x)` and `cos(x)` of one x into `sincos(x, &s, &c)`
        with s and c in the frame (RSBench's calculate_sig_T).  () for any other call."""
        name = self.info.callee_name(call.next) if call.op == "call" else None
        if name not in _SINCOS:
            return ()
        return tuple(o for o in (self._frame_address(f, call.addr, r, 4) for r in (DW_DI, DW_SI)) if o is not None)

    def _frame_address(self, f: _Func, pc: int, reg: int, depth: int) -> int | None:
        """The frame slot (its CFA offset) whose address register ``reg`` holds just
        before ``pc``: every definition reaching pc is a `lea k(%rsp)` (or rbp) of it, a
        copy of the stack pointer (k 0), or a copy of a register holding it."""
        if depth <= 0:
            return None
        insns, _ = self._code(f)

        def sets(ins: datatype.Insn) -> bool | None:
            if ins.op == "call":
                return None if reg in datatype.CALLER_SAVED else False
            return reg in ins.writes

        defs = self._defs(f, pc, sets)
        if not defs:
            return None
        found = set()
        for d in defs:
            ins = insns[d]
            if ins.op == "lea" and ins.dst == reg and ins.index < 0 and self.frame_register(ins.addr, ins.base):
                found.add(self._cfa_offset(ins.addr, ins.base, ins.disp))
            elif ins.op == "copy" and ins.dst == reg and self.frame_register(ins.addr, ins.src):
                found.add(self._cfa_offset(ins.addr, ins.src, 0))  # `mov %rsp, %rbp`
            elif ins.op == "copy" and ins.dst == reg:
                found.add(self._frame_address(f, ins.addr, ins.src, depth - 1))
            else:
                return None
        return found.pop() if len(found) == 1 else None

    def _math_arguments(self, call: datatype.Insn) -> tuple[int, ...]:
        """The registers a call to a C library math function (`sqrtf`, `pow`, `exp`)
        takes its arguments in, whose value its result is computed from; () for any
        other call."""
        name = self.info.callee_name(call.next) if call.op == "call" else None
        if not name:
            return ()
        base = name[:-1] if name.endswith(("f", "l")) and name[:-1] in _MATH else name
        return _MATH.get(base, ())

    def _defined_value(self, f: _Func, ins: datatype.Insn, reg: int, depth: int) -> Variable | Copy | None:
        """What ``ins`` put in ``reg`` (_register_value)."""
        v = self._value_at(f, ins.next, reg, user=True)  # a variable's location starting at its set
        if v is not None:
            return v
        if ins.op == "copy" and ins.dst == reg:
            return self._register_value(f, ins.addr, ins.src, depth)
        if (ins.op == "arith" or (ins.op == "lea" and ins.size == 4)) and ins.dst == reg:
            return self._computed(f, ins, depth)
        if ins.op in ("zero", "const") and ins.dst == reg:
            return _CONSTANT
        if ins.op == "call" and reg == DW_XMM0:
            return self._math_value(f, ins, self._math_arguments(ins), depth)
        if ins.op not in ("load", "vload") or ins.dst != reg:
            return None
        return self._read_value(f, ins, depth)

    def _computed(self, f: _Func, ins: datatype.Insn, depth: int) -> Copy | None:
        """What an arithmetic instruction's result is: a temporary of the array whose
        element (or temporary) is the value it updates (sse's destination, avx's first
        source: `mulsd %xmm0, %xmm2` with xmm2 an element of `c` read before, c(1,4) *
        pivot in NPB BT's binvcrhs), else of the array the other operand's value is of
        (`divsd (%rdi), %xmm0`: 1.0 / lhs(1,1)).  A scalar's value (a named variable's, a
        static's, a record's scalar member) names the result only when every operand is
        that scalar or a constant (`4 * nelr`, kept in the frame as an index offset, is
        a temporary of nelr; a product of `pivot` and an element is the element's).  Two
        scalars' (HPGMG's `b * h2inv`, hoisted out of the smoother's loop) name it by
        both and the operation, `b * h2inv (temp)`, when neither is such a value itself
        and the instruction is one of the four operations.  None otherwise."""
        ways = []
        if ins.op == "lea":  # a 32-bit sum of registers (an index): of theirs
            for r in (ins.base, ins.index):
                if r >= 0 and r != datatype.RIP:
                    ways.append(lambda r=r: self._register_value(f, ins.addr, r, depth))
        else:
            if ins.src >= 0:
                ways.append(lambda: self._register_value(f, ins.addr, ins.src, depth))
            if ins.src2 >= 0:
                ways.append(lambda: self._register_value(f, ins.addr, ins.src2, depth))
            elif ins.tls or ins.base not in (-1, datatype.RIP):
                ways.append(lambda: self._read_value(f, ins, depth))
        scalars: dict[tuple, Copy] = {}
        unknown = False
        for way in ways:
            v = way()
            if isinstance(v, Copy) and v.of_key[0] != "static" and not v.pointer and not v.scalar:
                return v if v.computed else replace(v, computed=True)
            if v is _CONSTANT or v is _CYCLE:
                continue
            if isinstance(v, Variable) and v.type is not None and v.type.kind == "base":
                v = Copy(v.name, ("var", *v.key), f.name, ins.size, scalar=True)
            if isinstance(v, Copy) and not v.pointer:  # a static's or a member's scalar
                scalars[v.of_key] = v if v.computed else replace(v, computed=True)
            else:
                unknown = True
        # one scalar's alone (`4 * nelr`, `nelr + nelr`); two scalars' (`b * h2inv`: an
        # invariant the compiler hoisted) by both, with the operation; none of one and an
        # unknown value
        if unknown:
            return None
        if len(scalars) == 1:
            return next(iter(scalars.values()))
        if len(scalars) == 2 and ins.operator:
            a, b = scalars.values()
            if ins.operator in "+*":  # either order: one name and one object for `u * v`, `v * u`
                a, b = sorted((a, b), key=lambda c: (c.of, str(c.of_key)))
            if EXPRESSION not in (a.of_key[0], b.of_key[0]):
                return Copy(f"{a.of} {ins.operator} {b.of}", (EXPRESSION, ins.operator, a.of_key, b.of_key), f.name,
                            ins.size, computed=True, scalar=True)
        return None

    def _read_value(self, f: _Func, ins: datatype.Insn, depth: int) -> Variable | Copy | None:
        """What the value ``ins`` reads from its memory operand is: an array's element, a
        static's value, or what the frame slot it reads holds."""
        if ins.base == datatype.RIP:
            found = staticvars.source_name(self.info, ins.disp)
            if found is None:
                return None
            return Copy(found[0], ("static", self.info.path, ins.disp), f.name, ins.size)
        if self.frame_register(ins.addr, ins.base) and not ins.tls:
            # an element of a local array the DWARF places in the frame (Fortran's
            # `tmat(5,5)` of NPB LU's blts, filled through another register): the array's
            # element, whatever stored it
            local = self._slot_at(ins.addr, ins.base, ins.disp) if ins.index < 0 else None
            if local is not None and local.name and local.type is not None and local.type.kind == "array":
                return Copy(local.name, ("var", *local.key), f.name, ins.size)
            slot = self._cfa_offset(ins.addr, ins.base, ins.disp)
            return None if slot is None or ins.index >= 0 else self._slot_value(ins.addr, slot, depth)
        o = self.origin(ins.addr, ins.base) if not ins.tls else None
        if o is None:
            # an element of a thread-local array (OpenMP threadprivate, `_Thread_local`)
            off = self._tls_offset(ins)
            v = tls.variable_at(self.info, off) if off is not None else None
            return Copy(v.name, ("tls", self.info.path, v.symbol), f.name, ins.size) if v is not None else None
        target = self.types.pointee(o.type) if o is not None else None
        if target is not None and not o.name and not target.artificial:
            target = None  # an unnamed pointer (the compiler's): only its record's members say what
        if target is not None and target.kind == "array":
            target = self.types.element(o.type)
        if target is None:  # not known to be a pointer: an offset, a computed address
            return None
        if target.kind == "record":
            # indexed, or off the record: an element of an array of them (a pointer moved
            # along one, `-0x8(%rbx)` with rbx at the next element), the member it lands on
            elements = bool(target.size) and (ins.index >= 0 or not 0 <= ins.disp < target.size)
            off = ins.disp % target.size if elements else ins.disp
            path, mtype = self.types.member_path(target, off)
            if path:
                # a base-type member is a scalar (a struct's `n`, the OpenMP data record's
                # shared `nelr`), unless the load shows the record is an array's element
                return Copy(datatype.member_name(target, path), ("type", target.name, *path), f.name, ins.size,
                            scalar=mtype is not None and mtype.kind == "base" and not elements)
            return None
        return Copy(o.name, o.key, f.name, ins.size)

    @staticmethod
    def _value_at(f: _Func, pc: int, reg: int, user: bool = False) -> Variable | None:
        """The one named variable whose value register ``reg`` is at ``pc``; with ``user``,
        not counting the variables of a system header's inlined function (`__x` of
        std::sqrt(float) holds the user's expression, not a value of the user's)."""
        hits = {}
        for v in f.vars:
            if not v.var.name or (v.scope is not None and not any(a <= pc < b for a, b in v.scope)):
                continue
            if user and v.var.file and symbols.is_system_source(v.var.file):
                continue
            loc = next((c for c in v.locs if c.lo is None or c.lo <= pc < c.hi), None)
            if loc is not None and loc.kind == "val" and loc.basis == reg and loc.off == 0:
                hits[v.var.key] = v.var
        return next(iter(hits.values())) if len(hits) == 1 else None
