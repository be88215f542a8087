"""Static variables from DWARF: which member or element of a global lies at an offset.

When a static variable points to an object, the name a user wrote is the variable's —
or, inside a struct or an array of pointers, the member or the element: ``grid.energy``,
``rows[3]``.  The variable is found by its address (``DW_AT_location`` ``DW_OP_addr``),
its type walked through typedefs and qualifiers to the member or element holding the
offset.  Standard-library classes (``std::vector``, ``std::unique_ptr``) and Fortran
descriptors stand for the variable itself: their internals are not what a user wrote.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

from numaprof.analyzer import symbols

MAX_DIES = 4_000_000  # DIEs visited per file to list its variables
_QUALIFIERS = ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type",
               "DW_TAG_restrict_type", "DW_TAG_atomic_type")
_CLASSES = ("DW_TAG_structure_type", "DW_TAG_class_type", "DW_TAG_union_type")
_LEAVES = ("DW_TAG_pointer_type", "DW_TAG_reference_type", "DW_TAG_rvalue_reference_type",
           "DW_TAG_base_type", "DW_TAG_enumeration_type", "DW_TAG_ptr_to_member_type")
DW_OP_ADDR, DW_OP_PLUS_UCONST = 0x03, 0x23
DW_OP_CONST4U, DW_OP_CONST8U = 0x0C, 0x0E
DW_OP_FORM_TLS_ADDRESS, DW_OP_GNU_PUSH_TLS_ADDRESS = 0x9B, 0xE0

_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Var(NamedTuple):
    type: object  # the type DIE
    name: str  # DW_AT_name: what the source calls it
    scope: str  # the function it is declared in ("" at file or namespace scope)
    die: object  # the variable's DIE


def display_name(name: str, info: symbols.ElfInfo | None = None, address: int = 0) -> str:
    """The name a user wrote for a static symbol: gfortran's module variable
    ``__mod_MOD_var`` is ``var``; a static local of a function, which gcc calls
    ``var.3`` in the symbol table, is the ``var`` of its DWARF (with ``info`` and its
    link-time ``address``)."""
    if name.startswith("__") and "_MOD_" in name:
        _, var = name[2:].split("_MOD_", 1)
        if var:
            return var
    if info is not None and "." in name:
        found = source_name(info, address)
        if found is not None:
            return found[0]
    return name


def source_name(info: symbols.ElfInfo, address: int) -> tuple[str, str] | None:
    """(name, function) of the static variable at link-time ``address`` as its DWARF
    declares it — function "" at file scope — or None without DWARF for it."""
    var = _variables(info).get(address)
    if var is None or not var.name:
        return None
    return var.name, var.scope


def pointer_at(info: symbols.ElfInfo, address: int):
    """(name, type DIE, declaring DIE) of the static pointer variable at link-time
    ``address`` as its DWARF declares it (the type a pointer's, typedefs and qualifiers
    stripped; the declaration: where DW_AT_decl_file and _line are), or None."""
    var = _variables(info).get(address)
    if var is None or not var.name:
        return None
    try:
        t = _strip(var.type)
        decl = var.die
        for _ in range(4):
            if "DW_AT_decl_file" in decl.attributes or "DW_AT_specification" not in decl.attributes:
                break
            decl = decl.get_DIE_from_attribute("DW_AT_specification")
    except symbols.DAMAGED:
        return None
    return (var.name, t, decl) if t is not None and t.tag == "DW_TAG_pointer_type" else None


def member_path(info: symbols.ElfInfo, address: int, offset: int) -> str | None:
    """The member / element path (``.energy``, ``[3]``, ``.rows[2].data``; ``""`` for the
    variable itself) of the word at ``offset`` in the static variable at link-time
    ``address``; None without DWARF for it or when the offset holds no pointer."""
    var = _variables(info).get(address)
    if var is None:
        return None
    try:
        return _path(var.type, offset, 0)
    except symbols.DAMAGED:
        return None


def is_descriptor(info: symbols.ElfInfo, address: int) -> bool:
    """Whether the static variable at link-time ``address`` is a Fortran array descriptor
    (an allocatable or pointer array: its type has DW_AT_data_location), which holds the
    array's address and bounds, not its elements."""
    var = _variables(info).get(address)
    try:
        t = _strip(var.type) if var is not None else None
        return t is not None and t.tag == "DW_TAG_array_type" and "DW_AT_data_location" in t.attributes
    except symbols.DAMAGED:
        return False


