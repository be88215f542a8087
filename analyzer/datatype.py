"""Data types from DWARF: sizes, pointees, members (docs/analyzer.md, stack and register
objects).

A variable's type tells how many bytes it occupies in its frame (a local array), what a
pointer held in a register points to (a variable-length or Fortran automatic array, a
pointer parameter), and which member of a structure an access at some offset falls in,
which names an access by type and member (``struct grid.energy``, ``Mesh::m_pos``) the
way perf's data-type profiling does (``perf annotate --data-type``; the method of
tools/perf/util/annotate-data.c: the type of the register an instruction accesses memory
through, and the member at the instruction's offset in it).

One :class:`Types` per ELF file, cached with its DWARF (analyzer/frames.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from elftools.common.exceptions import DWARFError
from elftools.construct.core import ConstructError
from elftools.dwarf.dwarf_expr import DWARFExprParser

from numaprof.analyzer import cxxnames, symbols

FORTRAN_LANGS = {0x07, 0x08, 0x0E, 0x22, 0x23, 0x2A}  # DW_LANG_Fortran77 .. Fortran2008
_QUALIFIERS = {"DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type",
               "DW_TAG_restrict_type", "DW_TAG_atomic_type", "DW_TAG_immutable_type"}
_RECORDS = {"DW_TAG_structure_type": "struct", "DW_TAG_class_type": "class",
            "DW_TAG_union_type": "union"}
_POINTERS = {"DW_TAG_pointer_type", "DW_TAG_reference_type", "DW_TAG_rvalue_reference_type"}
_DEPTH = 16  # qualifier chains and nested members followed at most


@dataclass(frozen=True)
class Member:
    name: str
    offset: int  # bytes from the start of the record
    size: int  # 0 unknown
    type: int  # DIE offset of the member's type
    # a member of the compiler's OpenMP data record holding the address of the shared
    # variable it is named after (passed by reference), not the variable's value
    reference: bool = False


@dataclass(frozen=True)
class TypeInfo:
    """One type with its qualifiers and typedefs stripped."""
    kind: str  # base | pointer | array | record | other
    name: str  # as a user writes it: `double`, `struct grid`, `Mesh`, `fields`
    size: int  # bytes; 0 unknown (a variable-length array, an incomplete type)
    offset: int  # DIE offset: the type's identity inside its file
    target: int | None = None  # pointer: the pointee's type DIE; array: the element's
    count: int = 0  # array: elements, 0 unknown
    members: tuple[Member, ...] = ()  # record
    fortran: bool = False
    # array: a Fortran allocatable or pointer array (DW_AT_data_location), whose storage
    # is a descriptor that starts with the address of the elements
    descriptor: bool = False
    artificial: bool = False  # made by the compiler (GCC's OpenMP data record)
    file: str = ""  # record: where it is declared (DW_AT_decl_file, DW_AT_decl_line)
    line: int = 0
    c: bool = False  # record: a C one (its members are `block.array`, not `block::array`)

    @property
    def pointer(self) -> bool:
        return self.kind == "pointer"


class Types:
    """Type DIEs of one DWARF, resolved on demand and cached by DIE offset."""

    def __init__(self):
        self._by_offset: dict[int, TypeInfo | None] = {}
        self._dies: dict[int, object] = {}
        self._decls: dict[int, dict] = {}  # CU offset -> _declarations
        self._files: dict[int, list[str]] = {}  # CU offset -> its file table
        self._handles: dict[int, bool] = {}  # record DIE offset -> handle()

    def _file(self, d) -> str:
        fi = d.attributes.get("DW_AT_decl_file")
        if fi is None:
            return ""
        files = self._files.get(d.cu.cu_offset)
        if files is None:
            files = self._files[d.cu.cu_offset] = symbols._cu_files(d.cu.dwarfinfo, d.cu)
        return files[fi.value] if 0 <= fi.value < len(files) else ""

    def of(self, die) -> TypeInfo | None:
        """The type of a variable, member or type DIE (its DW_AT_type), stripped."""
        if die is None or "DW_AT_type" not in die.attributes:
            return None
        try:
            return self.resolve(die.get_DIE_from_attribute("DW_AT_type"))
        except (KeyError, ValueError, AttributeError, IndexError):
            return None

    def by_offset(self, offset: int | None) -> TypeInfo | None:
        """A type resolved before (pointee and element types are named by offset)."""
        if offset is None:
            return None
        got = self._by_offset.get(offset)
        if got is None and offset in self._dies:
            got = self.resolve(self._dies[offset])
        return got

    def resolve(self, die) -> TypeInfo | None:
        """The type DIE ``die`` with qualifiers and typedefs stripped."""
        first = die.offset
        if first in self._by_offset:
            return self._by_offset[first]
        self._by_offset[first] = None  # a cycle through this DIE resolves to unknown
        d = die
        alias = ""  # the innermost typedef's name: what C calls an anonymous struct
        for _ in range(_DEPTH):
            if d.tag not in _QUALIFIERS or "DW_AT_type" not in d.attributes:
                break
            if d.tag == "DW_TAG_typedef":
                alias = _name(d) or alias
            d = d.get_DIE_from_attribute("DW_AT_type")
        t = self._build(d, alias) if d.tag not in _QUALIFIERS else None
        self._by_offset[first] = t
        if t is not None:
            self._by_offset.setdefault(d.offset, t)
        return t

    def _build(self, d, alias: str = "") -> TypeInfo | None:
        a = d.attributes
        fortran = _fortran(d)
        size = int(a["DW_AT_byte_size"].value) if "DW_AT_byte_size" in a and \
            isinstance(a["DW_AT_byte_size"].value, int) else 0
        if d.tag == "DW_TAG_base_type":
            return TypeInfo("base", _name(d), size, d.offset, fortran=fortran)
        if d.tag in ("DW_TAG_enumeration_type",):
            return TypeInfo("base", _name(d), size, d.offset, fortran=fortran)
        if d.tag in _POINTERS:
            tgt = self._target(d)
            return TypeInfo("pointer", "", size or 8, d.offset, target=tgt, fortran=fortran)
        if d.tag == "DW_TAG_array_type":
            tgt = self._target(d)
            elem = self.by_offset(tgt)
            count = _element_count(d, fortran)
            esize = elem.size if elem is not None else 0
            total = size or (count * esize if count and esize else 0)
            return TypeInfo("array", "", total, d.offset, target=tgt, count=count, fortran=fortran,
                            descriptor="DW_AT_data_location" in a)
        if d.tag in _RECORDS:
            members = []
            for ch in d.iter_children():
                # a base class is a member without a name (its members are the record's)
                if ch.tag not in ("DW_TAG_member", "DW_TAG_inheritance") or \
                        "DW_AT_data_member_location" not in ch.attributes:
                    continue
                loc = ch.attributes["DW_AT_data_member_location"].value
                if not isinstance(loc, int):
                    continue
                mt = self.of(ch)
                tdie = ch.get_DIE_from_attribute("DW_AT_type") if "DW_AT_type" in ch.attributes else None
                if tdie is not None:
                    self._dies.setdefault(tdie.offset, tdie)
                name = _attr(ch, "DW_AT_name") if ch.tag == "DW_TAG_member" else ""
                ref = "DW_AT_artificial" in a and tdie is not None and self._by_reference(ch, name, tdie)
                members.append(Member(name, loc, mt.size if mt else 0,
                                      tdie.offset if tdie is not None else -1, ref))
            kw = _RECORDS[d.tag]
            name = _qualified(d)
            if not name and alias:
                # `typedef struct { ... } block;`: the name the program uses is the typedef's
                name = alias
            else:
                name = name or "(anonymous)"
                if not fortran and _c_language(d) and kw in ("struct", "union"):
                    name = f"{kw} {name}"
            line = a["DW_AT_decl_line"].value if "DW_AT_decl_line" in a else 0
            return TypeInfo("record", name, size, d.offset, members=tuple(members), fortran=fortran,
                            artificial="DW_AT_artificial" in a, line=int(line), file=self._file(d),
                            c=not fortran and _c_language(d))
        return TypeInfo("other", _name(d), size, d.offset, fortran=fortran)

    def _by_reference(self, member, name: str, tdie) -> bool:
        """Whether a member of GCC's OpenMP data record is the address of the shared
        variable it is named after: its type a pointer to the type of the variable
        declared where the member says (DW_AT_decl_file, _line; GCC passes a shared
        variable by reference when its address is taken or it is written in the region)."""
        a = member.attributes
        if tdie.tag != "DW_TAG_pointer_type" or "DW_AT_type" not in tdie.attributes or \
                "DW_AT_decl_line" not in a:
            return False
        decls = self._decls.get(member.cu.cu_offset)
        if decls is None:
            try:
                decls = _declarations(member.cu)
            except symbols.DAMAGED:
                decls = {}  # damaged DWARF: no member is told a reference
            self._decls[member.cu.cu_offset] = decls
        key = (name, a["DW_AT_decl_file"].value if "DW_AT_decl_file" in a else -1, a["DW_AT_decl_line"].value)
        target = tdie.attributes["DW_AT_type"]
        return target.value + (member.cu.cu_offset if target.form.startswith("DW_FORM_ref") and
                               target.form != "DW_FORM_ref_addr" else 0) in decls.get(key, ())

    def _target(self, d) -> int | None:
        if "DW_AT_type" not in d.attributes:
            return None
        t = d.get_DIE_from_attribute("DW_AT_type")
        self._dies.setdefault(t.offset, t)
        r = self.resolve(t)
        return r.offset if r is not None else t.offset

    def element(self, t: TypeInfo | None) -> TypeInfo | None:
        """What a pointer points to, or an array's element; through nested arrays to the
        scalar or record element (a Fortran pointer to an array points to its elements)."""
        cur = self.by_offset(t.target) if t is not None and t.kind in ("pointer", "array") else None
        for _ in range(_DEPTH):
            if cur is None or cur.kind != "array":
                break
            cur = self.by_offset(cur.target)
        return cur

    def pointee(self, t: TypeInfo | None) -> TypeInfo | None:
        """What a pointer points to (an array type for a Fortran array pointer)."""
        return self.by_offset(t.target) if t is not None and t.kind == "pointer" else None

    def handle(self, t: TypeInfo | None) -> bool:
        """Whether ``t`` is a library record that is pointers only (a std::vector's
        start, finish and end of storage; a std::unique_ptr): a variable of it holds
        where its elements are, as a pointer variable does, and its elements are the
        array its name names."""
        if t is None or t.kind != "record" or not symbols.is_system_source(t.file):
            return False
        if t.offset not in self._handles:
            self._handles[t.offset] = self._pointers_only(t)
        return self._handles[t.offset]

    def _pointers_only(self, t: TypeInfo) -> bool:
        todo, seen, pointers = [t], 0, 0
        while todo:
            cur = todo.pop()
            seen += 1
            if seen > _DEPTH:
                return False
            for m in cur.members:
                inner = self.by_offset(m.type)
                if inner is None:
                    return False
                if inner.kind == "record":
                    todo.append(inner)  # a base class, std::vector's _M_impl
                elif inner.kind == "pointer":
                    pointers += 1
                else:
                    return False
        return pointers > 0

    def member_path(self, t: TypeInfo | None, offset: int) -> tuple[list[str], TypeInfo | None]:
        """The member names leading to byte ``offset`` of record type ``t`` (nested records,
        base classes and arrays of records followed), and the type of the innermost
        member.  The names stop at a member of a library type: for `Mesh::m_pos`, a
        std::vector, the path is m_pos and the type its data pointer's (_M_start)."""
        path: list[str] = []
        user = None
        cur = t
        for _ in range(_DEPTH):
            if cur is None:
                break
            if cur.kind == "array":
                if cur.descriptor:
                    break  # its storage is the descriptor, not the elements
                elem = self.by_offset(cur.target)
                if elem is None or elem.size <= 0:
                    break
                offset %= elem.size
                cur = elem
                continue
            if cur.kind != "record":
                break
            # the widest member holding the offset: an empty base class (std::allocator)
            # shares its offset with the data after it
            cover = [m for m in cur.members if m.offset <= offset < m.offset + max(m.size, 1)]
            m = max(cover, key=lambda m: m.size) if cover else None
            if m is None:
                break
            inner = self.by_offset(m.type)
            if m.name:  # else a base class: its members are the record's own
                path.append(m.name)
                if inner is not None and inner.kind == "record" and symbols.is_system_source(inner.file):
                    # a library type (std::vector): the user's name ends at this member,
                    # the type goes on to its data pointer
                    user = user if user is not None else len(path)
            offset -= m.offset
            cur = inner
        return path[: user if user is not None else len(path)], cur


