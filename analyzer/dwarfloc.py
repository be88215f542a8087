"""DWARF location expressions of a function's locals (DWARF 5, section 2.5 and 2.6):
where a variable is -- at the frame base, the stack or frame pointer plus a constant, a
register, the address another register holds -- classified once per location
(:func:`classify`), and the addresses of those computed from the stack (a C
variable-length array's `((rsp + 7) >> 3) << 3`) evaluated per sample
(:func:`evaluate`).  The x86-64 register numbers are the System V psABI's (figure 3.36)."""

from __future__ import annotations

import numpy as np

from numaprof.analyzer import datatype

DW_SP, DW_BP = 7, 6  # DWARF numbers of rsp and rbp
BASIS_FB = -1  # a slot's offset is from the function's frame base
BASIS_EXPR = -3  # a slot's start is a DWARF expression of the stack pointer, frame pointer,
# frame base or CFA (Slot.expr): a C variable-length array, `((rsp + 7) >> 3) << 3`


def frame_base(cu, die) -> tuple[int, int] | None:
    """The frame base of a function: (BASIS_FB, 0) for the CFA (DW_OP_call_frame_cfa, as
    GCC writes it), (register, k) for a register plus k (clang: rbp or rsp)."""
    a = die.attributes.get("DW_AT_frame_base")
    if a is None or a.form != "DW_FORM_exprloc":
        return None
    ops = datatype.parse_expr(cu.structs, a.value)
    if len(ops) == 1 and ops[0].op_name == "DW_OP_call_frame_cfa":
        return (BASIS_FB, 0)
    c = register(ops)
    return (c[0], c[1]) if c is not None and c[0] in (DW_SP, DW_BP) else None


def register(ops) -> tuple[int, int] | None:
    """(register, k) of DW_OP_regN (k 0) or DW_OP_bregN k."""
    if len(ops) != 1:
        return None
    name = ops[0].op_name
    if name.startswith("DW_OP_reg") and name[9:].isdigit():
        return int(name[9:]), 0
    if name == "DW_OP_regx" and ops[0].args:
        return int(ops[0].args[0]), 0
    if name.startswith("DW_OP_breg") and name[10:].isdigit():
        return int(name[10:]), int(ops[0].args[0])
    return None


def classify(ops) -> tuple | None:
    """("mem", basis, k): the variable is stored at basis + k (DW_OP_fbreg k: the frame
    base; DW_OP_bregN k with N rsp or rbp); ("mem", BASIS_EXPR, 0, ops): at the address
    an expression of those computes (evaluate()); ("val", N, k): its value is register
    N + k (DW_OP_regN, DW_OP_regx N; DW_OP_bregN k, DW_OP_stack_value); ("ref", N, k): it is stored at
    register N + k, N another register (DW_OP_bregN k); None for anything else
    (constants, pieces, values computed from memory or other registers)."""
    if not ops:
        return None
    name = ops[0].op_name
    if len(ops) == 1 and name == "DW_OP_fbreg":
        return "mem", BASIS_FB, int(ops[0].args[0])
    if len(ops) == 2 and name == "DW_OP_fbreg" and ops[1].op_name == "DW_OP_deref":
        # its address is stored in the frame at frame base + k (gfortran's automatic
        # arrays where their pointer is spilled)
        return "ptrslot", BASIS_FB, int(ops[0].args[0])
    if len(ops) == 1 and name.startswith("DW_OP_breg"):
        r = register(ops)
        if r is not None and r[0] in (DW_SP, DW_BP):
            return "mem", r[0], r[1]
        # stored at another register + k: the register holds its address (a Fortran
        # argument, passed by reference)
        return ("ref", r[0], r[1]) if r is not None and r[0] < 16 else None
    if len(ops) == 2 and name.startswith("DW_OP_breg") and ops[1].op_name == "DW_OP_plus_uconst":
        # the same, written as register + 0, + k: an OpenMP outlined function's shared
        # variables, fields of the block its caller filled (`DW_OP_breg3 (rbx): 0;
        # DW_OP_plus_uconst: 8`)
        r = register(ops[:1])
        if r is not None and r[0] < 16 and r[0] not in (DW_SP, DW_BP):
            return "ref", r[0], r[1] + int(ops[1].args[0])
    if len(ops) == 1 and name.startswith("DW_OP_reg"):
        # a general register, or an xmm register (DWARF 17-32 and 67-82, x86-64 psABI
        # figure 3.36): a floating-point variable's value, what a spill stores
        r = register(ops)
        return ("val", r[0], 0) if r is not None and (r[0] < 16 or 17 <= r[0] <= 32 or 67 <= r[0] <= 82) else None
    if len(ops) == 2 and ops[1].op_name == "DW_OP_stack_value" and name.startswith("DW_OP_breg"):
        r = register(ops[:1])
        return ("val", r[0], r[1]) if r is not None and r[0] < 16 else None
    if all(o.op_name in _EVALUABLE or o.op_name.startswith("DW_OP_lit") for o in ops) and \
            evaluate(tuple(ops), *([np.zeros(1, dtype=np.int64)] * 4))[1].all():
        return "mem", BASIS_EXPR, 0, tuple(ops)
    return None


