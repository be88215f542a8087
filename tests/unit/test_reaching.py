"""Reaching definitions in a function's code (analyzer/frames.py, FrameIndex._reaching):
what a callee-saved register holds at an instruction is the one origin of every
definition that reaches it through the function's branches -- a long Fortran procedure
keeps an automatic array's address in r15 from its malloc on, and its location list
stops a few instructions later (SNAP's dim3_sweep, gfortran -O3)."""

from dataclasses import replace

from numaprof.analyzer import datatype, dwarfloc, frames

R15, R12, RAX, RBX = 15, 12, 0, 3


def _insn(addr, size, op, writes=(), disp=0, nop=False):
    return datatype.Insn(addr, addr + size, frozenset(writes), op, disp=disp, nop=nop)


def _function(indirect=False):
    """0x100 mov %rax,%r15; jne 0x120; mov %rbx,%r15; jmp 0x120 (or jmp *%rax); nop
    padding; 0x120 the loop reading r15, its back edge; ret."""
    insns = [
        _insn(0x100, 3, "copy", {R15}),
        _insn(0x103, 2, "jcc", disp=0x120),
        _insn(0x105, 3, "copy", {R15}),
        _insn(0x108, 2, "jmp", disp=0 if indirect else 0x120),
        _insn(0x10a, 0x16, "other", nop=True),
        _insn(0x120, 4, "load", {RAX}),
        _insn(0x124, 2, "jcc", disp=0x120),
        _insn(0x126, 1, "ret"),
    ]
    return frames._Func("f", 0, None, [], [(0x100, 0x127)], code=(insns, [i.addr for i in insns]))


def _index():
    fi = frames.FrameIndex.__new__(frames.FrameIndex)
    fi._busy, fi._at, fi.usable = set(), {}, False
    return fi


def _origin(name):
    return frames.Origin(name, ("var", "f", name, "f.f90", 1), "f@f.f90:1", None, "register")


def test_every_definition_reaching_the_instruction():
    fi, f = _index(), _function()
    assert fi._defs(f, 0x120, lambda i: R15 in i.writes) == {0, 2}
    # r12 is set nowhere: the way from the entry brings the caller's value
    assert fi._defs(f, 0x120, lambda i: R12 in i.writes) is None
    # an indirect jump may lead anywhere
    assert fi._defs(_function(indirect=True), 0x120, lambda i: R15 in i.writes) is None


def test_the_definitions_must_agree():
    fi, f = _index(), _function()
    same = {0x103: _origin("psi"), 0x108: _origin("psi")}
    fi._walk = lambda pc, reg, steps: same[pc]
    assert fi._reaching(f, 0x120, R15, 4).name == "psi"
    fi._walk = lambda pc, reg, steps: {0x103: _origin("psi"), 0x108: _origin("pc")}[pc]
    assert fi._reaching(f, 0x120, R15, 4) is None
    fi._walk = lambda pc, reg, steps: {0x103: _origin("psi"), 0x108: None}[pc]
    assert fi._reaching(f, 0x120, R15, 4) is None
    # a definition leading back to the one followed (around a loop) adds nothing
    fi._walk = lambda pc, reg, steps: {0x103: _origin("psi"), 0x108: frames._CYCLE}[pc]
    assert fi._reaching(f, 0x120, R15, 4).name == "psi"
    # rax is set in the loop only: the way from the entry brings the caller's value
    assert fi._reaching(f, 0x120, RAX, 4) is None


RCX = 2


def _reloaded(call_after_reload=False):
    """A caller-saved register reloaded after a call on each branch (gfortran -O3 keeps a
    dummy argument's address in rcx and reloads it from the frame after each call):
    0x100 mov slot,%rcx; jne 0x110; call; mov slot,%rcx; 0x110 the access through rcx
    (with a call between the reload and the access, in the variant)."""
    insns = [
        _insn(0x100, 5, "load", {RCX}),
        _insn(0x105, 2, "jcc", disp=0x110),
        _insn(0x107, 5, "call", {7}),
        _insn(0x10c, 4, "load", {RCX}),
    ]
    if call_after_reload:
        insns[2], insns[3] = insns[3], _insn(0x10c, 4, "call", {7})
        insns[2] = _insn(0x107, 5, "load", {RCX})
    insns += [_insn(0x110, 4, "load", {RAX}), _insn(0x114, 1, "ret")]
    return frames._Func("f", 0, None, [], [(0x100, 0x115)], code=(insns, [i.addr for i in insns]))


def test_a_caller_saved_register_set_after_every_call():
    """A call on a way defines rax (its result) and leaves the other caller-saved
    registers unknown: rcx is followed where each way sets it after the last call."""
    fi = _index()
    psi = {0x105: _origin("w"), 0x110: _origin("w")}
    fi._walk = lambda pc, reg, steps: psi[pc]
    assert fi._reaching(_reloaded(), 0x110, RCX, 4).name == "w"
    assert fi._reaching(_reloaded(call_after_reload=True), 0x110, RCX, 4) is None
    # after a call on the one way in, rax is the call's result (followed from there:
    # `p = malloc(n)`), rcx is unknown
    insns = [_insn(0x100, 5, "call", {7}), _insn(0x105, 4, "load", {3}), _insn(0x109, 1, "ret")]
    f = frames._Func("f", 0, None, [], [(0x100, 0x10a)], code=(insns, [i.addr for i in insns]))
    fi._walk = lambda pc, reg, steps: {0x105: _origin("p")}[pc]
    assert fi._reaching(f, 0x105, RAX, 4).name == "p"
    assert fi._reaching(f, 0x105, RCX, 4) is None


def test_definitions_that_all_lead_round_the_loop_add_nothing():
    """A slot reloaded on a way whose only definition is the one being followed (a
    pointer passed round a loop through frame slots) is no other origin: _CYCLE, so that
    the definitions from before the loop decide."""
    fi, f = _index(), _function()
    fi._walk = lambda pc, reg, steps: frames._CYCLE
    assert fi._reaching(f, 0x120, R15, 4) is frames._CYCLE


class _Op:
    def __init__(self, name, *args):
        self.op_name, self.args = name, list(args)


def test_a_slot_holding_an_arrays_address():
    """`DW_OP_fbreg k; DW_OP_deref`: the frame holds the variable's address (gfortran
    spills a dummy argument's or an automatic array's pointer there); a load from that
    slot elsewhere in the function is a pointer to the variable."""
    assert dwarfloc.classify([_Op("DW_OP_fbreg", -112), _Op("DW_OP_deref")]) == ("ptrslot", dwarfloc.BASIS_FB, -112)
    assert dwarfloc.classify([_Op("DW_OP_fbreg", -112)]) == ("mem", dwarfloc.BASIS_FB, -112)
    t = datatype.TypeInfo("array", "", 64, -1)
    ec = frames._Var(frames.Variable("ec", "f", "f.f90", 3, t, True), None,
                     [frames._Loc(0x100, 0x110, "ptrslot", dwarfloc.BASIS_FB, -112)])
    f = frames._Func("f", 0, (dwarfloc.BASIS_FB, 0), [ec], [(0x100, 0x200)])
    fi = _index()
    fi._function_at = lambda pc: f
    fi._cfa_offset = lambda pc, reg, disp: disp - 224  # CFA = rsp + 224
    load = datatype.Insn(0x150, 0x155, frozenset({2}), "load", dst=2, base=7, disp=112, size=8)
    o = fi._pointer_home(load)
    assert o is not None and o.name == "ec" and o.type.pointer
    other = datatype.Insn(0x150, 0x155, frozenset({2}), "load", dst=2, base=7, disp=120, size=8)
    assert fi._pointer_home(other) is None