def _declarations(cu) -> dict[tuple, set[int]]:
    """(name, decl file, decl line) -> the type DIE offsets of the variables and
    parameters a compile unit declares there."""
    out: dict[tuple, set[int]] = {}
    for d in cu.iter_DIEs():
        if d.tag not in ("DW_TAG_variable", "DW_TAG_formal_parameter"):
            continue
        a = d.attributes
        if "DW_AT_name" not in a or "DW_AT_type" not in a or "DW_AT_decl_line" not in a:
            continue
        t = a["DW_AT_type"]
        off = t.value + (cu.cu_offset if t.form.startswith("DW_FORM_ref") and t.form != "DW_FORM_ref_addr" else 0)
        key = (_attr(d, "DW_AT_name"), a["DW_AT_decl_file"].value if "DW_AT_decl_file" in a else -1,
               a["DW_AT_decl_line"].value)
        out.setdefault(key, set()).add(off)
    return out


def pointer_to(t: TypeInfo) -> TypeInfo:
    """A pointer to ``t`` (the address of a variable passed by reference), which no DIE
    describes."""
    return TypeInfo("pointer", "", 8, -1, target=t.offset, fortran=t.fortran)


def member_name(record: TypeInfo, path: list[str]) -> str:
    """``struct grid.energy``, ``Mesh::m_pos``, ``fields%w``: a record type and the member
    path inside it, in the source language's notation; a standard-library record is its
    type alone (``std::vector<int>``, not its ``_M_impl``).  A member of a record the
    compiler made (GCC's OpenMP data record, whose members are the shared variables of a
    parallel region) is the variable's name alone."""
    if record.artificial or not record.name or record.name.endswith("(anonymous)"):
        return ".".join(path)
    if record.fortran:
        return "%".join([record.name, *path])
    if record.c or record.name.startswith(("struct ", "union ")):
        return ".".join([record.name, *path])
    name = cxxnames.readable(record.name)
    if record.file and symbols.is_system_source(record.file):
        # a library's type (the headers of a std::vector<std::vector<int>>'s elements,
        # read through a `std::vector<int> *`): its internals are not what a user wrote
        return name
    return "::".join([name, path[0]]) + "".join(f".{p}" for p in path[1:])