def memory_argument(ops) -> tuple | None:
    """("mem", BASIS_FB, k) for a composite location (DW_OP_piece) whose described pieces
    are all in the frame at one base: `DW_OP_piece 16; DW_OP_fbreg 64; DW_OP_piece 8;
    DW_OP_piece 152` is a record at frame base + 48 of which GCC describes the bytes
    16..24 (Rodinia RSBench's `SimulationData data`, passed by value).  For a parameter of
    the MEMORY class (a record over 16 bytes, System V psABI 3.2.3) the whole record is
    in the caller's argument area, contiguous, above the frame base: the caller
    (:meth:`frames.FrameIndex`) asks only for those.  None for anything else (a piece in
    a register, pieces at different bases, below the frame base)."""
    at, base, located = 0, None, False
    k = 0
    while k < len(ops):
        o = ops[k]
        if o.op_name == "DW_OP_piece" and o.args:
            at += int(o.args[0])  # an empty piece: bytes the DWARF does not describe
            k += 1
            continue
        if o.op_name == "DW_OP_fbreg" and k + 1 < len(ops) and ops[k + 1].op_name == "DW_OP_piece":
            b = int(o.args[0]) - at
            if base is not None and b != base:
                return None
            base, located = b, True
            at += int(ops[k + 1].args[0])
            k += 2
            continue
        return None
    return ("mem", BASIS_FB, base) if located and base is not None and base >= 0 else None


def value_parts(ops) -> list[tuple[int, int]]:
    """The frame slots that hold a variable's value by its computed location: (frame-base
    offset, bytes) of each `DW_OP_fbreg k; DW_OP_deref_size n` (`DW_OP_deref`: 8 bytes)
    that an expression ending in DW_OP_stack_value yields, plus or minus a constant, on
    one of its ways.  GCC writes a choice of two values as `A B <condition> DW_OP_bra 1;
    DW_OP_swap; DW_OP_drop` (Rodinia hotspot3D's neighbour index
    `t = (z == nz - 1) ? c : c + nx * ny`: `DW_OP_fbreg -120; DW_OP_deref_size 4;
    DW_OP_breg1 (rdx): 0; <z's compare>; DW_OP_bra 1; DW_OP_swap; DW_OP_drop;
    DW_OP_stack_value`: the slot holds t's value where z < nz - 1), and a bound it keeps
    less one as `DW_OP_fbreg -92; DW_OP_deref_size 4; DW_OP_plus_uconst 1`.  A slot read
    for the condition, or as one operand of a sum of two variables, is not the
    variable's.  Empty when the expression is anything else."""
    if not ops or ops[-1].op_name != "DW_OP_stack_value":
        return []
    slot, const, other = "slot", "const", "other"
    stack: list[tuple] = []
    k, body = 0, ops[:-1]
    while k < len(body):
        o = body[k]
        name = o.op_name
        nxt = body[k + 1].op_name if k + 1 < len(body) else ""
        if name == "DW_OP_fbreg" and nxt in ("DW_OP_deref", "DW_OP_deref_size"):
            b = body[k + 1]
            stack.append((slot, int(o.args[0]), int(b.args[0]) if nxt == "DW_OP_deref_size" and b.args else 8))
            k += 2
            continue
        if name.startswith("DW_OP_lit") or (name.startswith("DW_OP_const") and o.args):
            stack.append((const,))
        elif name == "DW_OP_plus_uconst" and stack:
            pass  # slot + k stays the slot's
        elif name in ("DW_OP_plus", "DW_OP_minus") and len(stack) >= 2:
            b, a = stack.pop(), stack.pop()
            stack.append(a if b[0] == const else b if a[0] == const and name == "DW_OP_plus" else (other,))
        elif name == "DW_OP_bra" and len(stack) >= 3 and [x.op_name for x in body[k + 1:]] == ["DW_OP_swap",
                                                                                            "DW_OP_drop"]:
            stack.pop()  # the condition
            return sorted({(e[1], e[2]) for e in stack[-2:] if e[0] == slot})
        elif name in ("DW_OP_swap", "DW_OP_drop", "DW_OP_dup") and stack:
            if name == "DW_OP_swap" and len(stack) >= 2:
                stack[-1], stack[-2] = stack[-2], stack[-1]
            elif name == "DW_OP_drop":
                stack.pop()
            elif name == "DW_OP_dup":
                stack.append(stack[-1])
        elif name in _BINARY or name in ("DW_OP_eq", "DW_OP_ne", "DW_OP_lt", "DW_OP_gt", "DW_OP_le", "DW_OP_ge",
                                         "DW_OP_xor", "DW_OP_div", "DW_OP_mod", "DW_OP_shra"):
            if len(stack) < 2:
                return []
            stack.pop()
            stack[-1] = (other,)
        elif name.startswith("DW_OP_breg") or name.startswith("DW_OP_reg") or name in (
                "DW_OP_fbreg", "DW_OP_call_frame_cfa", "DW_OP_deref", "DW_OP_deref_size", "DW_OP_neg", "DW_OP_not",
                "DW_OP_convert", "DW_OP_GNU_convert"):
            if name in ("DW_OP_deref", "DW_OP_deref_size", "DW_OP_neg", "DW_OP_not", "DW_OP_convert",
                        "DW_OP_GNU_convert"):
                if not stack:
                    return []
                stack.pop()
            stack.append((other,))
        else:
            return []
        k += 1
    return [(stack[0][1], stack[0][2])] if len(stack) == 1 and stack[0][0] == slot else []