def test_a_frame_slot_from_the_stores_reaching_the_load():
    """A slot read far from where it was written: the stores that reach the load through
    the branches (both sides of a branch spill the same array's pointer) name it."""
    insns = [
        _insn(0x100, 2, "jcc", disp=0x110),
        datatype.Insn(0x102, 0x107, frozenset(), "store", src=R15, base=7, disp=0x40, size=8),
        _insn(0x107, 2, "jmp", disp=0x117),
        _insn(0x109, 7, "other", nop=True),
        datatype.Insn(0x110, 0x115, frozenset(), "store", src=R12, base=7, disp=0x40, size=8),
        _insn(0x115, 2, "other"),
        datatype.Insn(0x117, 0x11c, frozenset({RAX}), "load", dst=RAX, base=7, disp=0x40, size=8),
        _insn(0x11c, 1, "ret"),
    ]
    f = frames._Func("f", 0, None, [], [(0x100, 0x11d)], code=(insns, [i.addr for i in insns]))
    fi = _index()
    fi._function_at = lambda pc: f
    fi._cfa_offset = lambda pc, reg, disp: disp - 0x80
    fi.frame_register = lambda pc, reg: reg == 7
    load = insns[6]
    fi._origin = lambda pc, reg, steps: {R15: _origin("psi"), R12: _origin("psi")}[reg]
    assert fi._reaching_store(load, 4).name == "psi"
    fi._origin = lambda pc, reg, steps: {R15: _origin("psi"), R12: _origin("pc")}[reg]
    assert fi._reaching_store(load, 4) is None


def test_the_block_a_call_returned():
    """rax after a call, held by no variable: the block the call returned (frames.CALL,
    keyed by the call's return address), which varattr names from the call's source
    line; origin() gives it only to a caller that asks (calls=True)."""
    insns = [_insn(0x100, 5, "call", {7}), _insn(0x105, 3, "copy", {5}), _insn(0x108, 1, "ret")]
    fi = _index()
    fi._held_at = lambda pc, reg: None
    o = fi._named_after(insns, 0, RAX)
    assert o is not None and o.how == frames.CALL and o.key == (frames.CALL, 0x105) and not o.name
    assert fi._named_after(insns, 0, RCX) is None  # a call leaves rcx unknown
    fi.usable, fi._at = True, {}
    fi._origin = lambda pc, reg, steps: o
    assert fi.origin(0x106, RAX) is None
    assert fi.origin(0x106, RAX, calls=True) is o


XMM1, XMM2 = 18, 19  # DWARF numbers of xmm1, xmm2 (x86-64 psABI figure 3.36)


def _spilled(second_src=XMM1, second_var="vol"):
    """`vol` (a double) in xmm1 stored to a frame slot on one side of a branch, xmm2 (or
    xmm1) on the other, the slot read after the join: 0x100 jcc; 0x102 movsd %xmm1,
    0x40(%rsp); jmp; 0x110 movsd %xmm?,0x40(%rsp); 0x117 the load the sample is on."""
    insns = [
        _insn(0x100, 2, "jcc", disp=0x110),
        datatype.Insn(0x102, 0x108, frozenset(), "vstore", src=XMM1, base=7, disp=0x40, size=8),
        _insn(0x108, 2, "jmp", disp=0x117),
        _insn(0x10a, 6, "other", nop=True),
        datatype.Insn(0x110, 0x116, frozenset(), "vstore", src=second_src, base=7, disp=0x40, size=8),
        _insn(0x116, 1, "other"),
        _insn(0x117, 6, "other"),
        _insn(0x11d, 1, "ret"),
    ]
    t = datatype.TypeInfo("base", "double", 8, -1)
    vol = frames._Var(frames.Variable("vol", "f", "f.c", 3, t), None,
                      [frames._Loc(0x100, 0x108, "val", XMM1, 0)])
    second = frames._Loc(0x110, 0x116, "val", second_src, 0)
    if second_var == "vol":
        vol.locs.append(second)
        variables = [vol]
    else:
        variables = [vol, frames._Var(frames.Variable(second_var, "f", "f.c", 4, t), None, [second])]
    f = frames._Func("f", 0, None, variables, [(0x100, 0x11e)], code=(insns, [i.addr for i in insns]))
    fi = _index()
    fi._function_at = lambda pc: f
    fi._cfa_offset = lambda pc, reg, disp: disp - 0x80  # CFA = rsp + 0x80
    fi.frame_register = lambda pc, reg: reg == 7
    return fi


def test_a_spill_slot_holds_the_variable_its_stores_stored():
    """A frame slot no location list describes, read at 0x117: every store reaching the
    read stored xmm1 while `vol` was in it (its location list at the store), so the slot
    is vol's copy (what perf's data-type profiling does with a stack slot)."""
    fi = _spilled(second_var="vol")
    v = fi._slot_value(0x117, 0x40 - 0x80)
    assert v is not None and v.name == "vol"
    assert fi._slot_value(0x117, 0x48 - 0x80) is None  # no store to that slot reaches it


def test_a_spill_slot_of_two_variables_or_of_none_is_no_ones():
    # the other branch stores another variable's register: the slot is neither's
    assert _spilled(second_src=XMM2, second_var="area")._slot_value(0x117, 0x40 - 0x80) is None
    # xmm2 there holds no variable (a hoisted product `u * v`): no name either
    fi = _spilled(second_src=XMM2, second_var="area")
    fi._function_at(0).vars.pop()
    assert fi._slot_value(0x117, 0x40 - 0x80) is None


def test_an_xmm_register_location_is_a_value():
    assert dwarfloc.classify([_Op("DW_OP_reg18")]) == ("val", XMM1, 0)
    assert dwarfloc.classify([_Op("DW_OP_regx", 67)]) == ("val", 67, 0)  # xmm16
    assert dwarfloc.classify([_Op("DW_OP_reg16")]) is None  # the return address column


def test_register_stores_to_the_frame_decode_as_value_stores():
    """`movsd %xmm3, 0x18(%rsp)` and `mov %ecx, 0x8(%rsp)`: a spill of a double and of an
    int, the register stored and the slot (the 8-byte general-register store stays a
    `store`, what a pointer's spill is)."""
    movsd, mov32, mov64 = (datatype.decode(b, 0x1000)[0] for b in (
        bytes.fromhex("f20f115c2418"), bytes.fromhex("894c2408"), bytes.fromhex("48894c2408")))
    assert (movsd.op, movsd.src, movsd.base, movsd.disp, movsd.size) == ("vstore", 20, 7, 0x18, 8)
    assert (mov32.op, mov32.src, mov32.base, mov32.disp, mov32.size) == ("vstore", RCX, 7, 8, 4)
    assert (mov64.op, mov64.src, mov64.disp) == ("store", RCX, 8)


XMM3, XMM4, XMM5, RDI, RCX_ = 20, 21, 22, 5, 2


class _Types:
    """Stands for datatype.Types: the pointer `lhs` points to doubles."""

    double = datatype.TypeInfo("base", "double", 8, -1)

    def pointee(self, t):
        return self.double if t is not None and t.kind == "pointer" else None

    def element(self, t):
        return self.double


def _copied(between=(), stored=XMM3, reload=False):
    """0x100 movsd (%rdi,%rcx,8),%xmm3 (an element of `lhs`, rdi its pointer); the
    instructions ``between`` (0x105 up to 0x120); 0x120 movsd %xmm?,0x40(%rsp); (with
    ``reload``: 0x126 movsd 0x40(%rsp),%xmm4; 0x12c movsd %xmm4,0x48(%rsp)); then the
    read of the last slot stored, at .end()."""
    insns = [datatype.Insn(0x100, 0x105, frozenset({XMM3}), "vload", dst=XMM3, base=RDI, index=RCX_, size=8)]
    insns += list(between) or [datatype.Insn(0x105, 0x120, frozenset(), "other")]
    insns.append(datatype.Insn(0x120, 0x126, frozenset(), "vstore", src=stored, base=7, disp=0x40, size=8))
    if reload:
        insns.append(datatype.Insn(0x126, 0x12c, frozenset({XMM4}), "vload", dst=XMM4, base=7, disp=0x40,
                                   size=8))
        insns.append(datatype.Insn(0x12c, 0x132, frozenset(), "vstore", src=XMM4, base=7, disp=0x48, size=8))
    end = insns[-1].next
    insns += [_insn(end, 6, "other"), _insn(end + 6, 1, "ret")]
    f = frames._Func("eliminate", 0, None, [], [(0x100, end + 7)], code=(insns, [i.addr for i in insns]))
    # entered at 0x100 with nothing in xmm3 yet: the entry's way is the load's
    fi = _lhs_index(f)
    fi.end = end
    return fi