def _fortran(d) -> bool:
    lang = d.cu.get_top_DIE().attributes.get("DW_AT_language")
    return lang is not None and lang.value in FORTRAN_LANGS


def _c_language(d) -> bool:
    lang = d.cu.get_top_DIE().attributes.get("DW_AT_language")
    # DW_LANG_C89, C, C99, C11, C17 (C++ names a struct without the keyword)
    return lang is not None and lang.value in (0x01, 0x02, 0x0C, 0x1D, 0x2C)


def _attr(d, name: str) -> str:
    a = d.attributes.get(name)
    if a is None:
        return ""
    v = a.value
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _name(d) -> str:
    return _attr(d, "DW_AT_name")


def _qualified(d) -> str:
    parts = [_name(d)]
    if not parts[0]:
        return ""
    p = d.get_parent()
    while p is not None and p.tag in ("DW_TAG_namespace", *_RECORDS, "DW_TAG_module"):
        if p.tag == "DW_TAG_module" and _fortran(d):
            break  # a Fortran derived type is named without its module
        parts.append(_name(p) or "(anonymous namespace)")
        p = p.get_parent()
    return "::".join(reversed(parts))


def _element_count(d, fortran: bool) -> int:
    """Elements of an array type DIE when every dimension's extent is a constant (or an
    expression of constants), else 0."""
    total = 1
    dims = 0
    for sr in d.iter_children():
        if sr.tag != "DW_TAG_subrange_type":
            continue
        dims += 1
        a = sr.attributes
        count = _constant(sr, a.get("DW_AT_count"))
        if count is None:
            upper = _constant(sr, a.get("DW_AT_upper_bound"))
            lower = _constant(sr, a.get("DW_AT_lower_bound"))
            if lower is None:
                lower = 1 if fortran and "DW_AT_lower_bound" not in a else (0 if "DW_AT_lower_bound" not in a else None)
            if upper is None or lower is None:
                return 0
            count = upper - lower + 1
        if count <= 0:
            return 0
        total *= count
    return total if dims else 0