def thread_local(info: symbols.ElfInfo, offset: int) -> tuple[str, object] | None:
    """(name, type DIE) of the thread-local variable at ``offset`` in the file's TLS
    block as its DWARF declares it (``DW_OP_const8u offset; DW_OP_form_tls_address``),
    or None."""
    var = _all(info)[1].get(offset)
    return (var.name, var.type) if var is not None and var.name else None


def _variables(info: symbols.ElfInfo) -> dict[int, _Var]:
    """{link-time address: variable} of the file's static variables (read once)."""
    return _all(info)[0]


def _tls_offset(v) -> int | None:
    """The offset in the TLS block a thread-local variable's location expression gives
    (a constant, then DW_OP_form_tls_address or GCC's DW_OP_GNU_push_tls_address)."""
    if not isinstance(v, list) or len(v) < 2 or v[-1] not in (DW_OP_FORM_TLS_ADDRESS, DW_OP_GNU_PUSH_TLS_ADDRESS):
        return None
    width = {DW_OP_CONST4U: 4, DW_OP_CONST8U: 8}.get(v[0])
    if width is None or len(v) != width + 2:
        return None
    return int.from_bytes(bytes(v[1 : 1 + width]), "little")


def _all(info: symbols.ElfInfo) -> tuple[dict[int, _Var], dict[int, _Var]]:
    """({link-time address: variable} of the static variables, {TLS block offset:
    variable} of the thread-local ones), read once."""
    cached = _cache.get(info)
    if cached is not None:
        return cached
    out: dict = {}
    tls: dict = {}
    try:
        if info.elf.has_dwarf_info():
            seen = 0
            for cu in info.dwarf().iter_CUs():
                for die in cu.iter_DIEs():
                    seen += 1
                    if seen > MAX_DIES:
                        break
                    if die.tag != "DW_TAG_variable":
                        continue
                    loc = die.attributes.get("DW_AT_location")
                    v = loc.value if loc is not None else None
                    if isinstance(v, list) and len(v) == 9 and v[0] == DW_OP_ADDR:
                        where, into = int.from_bytes(bytes(v[1:9]), "little"), out
                    else:
                        where, into = _tls_offset(v), tls
                        if where is None:
                            continue
                    typ = _type_of(die)
                    if typ is not None:
                        into.setdefault(where, _Var(typ, _declared_name(die), _scope(die), die))
                if seen > MAX_DIES:
                    break
    except symbols.DAMAGED:
        pass
    _cache[info] = (out, tls)
    return out, tls


def _declared_name(die) -> str:
    """A variable's name, from its declaration when the definition refers to one."""
    d = die
    for _ in range(4):
        if "DW_AT_name" in d.attributes:
            return _name(d)
        if "DW_AT_specification" not in d.attributes:
            return ""
        d = d.get_DIE_from_attribute("DW_AT_specification")
    return ""


def _scope(die) -> str:
    """The name of the function a variable is declared in ("" outside every function)."""
    p = die.get_parent()
    for _ in range(64):
        if p is None or p.tag == "DW_TAG_compile_unit":
            return ""
        if p.tag == "DW_TAG_subprogram":
            return _subprogram_name(p)
        p = p.get_parent()
    return ""


def _subprogram_name(die) -> str:
    d = die
    for _ in range(4):
        if "DW_AT_name" in d.attributes:
            return _name(d)
        ref = next((a for a in ("DW_AT_specification", "DW_AT_abstract_origin") if a in d.attributes), None)
        if ref is None:
            return "?"
        d = d.get_DIE_from_attribute(ref)
    return "?"


def _type_of(die):
    """The type DIE of a variable (through DW_AT_specification to its declaration)."""
    d = die
    for _ in range(4):
        if "DW_AT_type" in d.attributes:
            return d.get_DIE_from_attribute("DW_AT_type")
        if "DW_AT_specification" not in d.attributes:
            return None
        d = d.get_DIE_from_attribute("DW_AT_specification")
    return None