def _lhs_index(f):
    """A frame index over function ``f`` alone (CFA = rsp + 0x80), where rdi at 0x100
    is the pointer `lhs`."""
    fi = _index()
    fi.info, fi.types = None, _Types()
    fi._function_at = lambda pc: f
    fi._cfa_offset = lambda pc, reg, disp: disp - 0x80
    fi.frame_register = lambda pc, reg: reg == 7
    pointer = datatype.TypeInfo("pointer", "double *", 8, -1)
    lhs = frames.Origin("lhs", ("var", "main", "lhs", "b.c", 9), "main@b.c:9", pointer, "register")
    fi.origin = lambda pc, reg, calls=False: lhs if (pc, reg) == (0x100, RDI) else None
    return fi


def test_a_spill_slot_of_an_arrays_element_is_that_arrays_copy():
    """The register stored was loaded from `lhs` through its pointer and is stored as it
    is (other registers computed in between): the slot holds lhs's elements, `lhs
    (copy)`, one object per array and function; so does a slot it is copied on to."""
    mul = datatype.Insn(0x105, 0x120, frozenset({XMM5}), "other")
    for fi, slot in ((_copied([mul]), 0x40), (_copied([mul], reload=True), 0x48)):
        v = fi._slot_value(fi.end, slot - 0x80)
        assert isinstance(v, frames.Copy), (slot, v)
        assert (v.name, v.key, v.site, v.size) == (
            "lhs (copy)", ("copy", "eliminate", "var", "main", "lhs", "b.c", 9), "eliminate", 8)
    # a register copy of the element (`movapd %xmm3,%xmm4`) stored: the same
    copy = datatype.Insn(0x105, 0x120, frozenset({XMM4}), "copy", dst=XMM4, src=XMM3)
    fi = _copied([copy], stored=XMM4)
    v = fi._slot_value(fi.end, 0x40 - 0x80)
    assert isinstance(v, frames.Copy) and v.of == "lhs"


def test_a_spill_slot_of_a_computed_value_is_no_arrays():
    # xmm3 multiplied after its load (`mulsd %xmm0,%xmm3`): a value of no array
    mul = datatype.Insn(0x105, 0x120, frozenset({XMM3}), "other")
    fi = _copied([mul])
    assert fi._slot_value(fi.end, 0x40 - 0x80) is None
    # loaded through a register of unknown origin (an offset, a computed address)
    fi = _copied([datatype.Insn(0x105, 0x120, frozenset(), "other")])
    assert isinstance(fi._slot_value(fi.end, 0x40 - 0x80), frames.Copy)
    fi.origin = lambda pc, reg, calls=False: None
    assert fi._slot_value(fi.end, 0x40 - 0x80) is None
    # a call between the load and the store leaves xmm3 unknown (caller-saved)
    call = datatype.Insn(0x105, 0x120, frozenset({RAX}), "call")
    fi = _copied([call])
    assert fi._slot_value(fi.end, 0x40 - 0x80) is None


def test_register_loads_of_values_decode_as_value_loads():
    """`movsd 0x8(%rdi,%rcx,8),%xmm3` and `movsd 0x10(%rip),%xmm0` (a static double, its
    address the next instruction's plus 0x10); a pointer's 8-byte load stays a `load`."""
    indexed, static, mov64 = (datatype.decode(b, 0x1000)[0] for b in (
        bytes.fromhex("f20f105ccf08"), bytes.fromhex("f20f100510000000"), bytes.fromhex("488b4708")))
    assert (indexed.op, indexed.dst, indexed.base, indexed.index, indexed.disp, indexed.size) == (
        "vload", XMM3, RDI, RCX_, 8, 8)
    assert (static.op, static.dst, static.base, static.disp) == ("vload", 17, datatype.RIP, 0x1018)
    assert (mov64.op, mov64.base, mov64.disp) == ("load", RDI, 8)


XMM0 = 17


def test_a_spill_slot_of_a_value_computed_from_an_element_is_that_arrays_temporary():
    """`mulsd %xmm0, %xmm3` after xmm3 was read from `lhs` (xmm0 a value of no array):
    the result stored is lhs's temporary, `lhs (temp)`, an object of its own beside the
    copies; so is a slot where a way stores the element and another the value computed."""
    mul = datatype.Insn(0x105, 0x120, frozenset({XMM3}), "arith", dst=XMM3, src=XMM3, src2=XMM0)
    fi = _copied([mul])
    v = fi._slot_value(fi.end, 0x40 - 0x80)
    assert isinstance(v, frames.Copy) and v.computed, v
    assert (v.name, v.key) == ("lhs (temp)", ("temp", "eliminate", "var", "main", "lhs", "b.c", 9))
    copy = frames.Copy("lhs", ("var", "main", "lhs", "b.c", 9), "eliminate", 8)
    temp = frames.Copy("lhs", copy.of_key, "eliminate", 8, computed=True)
    assert fi._agree(("t",), {0, 1}, lambda d: (copy, temp)[d]) == temp
    other = frames.Copy("rhs", ("var", "main", "rhs", "b.c", 9), "eliminate", 8)
    assert fi._agree(("t",), {0, 1}, lambda d: (other, temp)[d]) is None


def test_a_computed_value_is_named_by_the_value_it_updates_else_by_the_other():
    """avx's `vmulsd %xmm3, %xmm4, %xmm5` updates xmm4 (its first source): the element in
    xmm3 names the result only when xmm4's value is no array's; a memory operand read
    through `lhs` (`divsd (%rdi), %xmm4`: 1.0 / lhs(1,1)) names it too; a value of no
    array (the accumulator and the operand unknown) names none; a static scalar's, with
    no other value beside it but constants, names its temporary (`dt (temp)`)."""
    for src, src2 in ((XMM4, XMM3), (XMM3, XMM4)):
        mul = datatype.Insn(0x105, 0x120, frozenset({XMM5}), "arith", dst=XMM5, src=src, src2=src2)
        fi = _copied([mul], stored=XMM5)
        v = fi._slot_value(fi.end, 0x40 - 0x80)
        assert isinstance(v, frames.Copy) and (v.of, v.computed) == ("lhs", True), (src, v)
    div = datatype.Insn(0x105, 0x120, frozenset({XMM5}), "arith", dst=XMM5, src=XMM5, base=RDI, size=16)
    fi = _copied([div], stored=XMM5)
    fi.origin = lambda pc, reg, calls=False: (
        frames.Origin("lhs", ("var", "main", "lhs", "b.c", 9), "main@b.c:9",
                      datatype.TypeInfo("pointer", "double *", 8, -1), "register") if reg == RDI else None)
    v = fi._slot_value(fi.end, 0x40 - 0x80)
    assert isinstance(v, frames.Copy) and (v.name, v.computed) == ("lhs (temp)", True)
    none = datatype.Insn(0x105, 0x120, frozenset({XMM5}), "arith", dst=XMM5, src=XMM5, src2=XMM0)
    fi = _copied([none], stored=XMM5)
    assert fi._slot_value(fi.end, 0x40 - 0x80) is None
    static = frames.Copy("dt", ("static", "a.out", 0x4010), "eliminate", 8)
    fi._register_value = lambda f, pc, reg, depth: static
    v = fi._computed(fi._function_at(0), none, 3)
    assert isinstance(v, frames.Copy) and (v.name, v.of_key) == ("dt (temp)", static.of_key), v
    # an element beside it names the result, whichever operand it is
    element = frames.Copy("lhs", ("var", "main", "lhs", "b.c", 9), "eliminate", 8)
    fi._register_value = lambda f, pc, reg, depth: static if reg == XMM5 else element
    assert fi._computed(fi._function_at(0), none, 3).name == "lhs (temp)"
    # a named scalar variable's value: its temporary when alone, never beside an element's
    pivot = frames.Variable("pivot", "eliminate", "b.c", 3, datatype.TypeInfo("base", "double", 8, 1))
    fi._register_value = lambda f, pc, reg, depth: pivot
    assert fi._computed(fi._function_at(0), none, 3).name == "pivot (temp)"
    fi._register_value = lambda f, pc, reg, depth: pivot if reg == XMM5 else element
    assert fi._computed(fi._function_at(0), none, 3).name == "lhs (temp)"
    # two scalars' product (`u * v`, a loop invariant of the compiler's) is neither's
    # alone: both name it, with the operation, when the instruction is one of the four
    # (not a shuffle's or a fused multiply-add's); nor is one scalar's with a value not
    # known
    u = frames.Copy("u", ("type", "(anonymous)", "u"), "relax._omp_fn.0", 8, scalar=True)
    v = frames.Copy("v", ("type", "(anonymous)", "v"), "relax._omp_fn.0", 8, scalar=True)
    fi._register_value = lambda f, pc, reg, depth: u if reg == XMM5 else v
    assert fi._computed(fi._function_at(0), none, 3) is None
    product = replace(none, operator="*")
    got = fi._computed(fi._function_at(0), product, 3)
    assert (got.name, got.scalar, got.computed) == ("u * v (temp)", True, True), got
    assert fi._computed(fi._function_at(0), replace(none, operator="-"), 3).name == "u - v (temp)"
    # `v * u` is `u * v`, one object; `v - u` is not `u - v`
    fi._register_value = lambda f, pc, reg, depth: v if reg == XMM5 else u
    assert fi._computed(fi._function_at(0), product, 3) == got
    assert fi._computed(fi._function_at(0), replace(none, operator="-"), 3).name == "v - u (temp)"
    fi._register_value = lambda f, pc, reg, depth: u if reg == XMM5 else v
    # no longer chains of them: a product of that and a third scalar is no one's
    fi._register_value = lambda f, pc, reg, depth: got if reg == XMM5 else u
    assert fi._computed(fi._function_at(0), product, 3) is None
    fi._register_value = lambda f, pc, reg, depth: u if reg == XMM5 else None
    assert fi._computed(fi._function_at(0), none, 3) is None
    fi._register_value = lambda f, pc, reg, depth: u if reg == XMM5 else frames._CONSTANT
    assert fi._computed(fi._function_at(0), none, 3).name == "u (temp)"