def _constant(die, attr) -> int | None:
    """The value of a bound attribute when it is computable without the program's
    registers or memory: a constant, a DWARF expression of literals, or a reference to a
    DIE with a constant value."""
    if attr is None:
        return None
    v = attr.value
    form = attr.form
    if form.startswith("DW_FORM_ref"):
        try:
            ref = die.get_DIE_from_attribute(attr.name)
        except (KeyError, ValueError, AttributeError):
            return None
        cv = ref.attributes.get("DW_AT_const_value")
        return int(cv.value) if cv is not None and isinstance(cv.value, int) else None
    if isinstance(v, int):
        # pyelftools reads data forms unsigned; an 8-byte bound above 2^63 is negative
        # (gcc writes the upper bound of an empty array as -1)
        return v - (1 << 64) if form == "DW_FORM_data8" and v >= 1 << 63 else int(v)
    if isinstance(v, list) and form == "DW_FORM_exprloc":
        return literal_value(parse_expr(die.cu.structs, v))
    return None


def parse_expr(structs, expr) -> list:
    """A DWARF expression's operations (pyelftools' parser), [] when it does not parse."""
    try:
        return DWARFExprParser(structs).parse_expr(expr)
    except (KeyError, ValueError, IndexError, AttributeError, ConstructError, DWARFError):
        return []


def literal_value(ops: list) -> int | None:
    """The value of an expression made of one literal or constant (DW_OP_lit*,
    DW_OP_const*), with an optional DW_OP_stack_value; None otherwise."""
    if ops and ops[-1].op_name == "DW_OP_stack_value":
        ops = ops[:-1]
    if len(ops) != 1:
        return None
    name = ops[0].op_name
    if name.startswith("DW_OP_lit") and name[9:].isdigit():
        return int(name[9:])
    if name.startswith("DW_OP_const") and ops[0].args and isinstance(ops[0].args[0], int):
        return int(ops[0].args[0])
    return None


# ------------------------------------------------------------------ instruction tracking
#
# Where the pointer an instruction accesses memory through came from, when no variable's
# location names its register there: the instructions before it in the function are
# walked back to the one that set the register -- a copy of another register, address
# arithmetic on one (lea, add, sub), or a load from memory through another register
# (`mov 0x8(%rdi),%rax`: a member of the structure rdi points to, or an element of a
# pointer array, or a pointer spilled to the stack: a variable's slot, or the register
# stored there before) -- and so on, a few steps, until a
# variable's location (or a stack slot) gives a type.  The same idea as perf's
# instruction tracking (tools/perf/util/annotate-data.c), walked backwards along the
# code's layout instead of forwards over basic blocks.

_DWARF_OF = {}  # capstone x86 register -> DWARF number (rax 0 .. r15 15), every width
# rax rdx rcx rsi rdi r8-r11, and every vector register (System V)
CALLER_SAVED = {0, 1, 2, 4, 5, 8, 9, 10, 11, *range(17, 33), *range(67, 83)}
WALK = 256  # instructions walked back for one register
#: Insn.base of a load from a static word (``mov disp(%rip), %reg``): Insn.disp is then the
#: word's link-time address
RIP = -5
#: registers followed (copies, address arithmetic, loads, frame slots) one after the other
#: for one access: gfortran -O3 passes a dummy argument's address round a loop through four
#: frame slots, reloaded after each call (tests/progs/automatic.f90: 14 steps)
STEPS = 24
#: walks in all for one access, over every definition that reaches it: the depth above
#: times the ways through a function's branches stays bounded
WORK = 2000


