"""The records of a function's frame and of what its registers and slots hold
(analyzer/frames.py, analyzer/values.py): variables as their source declares them, the
slots and registers they are in at one instruction, where a pointer came from (Origin)
and what a frame slot holds (Copy), with the markers the tracking combines them with."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from elftools.common.exceptions import DWARFError, ELFError
from elftools.construct.core import ConstructError

from numaprof.analyzer import cxxnames, datatype

_ERRORS = (KeyError, ValueError, IndexError, AttributeError, TypeError, NotImplementedError, ELFError,
           DWARFError, ConstructError)


@dataclass(frozen=True)
class Variable:
    """A local variable or parameter as its source declares it."""
    name: str
    function: str  # the function that declares it (an inlined function: its own name)
    file: str
    line: int
    type: datatype.TypeInfo | None = field(compare=False)
    parameter: bool = field(default=False, compare=False)
    # of a library type that is pointers only (a std::vector): its slot is the handle,
    # its name the elements (datatype.Types.handle)
    handle: bool = field(default=False, compare=False)

    @property
    def key(self) -> tuple:
        """One logical object per declaration, whichever frames (threads, inlined copies)
        hold an instance of it."""
        return (self.function, self.name, self.file, self.line)

    @property
    def site(self) -> str:
        return f"{cxxnames.readable(self.function)}@{os.path.basename(self.file)}:{self.line}"


@dataclass(frozen=True)
class Slot:
    """A variable stored in the frame at one pc: bytes [basis + offset, + size); size 0:
    an array of a size the DWARF does not give (a variable-length array), up to the CFA."""
    basis: int  # BASIS_FB, DW_SP, DW_BP, or BASIS_EXPR (the start is expr's value)
    offset: int
    size: int
    var: Variable
    in_scope: bool  # the pc is inside the variable's block
    expr: tuple = ()


@dataclass(frozen=True)
class Held:
    """A pointer variable whose value is register ``reg`` plus ``add`` at one pc; with
    ``ref``, a variable stored at that address (its type then a pointer to its own)."""
    reg: int
    add: int
    var: Variable
    ref: bool = False


@dataclass(frozen=True)
class PcFrame:
    """The frame of the function holding a charged instruction."""
    function: str
    func_key: int  # DIE offset of the function (its frames are one kind of frame)
    cfa: tuple[int, int] | None  # (DW_SP or DW_BP, offset) at the sampled pc; None unknown
    frame_base: tuple[int, int] | None  # frame base = CFA + k: (BASIS_FB, k); register + k: (reg, k)
    slots: tuple[Slot, ...]  # variables stored there at the pc, in scope first; then the
    # frame-base slots of those stored elsewhere at the pc (a register), their homes
    held: tuple[Held, ...]
    # the function's DWARF describes its variables (a -g build, not -g1's line tables
    # only), whether or not one of them is in the frame at the pc
    described: bool = False


@dataclass
class _Loc:
    lo: int | None  # None: everywhere in the function
    hi: int | None
    kind: str  # "mem": stored at basis + off; "val": its value is reg + off; "ptrslot": its
    # address is stored at basis + off; "ref": stored at register basis + off; "part":
    # its value is computed from the `size` bytes at basis + off (dwarfloc.value_parts)
    basis: int
    off: int
    expr: tuple = ()  # basis BASIS_EXPR: the address expression's operations
    size: int = 0


@dataclass
class _Var:
    var: Variable
    scope: list[tuple[int, int]] | None  # None: the whole function
    locs: list[_Loc]


@dataclass
class _Func:
    name: str
    key: int
    frame_base: tuple[int, int] | None
    vars: list[_Var]
    ranges: list[tuple[int, int]]
    code: tuple[list, list[int]] | None = None  # decoded instructions and their addresses
    preds: list | bool | None = None  # each instruction's predecessors (_preds); False: unknown


@dataclass(frozen=True)
class Origin:
    """What a pointer in a register at some instruction is: a variable's value, a member
    loaded from a record, an element of a pointer array, a pointer spilled to the frame."""
    name: str  # `tw`, `struct grid.energy`, `Mesh::m_pos`, `u[]` (the pointers u points to)
    key: tuple  # the logical object's identity
    site: str
    type: datatype.TypeInfo | None  # the pointer's type
    how: str  # register: a variable's location names the register; type: tracked;
    # call: the block a call returned, no variable holding it (key: ("call", the call's
    # link-time return address)), named from the call's source line (varattr)


@dataclass(frozen=True)
class Copy:
    """A frame slot holding values read from one array or member (FrameIndex.slot_value):
    a spilled element, ``lhs (copy)``, kept in the frame of ``function``; or values
    computed from its elements (``computed``), ``lhs (temp)``; or the address of its
    elements (``pointer``), ``lhs (pointer)``, as a pointer variable's own slot is named."""
    of: str  # the array's or member's name: `lhs`, `struct grid.energy`
    of_key: tuple  # its logical object's identity (Origin.key, or the static's address)
    function: str
    size: int  # bytes of one copy (the load's width)
    computed: bool = False
    pointer: bool = False
    scalar: bool = False  # of a record's scalar member (an OpenMP region's shared `n`)

    @property
    def kind(self) -> str:
        return "pointer" if self.pointer else "temp" if self.computed else "copy"

    @property
    def name(self) -> str:
        return f"{self.of} ({self.kind})"

    @property
    def key(self) -> tuple:
        return (self.kind, self.function, *self.of_key)

    @property
    def site(self) -> str:
        return cxxnames.readable(self.function)


#: A definition that leads back to the one being followed (around a loop): it adds no origin.
_CYCLE = Origin("", ("cycle",), "", None, "cycle")
#: A definition that sets a constant (`pxor %xmm1, %xmm1`, `movq $0x0, 0x40(%rsp)`): no
#: object's either, and it adds none -- a pointer set to NULL on one way is what the other
#: ways make it, an accumulator started at zero is a temporary of what it accumulates.
_CONSTANT = Origin("", ("constant",), "", None, "constant")
_NEUTRAL = (_CYCLE, _CONSTANT)
CALL = "call"  # Origin.how of the block a call returned
#: Origin.how of what the tracking follows on the way to a thread-local variable's address
#: and that is not itself a pointer: the thread pointer plus key[1] (`mov %fs:0, %rdx`,
#: then `lea -0x1790(%rdx), %rdx`), a constant key[1] (`mov $-0x65c0, %rcx`, the variable's
#: offset, read as `%fs:0xc0(%rcx)` or added to the thread pointer)
TP, CONST = "tp", "const"
#: the last part of an Origin.key of an OpenMP data record's member that holds a shared
#: variable's address (datatype.Member.reference): a load through it is the variable
REFERENCE = "&"
_OFFSETS = (TP, CONST)