def test_the_four_operations_decode_with_their_operator():
    import capstone

    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    code = {"mulsd %xmm0,%xmm2": b"\xf2\x0f\x59\xd0", "vsubsd %xmm3,%xmm2,%xmm1": b"\xc5\xeb\x5c\xcb",
            "divpd %xmm1,%xmm0": b"\x66\x0f\x5e\xc1", "imul %ebx,%eax": b"\x0f\xaf\xc3",
            "addsubpd %xmm1,%xmm0": b"\x66\x0f\xd0\xc1", "vfmadd231sd %xmm2,%xmm1,%xmm0": b"\xc4\xe2\xf1\xb9\xc2",
            "minsd %xmm1,%xmm0": b"\xf2\x0f\x5d\xc1"}
    want = {"mulsd %xmm0,%xmm2": "*", "vsubsd %xmm3,%xmm2,%xmm1": "-", "divpd %xmm1,%xmm0": "/",
            "imul %ebx,%eax": "*", "addsubpd %xmm1,%xmm0": "", "vfmadd231sd %xmm2,%xmm1,%xmm0": "",
            "minsd %xmm1,%xmm0": ""}
    for text, raw in code.items():
        insn = datatype.decode(raw, 0x1000)[0]
        assert next(md.disasm(raw, 0)).mnemonic == text.split()[0], text
        assert insn.operator == want[text] and (insn.op == "arith" or not want[text]), (text, insn)


def test_integer_arithmetic_decodes_as_arithmetic():
    """32-bit integer arithmetic computes an index (`add %ebp,%r12d`, `imul $5,%eax,%edx`,
    `shl $2,%r11d`, `add 0x9c(%rsp),%eax`), `xor %eax,%eax` is a zero, `lea
    0x0(,%rax,4),%r11d` an index scaled with no base, and `movslq 0x9c(%rsp),%rax` a
    value loaded (an int, widened); 64-bit `add %rbx,%rax` stays a pointer's step."""
    got = [datatype.decode(bytes.fromhex(h), 0x1000)[0] for h in (
        "4101ec", "6bd005", "41c1e302", "03842498000000", "31c0", "448d1c8500000000", "48638424" "9c000000",
        "4801d8")]
    add, imul, shl, addm, xor, lea, movslq, step = got
    assert (add.op, add.dst, add.src, add.src2, add.size) == ("arith", R12, R12, 6, 4)
    assert (imul.op, imul.dst, imul.src, imul.src2) == ("arith", 1, RAX, -1)
    assert (shl.op, shl.dst, shl.src, shl.src2) == ("arith", 11, 11, -1)
    assert (addm.op, addm.dst, addm.base, addm.disp) == ("arith", RAX, 7, 0x98)
    assert xor.op == "zero"
    assert (lea.op, lea.dst, lea.base, lea.index, lea.scale, lea.size) == ("lea", 11, -1, RAX, 4, 4)
    assert (movslq.op, movslq.dst, movslq.base, movslq.disp, movslq.size) == ("vload", RAX, 7, 0x9c, 4)
    assert step.op == "step"


def test_an_index_computed_from_a_shared_scalar_is_its_temporary():
    """Rodinia cfd's compute_flux (an OpenMP region) reads `nelr` from its data record
    into a frame slot, and keeps `4 * nelr` in another round its loop: the first slot is
    `nelr (copy)` (a member of the compiler's record read through its unnamed pointer),
    the second `nelr (temp)`.  A real binary for the first, as gcc -O2 emits it."""
    import os
    import shutil
    import subprocess
    import tempfile

    import pytest

    from numaprof.analyzer import symbols
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    src = """
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void kernel(int n, const float *v, float *out)
{
#pragma omp parallel for
    for (int i = 0; i < n; i++) {
        float a = v[i], b = v[i + n], c = v[i + 2 * n], d = v[i + 3 * n], e = v[i + 4 * n];
        out[i] = a * b + c / (d + e) + a * e - b * c + d;
    }
}
int main(int argc, char **argv)
{
    int n = 1000 * argc;
    float *v = calloc(5 * n, sizeof *v), *out = malloc(n * sizeof *out);
    kernel(n, v, out);
    printf("%f\\n", out[n - 1]);
    return 0;
}
"""
    with tempfile.TemporaryDirectory() as work:
        open(os.path.join(work, "k.c"), "w").write(src)
        exe = os.path.join(work, "k")
        subprocess.run(["gcc", "-O2", "-g", "-fopenmp", "-o", exe, os.path.join(work, "k.c")], check=True)
        info = symbols.elf_info(exe)
        fi = frames.frame_index(info)
        lo = next(int(a) for a, (name, _) in zip(info.func_addr, info.func_info, strict=True)
                  if name == "kernel._omp_fn.0")
        f = fi._function_at(lo)
        insns, _ = fi._code(f)
        # the data record's pointer arrives in rdi, unnamed: its members still say what
        # the loads through it read (the int `n` by value, the pointers v and out)
        loads = [i for i in insns[:12] if i.op in ("load", "vload") and i.base == 5]
        got = {fi._read_value(f, i, 3).name for i in loads if fi._read_value(f, i, 3) is not None}
        assert "n (copy)" in got, (got, loads)
        # and an index computed from it alone is its temporary (`lea 0x0(,%rax,4),%r11d`)
        load = next(i for i in loads if fi._read_value(f, i, 3) is not None and fi._read_value(f, i, 3).of == "n")
        lea = datatype.Insn(load.next, load.next + 8, frozenset({11}), "lea", dst=11, index=load.dst, scale=4, size=4)
        fi._register_value = lambda f_, pc, reg, depth: fi._read_value(f, load, depth) if reg == load.dst else None
        assert fi._computed(f, lea, 3).name == "n (temp)"