def _dwarf_table() -> dict[int, int]:
    if not _DWARF_OF:
        from capstone import x86

        names = [("RAX", "EAX", "AX", "AL", "AH"), ("RDX", "EDX", "DX", "DL", "DH"),
                 ("RCX", "ECX", "CX", "CL", "CH"), ("RBX", "EBX", "BX", "BL", "BH"),
                 ("RSI", "ESI", "SI", "SIL"), ("RDI", "EDI", "DI", "DIL"), ("RBP", "EBP", "BP", "BPL"),
                 ("RSP", "ESP", "SP", "SPL")]
        for num, group in enumerate(names):
            for n in group:
                _DWARF_OF[getattr(x86, f"X86_REG_{n}")] = num
        for k in range(8, 16):
            for suffix in ("", "D", "W", "B"):
                _DWARF_OF[getattr(x86, f"X86_REG_R{k}{suffix}")] = k
        # the vector registers, a pointer's store when the compiler is short of general
        # ones (gcc -march=znver4 keeps them in xmm: `vmovq %r12,%xmm3` ... `vmovq
        # %xmm3,%rcx`): xmm0-15 are DWARF 17-32, xmm16-31 67-82 (x86-64 psABI, figure
        # 3.36), ymm and zmm the same registers
        for k in range(32):
            num = 17 + k if k < 16 else 67 + k - 16
            for width in ("XMM", "YMM", "ZMM"):
                reg = getattr(x86, f"X86_REG_{width}{k}", None)
                if reg is not None:
                    _DWARF_OF[reg] = num
    return _DWARF_OF


def _ids(names) -> frozenset[int]:
    """Capstone's instruction ids of the mnemonics ``names`` (those this Capstone has)."""
    from capstone import x86

    return frozenset(getattr(x86, f"X86_INS_{n}") for n in names if hasattr(x86, f"X86_INS_{n}"))


def _vector_copies() -> frozenset[int]:
    """Capstone ids of the moves between registers that carry a pointer through a vector
    register: movq (general <-> xmm) and whole-register copies (xmm <-> xmm)."""

    names = ("MOVQ", "VMOVQ", "MOVDQA", "VMOVDQA", "VMOVDQA32", "VMOVDQA64", "MOVDQU", "VMOVDQU",
             "VMOVDQU32", "VMOVDQU64", "MOVAPS", "VMOVAPS", "MOVAPD", "VMOVAPD")
    return _ids(names)


def _value_stores() -> frozenset[int]:
    """Capstone ids of the moves of a register to memory that store a value (a general
    register, an xmm register's scalar or whole vector): what a spill is made of."""

    names = ("MOV", "MOVD", "VMOVD", "MOVQ", "VMOVQ", "MOVSD", "VMOVSD", "MOVSS", "VMOVSS",
             "MOVAPS", "VMOVAPS", "MOVAPD", "VMOVAPD", "MOVUPS", "VMOVUPS", "MOVUPD", "VMOVUPD",
             "MOVDQA", "VMOVDQA", "MOVDQU", "VMOVDQU", "MOVLPD", "VMOVLPD", "MOVLPS", "VMOVLPS",
             "MOVHPD", "VMOVHPD", "MOVHPS", "VMOVHPS")  # the high lane stored: `movhpd %xmm11, 0x98(%rsp)`
    return _ids(names)


def _arithmetic() -> tuple[frozenset[int], frozenset[int], frozenset[int]]:
    """Capstone ids of the floating-point instructions that compute a register's value
    from its own and another operand's (addsd, mulpd, the shuffles and partial loads that
    combine two registers' elements, the fused multiply-adds), of those whose value is the
    other operand's alone (conversions, sqrt, movddup), and of the logic ones whose
    operand twice makes a constant (`xorpd %xmm0, %xmm0`)."""

    names = [f"{op}{t}" for op in ("ADD", "SUB", "MUL", "DIV", "MIN", "MAX") for t in ("SD", "SS", "PD", "PS")]
    names += ["ANDPD", "ANDPS", "ANDNPD", "ANDNPS", "ORPD", "ORPS", "XORPD", "XORPS", "UNPCKLPD", "UNPCKHPD",
              "UNPCKLPS", "UNPCKHPS", "SHUFPD", "SHUFPS", "MOVHPD", "MOVHPS", "HADDPD",
              "HSUBPD", "HADDPS", "HSUBPS", "BLENDPD", "BLENDPS", "BLENDVPD", "BLENDVPS"]
    names += [f"VF{n}{form}{t}" for n in ("MADD", "MSUB", "NMADD", "NMSUB") for form in ("132", "213", "231")
              for t in ("SD", "SS", "PD", "PS")]
    replace = ["CVTSS2SD", "CVTSD2SS", "CVTPS2PD", "CVTPD2PS", "SQRTSD", "SQRTSS", "SQRTPD", "SQRTPS",
               "MOVDDUP", "MOVLPD", "MOVLPS"]
    names += ["V" + n for n in names if not n.startswith("VF")]
    replace += ["V" + n for n in replace]

    return _ids(names), _ids(replace), _ids(n for n in names if n.lstrip("V").startswith(("XOR", "ANDN")))