_EVALUABLE = {"DW_OP_breg6", "DW_OP_breg7", "DW_OP_fbreg", "DW_OP_call_frame_cfa", "DW_OP_const1u",
              "DW_OP_const1s", "DW_OP_const2u", "DW_OP_const2s", "DW_OP_const4u", "DW_OP_const4s",
              "DW_OP_const8u", "DW_OP_const8s", "DW_OP_constu", "DW_OP_consts", "DW_OP_plus",
              "DW_OP_minus", "DW_OP_plus_uconst", "DW_OP_and", "DW_OP_or", "DW_OP_shr", "DW_OP_shl",
              "DW_OP_shra", "DW_OP_neg", "DW_OP_not", "DW_OP_mul", "DW_OP_dup", "DW_OP_swap",
              "DW_OP_drop"}


def evaluate(ops: tuple, sp: np.ndarray, bp: np.ndarray, fb: np.ndarray, cfa: np.ndarray):
    """The value of a DWARF location expression (the address of a variable) for each
    sample, from its stack pointer, frame pointer, frame base and CFA: (values, True), or
    (zeros, False) for an expression of anything else (memory, other registers)."""
    stack: list[np.ndarray] = []
    regs = {"DW_OP_breg6": bp, "DW_OP_breg7": sp}
    fail = (np.zeros(len(sp), dtype=np.int64), np.zeros(len(sp), dtype=bool))
    for o in ops:
        name, args = o.op_name, o.args
        if name in regs:
            stack.append(regs[name] + int(args[0]))
        elif name == "DW_OP_fbreg":
            stack.append(fb + int(args[0]))
        elif name == "DW_OP_call_frame_cfa":
            stack.append(cfa.copy())
        elif name.startswith("DW_OP_lit") and name[9:].isdigit():
            stack.append(np.full(len(sp), int(name[9:]), dtype=np.int64))
        elif name.startswith("DW_OP_const") and args and isinstance(args[0], int):
            stack.append(np.full(len(sp), int(args[0]), dtype=np.int64))
        elif name == "DW_OP_plus_uconst" and stack:
            stack[-1] = stack[-1] + int(args[0])
        elif name in ("DW_OP_neg", "DW_OP_not") and stack:
            stack[-1] = -stack[-1] if name == "DW_OP_neg" else ~stack[-1]
        elif name == "DW_OP_dup" and stack:
            stack.append(stack[-1])
        elif name == "DW_OP_drop" and stack:
            stack.pop()
        elif name in _BINARY and len(stack) >= 2:
            b, a = stack.pop(), stack.pop()
            stack.append(_BINARY[name](a, b))
        elif name == "DW_OP_swap" and len(stack) >= 2:
            stack[-1], stack[-2] = stack[-2], stack[-1]
        else:
            return fail
    return (stack[-1], np.ones(len(sp), dtype=bool)) if len(stack) == 1 else fail


_BINARY = {
    "DW_OP_plus": np.add, "DW_OP_minus": np.subtract, "DW_OP_and": np.bitwise_and,
    "DW_OP_or": np.bitwise_or, "DW_OP_mul": np.multiply,
    "DW_OP_shl": lambda a, b: np.left_shift(a, b & 63),
    "DW_OP_shr": lambda a, b: (a.astype(np.uint64) >> (b & 63).astype(np.uint64)).astype(np.int64),
    "DW_OP_shra": lambda a, b: np.right_shift(a, b & 63),
}