def test_arithmetic_decodes_with_the_register_it_updates_and_the_other_operand():
    """sse `mulsd %xmm0,%xmm2` updates xmm2; avx `vmulsd %xmm3,%xmm2,%xmm1` writes xmm1
    from xmm2 and xmm3; `divsd (%rdi),%xmm0` and `subsd 0x20(%rsp),%xmm3` read memory;
    `mulsd 0x10(%rip),%xmm1` a static (its address); `vfmadd231sd %xmm4,%xmm5,%xmm6`
    updates xmm6; `cvtss2sd %xmm1,%xmm0` is xmm1's value alone; `xorpd %xmm0,%xmm0` (a
    zero) is no one's."""
    got = [datatype.decode(bytes.fromhex(h), 0x1000)[0] for h in (
        "f20f59d0", "c5eb59cb", "f20f5e07", "f20f5c5c2420", "f20f590d10000000", "c4e2d1b9f4", "f30f5ac1",
        "660f57c0")]
    assert [(i.op, i.dst, i.src, i.src2) for i in got[:2]] == [("arith", 19, 19, XMM0), ("arith", 18, 19, XMM3)]
    assert [(i.op, i.dst, i.src, i.src2, i.base, i.disp) for i in got[2:5]] == [
        ("arith", XMM0, XMM0, -1, RDI, 0), ("arith", XMM3, XMM3, -1, 7, 0x20),
        ("arith", 18, 18, -1, datatype.RIP, 0x1018)]
    assert (got[5].op, got[5].dst, got[5].src, got[5].src2) == ("arith", 23, 23, 22)
    assert (got[6].op, got[6].dst, got[6].src, got[6].src2) == ("arith", XMM0, -1, 18)
    assert got[7].op == "zero" and got[7].dst == XMM0


def _reused_home(stored_reg=R12, in_slot_until=0x108):
    """`cell` (a pointer) lives at CFA-0x40 until ``in_slot_until``; at 0x110 gcc stores
    ``stored_reg`` to the same slot (bucket_sort's sort_by_cell._omp_fn.0 spills its
    OpenMP data record's pointer over cell's home across a barrier); 0x117 reads it."""
    insns = [
        datatype.Insn(0x100, 0x105, frozenset(), "store", src=R15, base=7, disp=0x40, size=8),
        _insn(0x105, 3, "other"),
        _insn(0x108, 8, "other"),
        datatype.Insn(0x110, 0x115, frozenset(), "store", src=stored_reg, base=7, disp=0x40, size=8),
        _insn(0x115, 2, "other"),
        datatype.Insn(0x117, 0x11c, frozenset({RAX}), "load", dst=RAX, base=7, disp=0x40, size=8),
        _insn(0x11c, 1, "ret"),
    ]
    t = datatype.TypeInfo("pointer", "int *", 8, -1)
    cell = frames._Var(frames.Variable("cell", "f", "f.c", 3, t), None,
                       [frames._Loc(0x100, in_slot_until, "mem", dwarfloc.BASIS_FB, -0x40),
                        frames._Loc(0x108, 0x11d, "val", R15, 0)])
    f = frames._Func("f", 0, (dwarfloc.BASIS_FB, 0), [cell], [(0x100, 0x11d)],
                     code=(insns, [i.addr for i in insns]))
    fi = _index()
    fi._function_at = lambda pc: f
    fi._cfa_offset = lambda pc, reg, disp: disp - 0x80
    fi.frame_register = lambda pc, reg: reg == 7
    return fi, insns[5], cell.var


def test_a_home_slot_reused_for_another_value_is_not_the_variables():
    """A load from a variable's home slot (its location at other instructions) names the
    variable only if the stores reaching the load kept it there."""
    fi, load, cell = _reused_home(stored_reg=R12)  # r12 holds no variable
    assert not fi._home_holds(load, cell)
    fi, load, cell = _reused_home(stored_reg=R15)  # r15 is cell's register at 0x110
    assert fi._home_holds(load, cell)
    fi, load, cell = _reused_home(stored_reg=R12, in_slot_until=0x11d)  # still its home
    assert fi._home_holds(load, cell)


def test_a_math_functions_result_is_a_temporary_of_its_argument():
    """`movaps %xmm3,%xmm0; call sqrtf; movaps %xmm0,%xmm5` with xmm3 an element of `lhs`:
    sqrtf's result is computed from its argument, so the slot it is stored to is lhs's
    temporary (Rodinia cfd's compute_flux: `std::sqrt` of a sum of its `variables`); any
    other call leaves xmm0 no one's."""
    between = [datatype.Insn(0x105, 0x108, frozenset({XMM0}), "copy", dst=XMM0, src=XMM3),
               datatype.Insn(0x108, 0x10d, frozenset({RAX, XMM0}), "call"),
               datatype.Insn(0x10d, 0x120, frozenset({XMM5}), "copy", dst=XMM5, src=XMM0)]
    for callee, named in (("sqrtf", True), ("pow", True), ("printf", False), (None, False)):
        fi = _copied(between, stored=XMM5)
        fi.info = type("Info", (), {"callee_name": staticmethod(lambda ret, c=callee: c if ret == 0x10d else None)})
        v = fi._slot_value(fi.end, 0x40 - 0x80)
        if named:
            assert isinstance(v, frames.Copy) and (v.name, v.computed) == ("lhs (temp)", True), (callee, v)
        else:
            assert v is None, (callee, v)


def test_a_system_headers_inlined_parameter_is_followed_through():
    """xmm3 is `__x`, the parameter of std::sqrt(float) inlined from <cmath>, where the
    element read from `lhs` is stored: that variable holds the user's value, which is
    lhs's copy; a variable of the user's own source in the same place names the slot."""
    t = datatype.TypeInfo("base", "float", 4, -1)
    for file, expect in (("/usr/include/c++/12/cmath", "lhs (copy)"), ("b.c", "x")):
        fi = _copied()
        f = fi._function_at(0)
        f.vars.append(frames._Var(frames.Variable("__x" if expect != "x" else "x", "std::sqrt(float)", file, 463, t,
                                                  True), None, [frames._Loc(0x105, 0x126, "val", XMM3, 0)]))
        v = fi._slot_value(fi.end, 0x40 - 0x80)
        assert v is not None and v.name == expect, (file, v)
        assert (frames.FrameIndex._value_at(f, 0x120, XMM3) is not None) and (
            (frames.FrameIndex._value_at(f, 0x120, XMM3, user=True) is None) == (expect != "x"))


def test_constants_decode_as_constants():
    """`movl $0x0,0xc(%rsp)` stores a constant (a definition of the slot, no one's value);
    `pxor %xmm14,%xmm14` and `vpxor %xmm1,%xmm1,%xmm1` set zero; `pxor %xmm1,%xmm2` does not."""
    istore, pxor, vpxor, other = (datatype.decode(bytes.fromhex(h), 0x1000)[0] for h in (
        "c744240c00000000", "66450feff6", "c5f1efc9", "660fefd1"))
    assert (istore.op, istore.base, istore.disp, istore.size) == ("istore", 7, 0xc, 4)
    assert (pxor.op, pxor.dst) == ("zero", 31) and (vpxor.op, vpxor.dst) == ("zero", 18)
    assert other.op == "other"


def _accumulated(first="istore"):
    """0x100 movsd (%rdi,%rcx,8),%xmm3 (lhs's element); 0x105 jcc 0x110; 0x107 movsd
    %xmm3,0x40(%rsp); 0x10d jmp 0x118; 0x110 movq $0,0x40(%rsp) (or, with ``first``
    "vstore", the element again); 0x118 the read of the slot."""
    insns = [datatype.Insn(0x100, 0x105, frozenset({XMM3}), "vload", dst=XMM3, base=RDI, index=RCX_, size=8),
             _insn(0x105, 2, "jcc", disp=0x110),
             datatype.Insn(0x107, 0x10d, frozenset(), "vstore", src=XMM3, base=7, disp=0x40, size=8),
             _insn(0x10d, 2, "jmp", disp=0x118),
             _insn(0x10f, 1, "other", nop=True),
             datatype.Insn(0x110, 0x118, frozenset(), first, src=XMM3 if first == "vstore" else -1, base=7,
                           disp=0x40, size=8),
             _insn(0x118, 6, "other"), _insn(0x11e, 1, "ret")]
    f = frames._Func("eliminate", 0, None, [], [(0x100, 0x11f)], code=(insns, [i.addr for i in insns]))
    return _lhs_index(f)