def _integer() -> tuple[frozenset[int], frozenset[int]]:
    """Capstone ids of the integer instructions that compute a register's value from its
    own and another operand's (add, imul, the shifts and logic ones), and of the loads that
    widen an integer (movsx, movzx)."""

    return (_ids(("ADD", "SUB", "IMUL", "SHL", "SAL", "SAR", "SHR", "AND", "OR", "XOR", "NEG", "INC", "DEC")),
            _ids(("MOVSXD", "MOVSX", "MOVZX")))


@dataclass(frozen=True)
class Insn:
    """One instruction, as much of it as the tracking needs (DWARF register numbers)."""
    addr: int
    next: int  # address of the following instruction
    writes: frozenset[int]
    op: str  # copy | lea | step | load | addload | vload | arith | store | vstore | call | pop
    # | ret | jmp | jcc | tp (dst = the thread pointer: `mov %fs:0, %rdx`) | addtp (dst +=
    # the thread pointer) | const (dst = disp: `mov $-0x65c0, %rcx`) | zero (dst = 0:
    # `pxor %xmm1, %xmm1`) | istore (a constant stored to memory) | other
    dst: int = -1
    src: int = -1  # copy: the source register; store: the register stored; arith: the
    # register the result updates (sse's `mulsd %xmm0, %xmm2`: xmm2; avx's first source)
    base: int = -1  # lea, load, store, arith: the memory operand's base register
    index: int = -1
    disp: int = 0  # the memory operand's displacement; step: the constant added (0: a register)
    size: int = 0  # bytes loaded / copied / stored
    nop: bool = False
    src2: int = -1  # arith: the other source register (-1: a memory operand, or none)
    tls: bool = False  # load, vload, arith: the memory operand is %fs-relative (its address
    # the thread pointer + base + disp; base -1: none)
    scale: int = 1  # lea: the index's factor
    operator: str = ""  # arith: `+`, `-`, `*`, `/` of the four operations (sse, avx,
    # integer: addsd, vsubpd, imul, divss), else empty; lea `+`