def _strip(t):
    for _ in range(16):
        if t is None or t.tag not in _QUALIFIERS:
            return t
        t = t.get_DIE_from_attribute("DW_AT_type") if "DW_AT_type" in t.attributes else None
    return None


def _size(t) -> int | None:
    t = _strip(t)
    if t is None:
        return None
    if "DW_AT_byte_size" in t.attributes:
        return int(t.attributes["DW_AT_byte_size"].value)
    if t.tag in ("DW_TAG_pointer_type", "DW_TAG_reference_type", "DW_TAG_rvalue_reference_type"):
        return 8
    if t.tag == "DW_TAG_array_type":
        esize = _size(t.get_DIE_from_attribute("DW_AT_type")) if "DW_AT_type" in t.attributes else None
        dims = _dims(t)
        if esize is None or dims is None:
            return None
        n = esize
        for d in dims:
            n *= d
        return n
    return None


def _dims(t) -> list[int] | None:
    dims = []
    for ch in t.iter_children():
        if ch.tag != "DW_TAG_subrange_type":
            continue
        a = ch.attributes
        if "DW_AT_count" in a and isinstance(a["DW_AT_count"].value, int):
            dims.append(int(a["DW_AT_count"].value))
        elif "DW_AT_upper_bound" in a and isinstance(a["DW_AT_upper_bound"].value, int):
            lower = a["DW_AT_lower_bound"].value if "DW_AT_lower_bound" in a else 0
            if not isinstance(lower, int):
                return None
            dims.append(int(a["DW_AT_upper_bound"].value) - lower + 1)
        else:
            return None
    return dims or None


def _member_offset(m) -> int | None:
    a = m.attributes.get("DW_AT_data_member_location")
    if a is None:
        return 0 if m.get_parent() is not None and m.get_parent().tag == "DW_TAG_union_type" else None
    v = a.value
    if isinstance(v, int):
        return v
    if isinstance(v, list) and v and v[0] == DW_OP_PLUS_UCONST:
        n, shift = 0, 0
        for b in v[1:]:  # ULEB128
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        return n
    return None


def _name(die) -> str:
    a = die.attributes.get("DW_AT_name")
    if a is None:
        return ""
    return a.value.decode("utf-8", "replace") if isinstance(a.value, bytes) else str(a.value)


def _is_library_class(t) -> bool:
    p = t.get_parent()
    while p is not None and p.tag == "DW_TAG_namespace":
        if _name(p) in ("std", "__gnu_cxx", "__cxx11"):
            return True
        p = p.get_parent()
    return False


def _path(t, offset: int, depth: int) -> str | None:
    t = _strip(t)
    if t is None or depth > 16:
        return None
    if t.tag in _LEAVES:
        return "" if offset == 0 else None
    if t.tag in _CLASSES:
        if _is_library_class(t):
            return "" if offset == 0 else None
        for m in t.iter_children():
            if m.tag not in ("DW_TAG_member", "DW_TAG_inheritance") or "DW_AT_type" not in m.attributes:
                continue
            loc = _member_offset(m)
            mt = m.get_DIE_from_attribute("DW_AT_type")
            msize = _size(mt)
            if loc is None or msize is None or not loc <= offset < loc + msize:
                continue
            sub = _path(mt, offset - loc, depth + 1)
            if sub is None:
                continue
            name = _name(m) if m.tag == "DW_TAG_member" else ""
            return (f".{name}" if name else "") + sub
        return None
    if t.tag == "DW_TAG_array_type":
        if "DW_AT_data_location" in t.attributes:  # a Fortran descriptor: the array itself
            return "" if offset == 0 else None
        et = t.get_DIE_from_attribute("DW_AT_type") if "DW_AT_type" in t.attributes else None
        esize = _size(et)
        dims = _dims(t)
        if not esize or dims is None:
            return None
        idx, rest = divmod(offset, esize)
        indices = []
        for count in reversed(dims[1:]):
            idx, i = divmod(idx, count)
            indices.append(i)
        indices.append(idx)
        if idx >= dims[0]:
            return None
        sub = _path(et, rest, depth + 1)
        if sub is None:
            return None
        return "".join(f"[{i}]" for i in reversed(indices)) + sub
    return None