def test_a_constant_on_one_way_adds_nothing_but_makes_a_temporary():
    """A slot holding lhs's element on one way and a constant on the other (an accumulator
    started at zero, `movq $0x0`) holds values computed from lhs: `lhs (temp)`; stored the
    element on both ways it is lhs's copy.  A constant store is a definition: the walk
    does not pass it to older stores.  Constants alone name nothing, and a pointer set to
    NULL on one way is what the other ways make it."""
    v = _accumulated()._slot_value(0x118, 0x40 - 0x80)
    assert isinstance(v, frames.Copy) and (v.name, v.computed) == ("lhs (temp)", True), v
    v = _accumulated("vstore")._slot_value(0x118, 0x40 - 0x80)
    assert isinstance(v, frames.Copy) and (v.name, v.computed) == ("lhs (copy)", False), v
    fi = _accumulated()
    assert fi._agree(("k",), {0, 1}, lambda d: frames._CONSTANT) is frames._CONSTANT
    psi = _origin("psi")
    assert fi._agree(("k",), {0, 1}, lambda d: (frames._CONSTANT, psi)[d]) == psi
    fi.usable, fi._at = True, {}
    fi._slot_value = lambda pc, slot: frames._CONSTANT
    assert fi.slot_value(0x118, -0x40) is None


def test_a_running_value_started_from_scalars_is_what_it_accumulates():
    """RSBench's `sigT = E * w.T`, then `sigT += (pole.MP_RT * ...).r` round the loop: the
    slot holds a scalars' value on the way in and an element's temporary on the way
    round, so it is the element's temporary (before: no one's, `(spills)
    calculate_micro_xs_doppler`, 441 samples); an element read as it is on one way and
    a scalar on another is the element's temporary too, whichever scalars start it.
    Two scalars' values alone, or a scalar's and a pointer's, still name nothing."""
    fi = _accumulated()
    e_t = frames.Copy("E * Window.T", (frames.EXPRESSION, "*", ("var", "E"), ("type", "Window", "T")), "f", 8,
                      computed=True, scalar=True)
    n = frames.Copy("n", ("var", "n"), "f", 8, computed=True, scalar=True)
    rt = frames.Copy("Pole.MP_RT.r", ("type", "Pole", "MP_RT.r"), "f", 8, computed=True)
    copy = replace(rt, computed=False)
    for ways in ((e_t, rt), (rt, e_t), (e_t, rt, rt), (e_t, n, rt), (rt, n, e_t)):
        got = fi._agree(("k", ways), set(range(len(ways))), lambda d, ways=ways: ways[d])
        assert got == rt, (ways, got)
    assert fi._agree(("k", 1), {0, 1}, lambda d: (copy, e_t)[d]) == rt
    assert fi._agree(("k", 2), {0, 1}, lambda d: (e_t, n)[d]) is None
    pointer = replace(copy, pointer=True)
    assert fi._agree(("k", 4), {0, 1}, lambda d: (e_t, pointer)[d]) is None


def test_a_slot_holding_an_arrays_pointer_is_that_arrays_pointer():
    """`mov %r15,0x40(%rsp)` with r15 no variable's but a pointer whose origin is `lhs`
    (the compiler's own `lhs + 5 * i`, reloaded round a loop: Rodinia cfd's time_step):
    the slot is `lhs (pointer)`, as a pointer variable's own slot is named; not from a
    pointer read from another's target (`u[]`), nor from a register of no known origin."""
    insns = [_insn(0x100, 5, "other"),
             datatype.Insn(0x105, 0x10a, frozenset(), "store", src=R15, base=7, disp=0x40, size=8),
             _insn(0x10a, 6, "other"), _insn(0x110, 1, "ret")]
    f = frames._Func("step", 0, None, [], [(0x100, 0x111)], code=(insns, [i.addr for i in insns]))
    fi = _index()
    fi._function_at = lambda pc: f
    fi._cfa_offset = lambda pc, reg, disp: disp - 0x80
    fi.frame_register = lambda pc, reg: reg == 7
    pointer = datatype.TypeInfo("pointer", "double *", 8, -1)
    for name, expect in (("lhs", "lhs (pointer)"), ("u[]", None), (None, None)):
        o = frames.Origin(name, ("var", "main", name, "b.c", 9), "main@b.c:9", pointer, "register") if name else None
        fi.origin = lambda pc, reg, calls=False, o=o: o if reg == R15 else None
        v = fi._slot_value(0x10a, 0x40 - 0x80)
        assert (v.name if v is not None else None) == expect, (name, v)
        if expect:
            assert (v.key, v.size, v.pointer) == (("pointer", "step", "var", "main", "lhs", "b.c", 9), 8, True)
    # a pointer and an element of the same array on two ways are neither
    copy = frames.Copy("lhs", ("var", "main", "lhs", "b.c", 9), "step", 8)
    assert fi._agree(("p",), {0, 1}, lambda d: (copy, frames.Copy("lhs", copy.of_key, "step", 8, pointer=True))[d]) is None


def test_a_high_lane_stored_is_a_value_store():
    """`movhpd %xmm11,0x98(%rsp)` (NPB BT's binvcrhs_ keeps the upper element of a pair in
    the frame) stores xmm11's value; `movhpd 0x8(%rdi),%xmm1` still combines (arith)."""
    store, load = (datatype.decode(bytes.fromhex(h), 0x1000)[0] for h in ("66440f179c2498000000", "660f164f08"))
    assert (store.op, store.src, store.base, store.disp, store.size) == ("vstore", 28, 7, 0x98, 8)
    assert (load.op, load.dst, load.base, load.disp) == ("arith", 18, RDI, 8)


_ELIMINATE = """
subroutine solve5(n, d, v)
  implicit none
  integer n, i, m
  double precision d(5, 5, n), v(5, n)
  double precision tmat(5, 5), tv(5), tmp, tmp1
  do i = 1, n
     do m = 1, 5
        tv(m) = v(m, i)
        tmat(m, 1) = d(m, 1, i)
        tmat(m, 2) = d(m, 2, i)
        tmat(m, 3) = d(m, 3, i)
        tmat(m, 4) = d(m, 4, i)
        tmat(m, 5) = d(m, 5, i)
     end do
     tmp1 = 1.0d+00 / tmat(1, 1)
     do m = 2, 5
        tmp = tmp1 * tmat(m, 1)
        tmat(m, 2) = tmat(m, 2) - tmp * tmat(1, 2)
        tmat(m, 3) = tmat(m, 3) - tmp * tmat(1, 3)
        tmat(m, 4) = tmat(m, 4) - tmp * tmat(1, 4)
        tmat(m, 5) = tmat(m, 5) - tmp * tmat(1, 5)
        tv(m) = tv(m) - tv(1) * tmp
     end do
     tmp1 = 1.0d+00 / tmat(2, 2)
     do m = 3, 5
        tmp = tmp1 * tmat(m, 2)
        tmat(m, 3) = tmat(m, 3) - tmp * tmat(2, 3)
        tmat(m, 4) = tmat(m, 4) - tmp * tmat(2, 4)
        tmat(m, 5) = tmat(m, 5) - tmp * tmat(2, 5)
        tv(m) = tv(m) - tv(2) * tmp
     end do
     tmp1 = 1.0d+00 / tmat(3, 3)
     do m = 4, 5
        tmp = tmp1 * tmat(m, 3)
        tmat(m, 4) = tmat(m, 4) - tmp * tmat(3, 4)
        tmat(m, 5) = tmat(m, 5) - tmp * tmat(3, 5)
        tv(m) = tv(m) - tv(3) * tmp
     end do
     tmp = tmat(5, 4) / tmat(4, 4)
     tmat(5, 5) = tmat(5, 5) - tmp * tmat(4, 5)
     tv(5) = tv(5) - tv(4) * tmp
     v(5, i) = tv(5) / tmat(5, 5)
     v(4, i) = (tv(4) - tmat(4, 5) * v(5, i)) / tmat(4, 4)
     v(3, i) = (tv(3) - tmat(3, 4) * v(4, i) - tmat(3, 5) * v(5, i)) / tmat(3, 3)
     v(2, i) = (tv(2) - tmat(2, 3) * v(3, i) - tmat(2, 4) * v(4, i) - tmat(2, 5) * v(5, i)) / tmat(2, 2)
     v(1, i) = (tv(1) - tmat(1, 2) * v(2, i) - tmat(1, 3) * v(3, i) - tmat(1, 4) * v(4, i) &
               - tmat(1, 5) * v(5, i)) / tmat(1, 1)
  end do
end subroutine

program main
  implicit none
  integer, parameter :: n = 100
  double precision d(5, 5, n), v(5, n)
  call random_number(d)
  call random_number(v)
  call solve5(n, d, v)
  print *, v(1, 1)
end program
"""