def decode(code: bytes, addr: int) -> list[Insn]:
    """The instructions of a function's code (Capstone), in address order."""
    import capstone
    from capstone import x86

    table = _dwarf_table()
    vector_copies = _vector_copies()
    value_stores = _value_stores()
    combine, replace, zeroing = _arithmetic()
    integer, extending = _integer()
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    out = []
    for i in md.disasm(code, addr):
        try:
            _, wr = i.regs_access()
        except capstone.CsError:
            wr = []
        writes = frozenset(table[r] for r in wr if r in table)
        ops = i.operands
        op, dst, src, base, index, disp, size, src2, tls, scale = "other", -1, -1, -1, -1, 0, 0, -1, False, 1
        if i.group(capstone.CS_GRP_CALL):
            op = "call"
        elif i.group(capstone.CS_GRP_RET):
            op = "ret"
        elif i.id == x86.X86_INS_JMP:
            # unconditional: what follows is reached only by a jump to it; disp its target
            # (0: an indirect jump)
            op = "jmp"
            disp = ops[0].imm if len(ops) == 1 and ops[0].type == x86.X86_OP_IMM else 0
        elif i.group(capstone.CS_GRP_JUMP):
            # a conditional branch (jcc, loop, jrcxz): disp its target
            op = "jcc"
            disp = ops[0].imm if len(ops) == 1 and ops[0].type == x86.X86_OP_IMM else 0
        elif i.id == x86.X86_INS_POP:
            op = "pop"  # an epilogue's restore of a callee-saved register
        elif (i.id in (x86.X86_INS_MOV, x86.X86_INS_ADD) and len(ops) == 2 and ops[0].type == x86.X86_OP_REG
              and ops[0].reg in table and ops[0].size == 8 and ops[1].type == x86.X86_OP_MEM
              and ops[1].mem.segment == x86.X86_REG_FS and ops[1].mem.base == 0 and ops[1].mem.index == 0
              and ops[1].mem.disp == 0):
            # the thread pointer (its TCB's first word points to itself: the TLS ABI's tcbhead_t):
            # a thread-local variable's address is it plus a constant
            op, dst, size = "tp" if i.id == x86.X86_INS_MOV else "addtp", table[ops[0].reg], 8
        elif (i.id in (x86.X86_INS_MOV, x86.X86_INS_MOVABS) and len(ops) == 2 and ops[0].type == x86.X86_OP_REG
              and ops[0].reg in table and ops[0].size == 8 and ops[1].type == x86.X86_OP_IMM):
            op, dst, disp, size = "const", table[ops[0].reg], _signed(ops[1].imm), 8
        elif (i.id == x86.X86_INS_MOV and len(ops) == 2 and ops[0].type == x86.X86_OP_REG
              and ops[0].reg in table and ops[0].size == 8 and ops[1].type == x86.X86_OP_MEM
              and ops[1].mem.base == x86.X86_REG_RIP and ops[1].mem.index == 0 and ops[1].mem.segment == 0):
            # a pointer loaded from a static variable
            op, dst, base, disp, size = "load", table[ops[0].reg], RIP, i.address + i.size + ops[1].mem.disp, 8
        elif ((i.id in combine or i.id in replace) and 2 <= len(ops) and ops[0].type == x86.X86_OP_REG
              and ops[0].reg in table):
            # a value computed from registers' and memory's (FrameIndex._computed): the
            # register updated, the other source register or the memory operand
            op, dst, size = "arith", table[ops[0].reg], ops[0].size
            fma = i.mnemonic.startswith("vf")
            three = len(ops) >= 3 and i.mnemonic.startswith("v") and not fma
            srcs = list(ops[2:] if three else ops[1:])
            if i.id not in replace:
                src = table[ops[1].reg] if three and ops[1].type == x86.X86_OP_REG and ops[1].reg in table else dst
            other = srcs[0] if srcs and srcs[0].type != x86.X86_OP_IMM else None
            if i.id in replace:
                other = ops[-1] if ops[-1].type != x86.X86_OP_IMM else None
            if other is not None and other.type == x86.X86_OP_REG and other.reg in table:
                src2 = table[other.reg]
                if i.id in zeroing and src2 == src:  # `xorpd %xmm0, %xmm0`: zero, no one's value
                    op = "zero"
            elif other is not None and other.type == x86.X86_OP_MEM and other.mem.segment == x86.X86_REG_FS:
                base, index, disp, tls = _fs_operand(other.mem, table)
            elif other is not None and other.type == x86.X86_OP_MEM and other.mem.segment == 0:
                if other.mem.base == x86.X86_REG_RIP and other.mem.index == 0:
                    base, disp = RIP, i.address + i.size + other.mem.disp
                elif other.mem.base in table:
                    base, index, disp = table[other.mem.base], table.get(other.mem.index, -1), other.mem.disp
        elif (i.id in (x86.X86_INS_PXOR, x86.X86_INS_VPXOR, x86.X86_INS_VPXORD, x86.X86_INS_VPXORQ)
              and len(ops) >= 2 and all(o.type == x86.X86_OP_REG for o in ops) and ops[0].reg in table
              and ops[-1].reg == ops[-2].reg):
            op, dst = "zero", table[ops[0].reg]  # `pxor %xmm14, %xmm14`
        elif (i.id in integer and ops and ops[0].type == x86.X86_OP_REG and ops[0].reg in table
              and ops[0].size == 4):
            # a 32-bit integer computed (an index, a loop bound: `add %ebp, %r12d`, `imul
            # $5, %eax, %edx`); never a pointer, so no part of the pointer tracking
            op, dst, size = "arith", table[ops[0].reg], 4
            three = i.id == x86.X86_INS_IMUL and len(ops) == 3
            src = table.get(ops[1].reg, -1) if three and ops[1].type == x86.X86_OP_REG else dst
            other = ops[1] if len(ops) == 2 else ops[1] if three and ops[1].type == x86.X86_OP_MEM else None
            if other is not None and other.type == x86.X86_OP_REG and other.reg in table:
                src2 = table[other.reg]
                if i.id in (x86.X86_INS_XOR, x86.X86_INS_SUB) and src2 == dst:
                    op = "zero"  # `xor %eax, %eax`
            elif other is not None and other.type == x86.X86_OP_MEM and other.mem.segment == 0:
                if other.mem.base == x86.X86_REG_RIP and other.mem.index == 0:
                    base, disp = RIP, i.address + i.size + other.mem.disp
                elif other.mem.base in table:
                    base, index, disp = table[other.mem.base], table.get(other.mem.index, -1), other.mem.disp
                if three:
                    src = -1
        elif (i.id == x86.X86_INS_LEA and len(ops) == 2 and ops[0].type == x86.X86_OP_REG and ops[0].reg in table
              and ops[1].mem.segment == 0 and ops[1].mem.base == 0 and ops[1].mem.index in table):
            # an index scaled, no base (`lea 0x0(,%rax,4), %r11d`)
            op, dst, size, scale = "lea", table[ops[0].reg], ops[0].size, ops[1].mem.scale
            index, disp = table[ops[1].mem.index], ops[1].mem.disp
        elif (i.id in vector_copies and len(ops) == 2 and ops[0].type == x86.X86_OP_REG
              and ops[1].type == x86.X86_OP_REG and ops[0].reg in table and ops[1].reg in table):
            op, dst, src, size = "copy", table[ops[0].reg], table[ops[1].reg], 8
        elif len(ops) == 2 and ops[0].type == x86.X86_OP_REG and ops[0].reg in table:
            dst, size = table[ops[0].reg], ops[0].size
            s = ops[1]
            if s.type == x86.X86_OP_MEM and s.mem.segment == 0 and s.mem.base in table:
                base = table[s.mem.base]
                index = table.get(s.mem.index, -1)
                disp = s.mem.disp
                if i.id == x86.X86_INS_LEA:
                    op, scale = "lea", s.mem.scale
                elif (i.id == x86.X86_INS_MOV and size == 8) or i.id in (x86.X86_INS_MOVQ, x86.X86_INS_VMOVQ):
                    op, size = "load", 8
                elif i.id == x86.X86_INS_ADD and size == 8:
                    op = "addload"  # reg += a word from memory: either may be the pointer
                elif i.id in value_stores or i.id in extending:
                    # a value read whole (`movsd 8(%rax,%rcx,8), %xmm3`), or widened
                    # (`movslq 0x9c(%rsp), %rax`: an int's)
                    op, size = "vload", s.size
            elif (s.type == x86.X86_OP_MEM and s.mem.segment == x86.X86_REG_FS
                  and ((i.id == x86.X86_INS_MOV and size == 8) or i.id in value_stores)):
                # a thread-local variable's word or value (`movsd %fs:0xc0(%rcx), %xmm4`)
                base, index, disp, tls = _fs_operand(s.mem, table)
                op, size = ("load", 8) if i.id == x86.X86_INS_MOV else ("vload", s.size)
            elif (s.type == x86.X86_OP_MEM and s.mem.segment == 0 and s.mem.base == x86.X86_REG_RIP
                  and s.mem.index == 0 and i.id in value_stores):
                # a static scalar's value (`movsd dt(%rip), %xmm0`): disp its address
                op, base, disp, size = "vload", RIP, i.address + i.size + s.mem.disp, s.size
            elif s.type == x86.X86_OP_REG and s.reg in table and size == 8:
                if i.id == x86.X86_INS_MOV:
                    op, src = "copy", table[s.reg]
                elif i.id == x86.X86_INS_ADD:
                    op, src = "step", table[s.reg]  # either register may be the pointer
                elif i.id == x86.X86_INS_SUB:
                    op = "step"
            elif s.type == x86.X86_OP_IMM and i.id in (x86.X86_INS_ADD, x86.X86_INS_SUB) and size == 8:
                op, disp = "step", _signed(s.imm) * (1 if i.id == x86.X86_INS_ADD else -1)
        elif (len(ops) == 2 and i.id == x86.X86_INS_MOV and ops[0].type == x86.X86_OP_MEM
              and ops[1].type == x86.X86_OP_REG and ops[1].reg in table and ops[1].size == 8
              and ops[0].mem.segment == 0 and ops[0].mem.base in table):
            op, src, size = "store", table[ops[1].reg], 8  # a spill: mov %reg, disp(%base)
            base, index, disp = table[ops[0].mem.base], table.get(ops[0].mem.index, -1), ops[0].mem.disp
        elif (len(ops) == 2 and i.id == x86.X86_INS_MOV and ops[0].type == x86.X86_OP_MEM
              and ops[1].type == x86.X86_OP_IMM and ops[0].mem.segment == 0 and ops[0].mem.base in table):
            # a constant stored (`movl $0x0, 0xc(%rsp)`: an accumulator started at zero)
            op, size = "istore", ops[0].size
            base, index, disp = table[ops[0].mem.base], table.get(ops[0].mem.index, -1), ops[0].mem.disp
        elif (len(ops) == 2 and i.id in value_stores and ops[0].type == x86.X86_OP_MEM
              and ops[1].type == x86.X86_OP_REG and ops[1].reg in table
              and ops[0].mem.segment == 0 and ops[0].mem.base in table):
            # any other register stored whole or in its low part (`movsd %xmm3, 0x18(%rsp)`,
            # `mov %ecx, 0x8(%rsp)`): a value spilled, not a pointer (FrameIndex.slot_value)
            op, src, size = "vstore", table[ops[1].reg], ops[0].size
            base, index, disp = table[ops[0].mem.base], table.get(ops[0].mem.index, -1), ops[0].mem.disp
        out.append(Insn(i.address, i.address + i.size, writes, op, dst, src, base, index, disp, size,
                        i.id == x86.X86_INS_NOP, src2 if op == "arith" else -1, tls and op in ("load", "vload", "arith"), scale,
                        _operator(i.mnemonic) if op == "arith" else "+" if op == "lea" else ""))
    return out


def _operator(mnemonic: str) -> str:
    """The operation of an arithmetic instruction, of the four: `mulsd`, `vmulpd`, `imul`
    are `*`; fused multiply-adds and the others (min, shuffles, shifts) none."""
    m = mnemonic.removeprefix("v")
    if m.startswith("addsub"):
        return ""
    return next((sign for prefix, sign in (("add", "+"), ("sub", "-"), ("mul", "*"), ("imul", "*"), ("div", "/"))
                 if m.startswith(prefix)), "")


def _signed(imm: int) -> int:
    return imm - (1 << 64) if imm >= 1 << 63 else imm


def _fs_operand(mem, table) -> tuple[int, int, int, bool]:
    """(base, index, disp, True) of a %fs-relative memory operand (base -1: none)."""
    return table.get(mem.base, -1), table.get(mem.index, -1), _signed(mem.disp), True