def test_a_spill_of_a_local_arrays_elements_is_named_after_the_array(tmp_path):
    """NPB LU's blts: a Fortran local `tmat(5,5)`, which the DWARF places in the frame,
    is filled through another register (`movaps %xmm7, 0x0(%r13)`, r13 = its address)
    and eliminated; gfortran -O2 keeps some of its elements and of the values computed
    from them in frame slots no variable describes.  What is read from the array's own
    slots is its element, whoever stored it, so those spills are `tmat (copy)` and
    `tmat (temp)` (before: 1 020 samples of `(spills) blts_`/`buts_`, 14 % of LU.W's)."""
    import shutil
    import subprocess

    import pytest

    from numaprof.analyzer import symbols
    if shutil.which("gfortran") is None:
        pytest.skip("gfortran not installed")
    (tmp_path / "elim.f90").write_text(_ELIMINATE)
    exe = tmp_path / "elim"
    subprocess.run(["gfortran", "-O2", "-g", "-o", str(exe), "elim.f90"], check=True, cwd=tmp_path)
    info = symbols.elf_info(str(exe))
    fi = frames.frame_index(info)
    lo = next(int(a) for a, (name, _) in zip(info.func_addr, info.func_info, strict=True) if name == "solve5_")
    insns, _ = fi._code(fi._function_at(lo))
    spills = {}  # the frame stores to slots of no local: slot -> what it holds
    for ins in insns:
        if ins.op in ("store", "vstore") and ins.index < 0 and fi.frame_register(ins.addr, ins.base) \
                and fi._slot_at(ins.addr, ins.base, ins.disp) is None:
            v = fi.slot_value(ins.addr, fi._cfa_offset(ins.addr, ins.base, ins.disp))
            spills[ins.addr] = v.name if v is not None else None
    assert spills, "gfortran -O2 kept no value of the elimination in the frame"
    assert set(spills.values()) <= {"tmat (copy)", "tmat (temp)"}, spills
    assert "tmat (temp)" in spills.values(), spills


def test_a_load_off_a_records_pointer_reads_the_next_elements_member():
    """Rodinia lavaMD walks `rB`, a pointer to FOUR_VECTOR {v, x, y, z} (doubles), one
    element ahead of the one it reads: `movsd -0x8(%rbx), %xmm4` is z of the element
    before rbx's, `movups -0x18(%rbx), %xmm7` x (and y).  A displacement off the record
    lands on the member at its offset modulo the record's size, as an indexed one does;
    before, such a value was no one's (`(spills) kernel_cpu._omp_fn.0` 1 043 samples,
    18 % of lavaMD's)."""
    ids = {"v": 0, "x": 8, "y": 16, "z": 24}
    double = datatype.TypeInfo("base", "double", 8, 0x30)
    record = datatype.TypeInfo("record", "FOUR_VECTOR", 32, 0x40, c=True,
                               members=tuple(datatype.Member(n, off, 8, 0x30) for n, off in ids.items()))
    pointer = datatype.TypeInfo("pointer", "FOUR_VECTOR *", 8, 0x50, target=0x40)

    class Types(datatype.Types):
        def by_offset(self, offset):
            return {0x30: double, 0x40: record, 0x50: pointer}.get(offset)

        def pointee(self, t):
            return record if t is pointer else None

    fi = _index()
    fi.info, fi.types = None, Types()
    fi.frame_register = lambda pc, reg: reg == 7
    rb = frames.Origin("rB", ("var", "kernel_cpu", "rB", "kernel_cpu.c", 112), "kernel_cpu@kernel_cpu.c:112",
                       pointer, "register")
    fi.origin = lambda pc, reg, calls=False: rb if reg == RBX else None
    f = frames._Func("kernel_cpu._omp_fn.0", 0, None, [], [(0x100, 0x200)], code=([], []))
    got = {}
    for disp in (-0x20, -0x18, -0x10, -0x8, 0x0, 0x8, 0x28):
        load = datatype.Insn(0x100, 0x105, frozenset({XMM4}), "vload", dst=XMM4, base=RBX, disp=disp, size=8)
        v = fi._read_value(f, load, 3)
        got[disp] = v.name if v is not None else None
    assert got == {-0x20: "FOUR_VECTOR.v (copy)", -0x18: "FOUR_VECTOR.x (copy)", -0x10: "FOUR_VECTOR.y (copy)",
                   -0x8: "FOUR_VECTOR.z (copy)", 0x0: "FOUR_VECTOR.v (copy)", 0x8: "FOUR_VECTOR.x (copy)",
                   0x28: "FOUR_VECTOR.x (copy)"}, got
    # a member read off the record is an array's element, not a scalar (a product of two
    # of them is an element's temporary, as RSBench's poles' members); one read within
    # the record may be a single struct's scalar (`g->n`)
    for disp, scalar in ((-0x8, False), (0x28, False), (0x8, True)):
        load = datatype.Insn(0x100, 0x105, frozenset({XMM4}), "vload", dst=XMM4, base=RBX, disp=disp, size=8)
        assert fi._read_value(f, load, 3).scalar is scalar, disp


def test_a_record_passed_in_memory_is_where_its_one_described_piece_says():
    """RSBench's `SimulationData data` (176 bytes, passed by value: the psABI's MEMORY
    class) has the location `DW_OP_piece 16; DW_OP_fbreg 64; DW_OP_piece 8; DW_OP_piece
    152`: bytes 16..24 at frame base + 64, so the record at frame base + 48.  Pieces
    that disagree, a piece in a register or below the frame base say nothing."""
    from collections import namedtuple

    op = namedtuple("Op", "op_name args")

    def piece(n):
        return op("DW_OP_piece", [n])

    def fb(k):
        return op("DW_OP_fbreg", [k])

    assert dwarfloc.memory_argument([piece(16), fb(64), piece(8), piece(152)]) == ("mem", dwarfloc.BASIS_FB, 48)
    assert dwarfloc.memory_argument([fb(48), piece(8), piece(8), fb(64), piece(8)]) == ("mem", dwarfloc.BASIS_FB, 48)
    assert dwarfloc.memory_argument([fb(48), piece(8), fb(72), piece(8)]) is None  # two bases
    assert dwarfloc.memory_argument([op("DW_OP_reg0", []), piece(8), fb(64), piece(8)]) is None
    assert dwarfloc.memory_argument([piece(16), fb(-8), piece(8)]) is None  # below the frame base
    assert dwarfloc.memory_argument([piece(16), piece(8)]) is None  # nothing described


def test_a_pointer_member_of_a_record_passed_by_value():
    """RSBench's calculate_micro_xs_doppler takes `SimulationData data` by value, in the
    caller's argument area (frame base + 48: the piece above), and loads its pointer
    member `poles` from there (`mov 0x120(%rsp), %rsi`, CFA = rsp + 208): the pointer is
    `data.poles`, which the poles it walks are read through; before, no one's (its
    `(spills)` 1 892 samples, 28 % of RSBench's with an address).  A member that is no
    pointer, or a load narrower than a pointer, says nothing."""
    ptr = datatype.TypeInfo("pointer", "Pole *", 8, 0x60, target=0x70)
    dbl = datatype.TypeInfo("base", "double", 8, 0x30)
    sim = datatype.TypeInfo("record", "SimulationData", 176, 0x40, c=True,
                            members=(datatype.Member("scale", 24, 8, 0x30), datatype.Member("poles", 32, 8, 0x60)))

    class Types(datatype.Types):
        def by_offset(self, offset):
            return {0x30: dbl, 0x40: sim, 0x60: ptr}.get(offset)

    data = frames.Variable("data", "calculate_micro_xs_doppler", "simulation.c", 179, sim, parameter=True)
    frame = frames.PcFrame("calculate_micro_xs_doppler", 1, (7, 208), (dwarfloc.BASIS_FB, 0),
                           (frames.Slot(dwarfloc.BASIS_FB, 48, 176, data, True),), ())
    fi = _index()
    fi.info, fi.types = None, Types()
    fi.frame_at = lambda pc, charged: frame
    fi._cfa_offset = lambda pc, reg, disp: disp - 208 if reg == 7 else None

    def load(disp, size=8):
        return datatype.Insn(0x27c6, 0x27ce, frozenset({4}), "load", dst=4, base=7, disp=disp, size=size)

    o = fi._member_pointer(load(0x120), data)
    assert (o.name, o.key, o.type) == ("data.poles", ("var", *data.key, "poles"), ptr), o
    assert fi._member_pointer(load(0x118), data) is None  # `scale`: a double
    assert fi._member_pointer(load(0x120, 4), data) is None


def test_a_slot_a_computed_location_reads_is_that_variables():
    """gcc describes a choice of two values as `A B <condition> DW_OP_bra 1; DW_OP_swap;
    DW_OP_drop; DW_OP_stack_value`: a slot that is A or B holds the variable's value on
    that way (hotspot3D's `t`); one read only for the condition, or as one operand of a
    sum of two variables, does not; a bound kept less one (`slot + 1`) is the bound's."""
    from collections import namedtuple

    op = namedtuple("Op", "op_name args")

    def slot(k, n=4):
        return [op("DW_OP_fbreg", [k]), op("DW_OP_deref_size", [n])]

    cond = [*slot(-124), op("DW_OP_const1u", [32]), op("DW_OP_shl", []), op("DW_OP_breg14", [0]),
            op("DW_OP_const1u", [32]), op("DW_OP_shl", []), op("DW_OP_ne", [])]
    select = [op("DW_OP_bra", [1]), op("DW_OP_swap", []), op("DW_OP_drop", []), op("DW_OP_stack_value", [])]
    assert dwarfloc.value_parts([*slot(-120), op("DW_OP_breg1", [0]), *cond, *select]) == [(-120, 4)]
    assert dwarfloc.value_parts([op("DW_OP_breg1", [0]), *slot(-120, 8), *cond, *select]) == [(-120, 8)]
    # the condition's slot only
    assert dwarfloc.value_parts([op("DW_OP_breg1", [0]), op("DW_OP_breg3", [0]), *cond, *select]) == []
    assert dwarfloc.value_parts([*slot(-92), op("DW_OP_plus_uconst", [1]), op("DW_OP_stack_value", [])]) == [(-92, 4)]
    assert dwarfloc.value_parts([*slot(-92), op("DW_OP_breg1", [0]), op("DW_OP_plus", []),
                                 op("DW_OP_stack_value", [])]) == []
    # an address computed from a pointer in the frame: not the slot's value
    assert dwarfloc.value_parts([*slot(-92, 8), op("DW_OP_plus_uconst", [8])]) == []


_CLAMPED = r"""
#include <stdio.h>
#include <stdlib.h>
float ambient = 80.0f;
/* a 3-D seven-point stencil whose neighbours are clamped at the faces */
void sweep(const float *src, const float *heat, float *dst, int nx, int ny, int nz,
           float k0, float k1, float k2, float k3, int steps)
{
    for (int it = 0; it < steps; it++) {
        for (int z = 0; z < nz; z++)
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++) {
                    int here = x + y * nx + z * nx * ny;
                    int west = (x == 0) ? here : here - 1;
                    int east = (x == nx - 1) ? here : here + 1;
                    int north = (y == 0) ? here : here - nx;
                    int south = (y == ny - 1) ? here : here + nx;
                    int below = (z == 0) ? here : here - nx * ny;
                    int above = (z == nz - 1) ? here : here + nx * ny;
                    dst[here] = src[here] * k0 + (src[north] + src[south]) * k1 + src[east] * k2
                              + src[west] * k2 + src[above] * k3 + src[below] * k3 + heat[here] * k1
                              + ambient * k3;
                }
        const float *t = src;
        src = dst;
        dst = (float *)t;
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    float *a = calloc((size_t)n * n * 8, 4), *b = calloc((size_t)n * n * 8, 4), *p = calloc((size_t)n * n * 8, 4);
    sweep(a, p, b, n, n, 8, 0.5f, 0.1f, 0.1f, 0.05f, 10);
    printf("%f\n", b[n]);
    return 0;
}
"""


def test_a_spill_the_dwarf_computes_a_variable_from_is_that_variable(tmp_path):
    """gcc -O2 keeps the clamped neighbour `above = (z == nz - 1) ? here : here + nx * ny`
    in a frame slot and describes `above` as that slot or `here` (value_parts); the slot
    is `above`'s, and the slot the condition reads is not (before: `(spills)
    computeTempCPU`, 445 samples, 10 % of Rodinia hotspot3D's)."""
    import subprocess

    from numaprof.analyzer import symbols
    (tmp_path / "clamp.c").write_text(_CLAMPED)
    exe = tmp_path / "clamp"
    subprocess.run(["gcc", "-O2", "-g", "-o", str(exe), "clamp.c"], check=True, cwd=tmp_path)
    info = symbols.elf_info(str(exe))
    fi = frames.frame_index(info)
    lo = next(int(a) for a, (name, _) in zip(info.func_addr, info.func_info, strict=True) if name == "sweep")
    f = fi._function_at(lo)
    parts = {c.off for v in f.vars if v.var.name == "above" for c in v.locs if c.kind == "part"}
    assert parts, "gcc -O2 described `above` without a frame slot"
    insns, _ = fi._code(f)
    named = {}  # frame slot stored to -> who the frame says is there
    for ins in insns:
        if ins.op in ("store", "vstore") and ins.index < 0 and fi.frame_register(ins.addr, ins.base):
            v = fi._slot_at(ins.addr, ins.base, ins.disp)
            named.setdefault(fi._cfa_offset(ins.addr, ins.base, ins.disp), set()).add(v.name if v else None)
    fb = f.frame_base[1]
    assert all(named.get(fb + k) == {"above"} for k in parts), named
    assert all(names != {"above"} for slot, names in named.items() if slot - fb not in parts), named


_UNIT_VECTORS = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
/* turns each angle into its unit vector: gcc calls sincos once for the sine and cosine */
__attribute__((noinline)) void unit_vectors(const double *angle, double *out, int n)
{
    for (int i = 0; i < n; i++) {
        double a = 2.0 * angle[i];
        out[2 * i] = cos(a);
        out[2 * i + 1] = -sin(a);
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    double *angle = malloc(n * sizeof *angle), *out = malloc(2 * n * sizeof *out);
    for (int i = 0; i < n; i++)
        angle[i] = i * 0.001;
    unit_vectors(angle, out, n);
    printf("%f\n", out[n]);
    return 0;
}
"""


def test_the_slots_sincos_writes_are_its_arguments_temporaries(tmp_path):
    """gcc -O2 turns `cos(a)` and `sin(a)` into `sincos(a, &s, &c)` with s and c in the
    frame, and reads them back after the call: those slots hold values computed from
    `angle`'s elements (`angle (temp)`), written by the call through the pointers in rdi
    and rsi (before: no store reached the reads, `(spills) calculate_sig_T` in RSBench,
    262 samples)."""
    import subprocess

    from numaprof.analyzer import symbols
    (tmp_path / "unit.c").write_text(_UNIT_VECTORS)
    exe = tmp_path / "unit"
    subprocess.run(["gcc", "-O2", "-g", "-o", str(exe), "unit.c", "-lm"], check=True, cwd=tmp_path)
    info = symbols.elf_info(str(exe))
    fi = frames.frame_index(info)
    lo = next(int(a) for a, (name, _) in zip(info.func_addr, info.func_info, strict=True) if name == "unit_vectors")
    f = fi._function_at(lo)
    insns, _ = fi._code(f)
    calls = [i for i in insns if i.op == "call" and info.callee_name(i.next) == "sincos"]
    assert calls, "gcc -O2 called no sincos"
    reads = {}
    for ins in insns:
        if ins.op == "vload" and ins.addr > calls[0].addr and fi.frame_register(ins.addr, ins.base):
            v = fi.slot_value(ins.addr, fi._cfa_offset(ins.addr, ins.base, ins.disp))
            reads[ins.addr] = v.name if v is not None else None
    assert len(reads) == 2 and set(reads.values()) == {"angle (temp)"}, reads
