"""Code and data symbols: ELF symbol tables, DWARF line tables and scopes, runtime code
addresses to source lines (names read from the sources are in :mod:`srcnames`).

Everything here is cached per ELF file, because a profile names the same few binaries
thousands of times.  A missing or stripped binary is not an error: lookups return None
and the caller falls back to a weaker name (``heap@0x...``).

One module (~900 lines) on purpose: :class:`ElfInfo` is half of it, one ELF file's
symbols, line table, inlined calls and scopes read together from one open file with
shared caches; the rest (demangling, the DWARF helpers the frames and data types reuse,
the resolver) is what reads it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from numaprof.analyzer import debuginfo, profile_io, sourcelang
from numaprof.analyzer.archive import EMPTY, Archive
from numaprof.analyzer.cxxnames import demangle, readable
from numaprof.errors import ProfileError
from numaprof.syspaths import is_system_library, is_system_source  # noqa: F401 (re-exported)

try:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection
except ImportError:  # pragma: no cover - pyelftools is a hard dependency
    ELFFile = None
    ELFError = Exception

# What pyelftools (and the construct parser under it) raise on a damaged or crafted ELF
# file: an archived binary is profile content, so any of these only means "no symbols".
DAMAGED = (ELFError, KeyError, IndexError, ValueError, AttributeError, TypeError, EOFError,
           AssertionError, OverflowError, MemoryError, RecursionError, UnicodeError, OSError,
           ArithmeticError)
try:
    from elftools.construct.core import ConstructError

    DAMAGED = (*DAMAGED, ConstructError)
except ImportError:  # pragma: no cover - a pyelftools without the bundled construct
    pass

SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_TLS = 0x1, 0x2, 0x4, 0x400
STT_OBJECT, STT_FUNC, STT_GNU_IFUNC = 1, 2, 10
_SYM64 = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"),
                   ("value", "<u8"), ("size", "<u8")])
PAGE_MASK = ~0xFFF


@dataclass(frozen=True)
class ClassScope:
    """The class a C++ member function belongs to (DWARF): its qualified name and the
    names of its data members, inherited and static ones included."""
    name: str
    members: frozenset[str]


@dataclass(frozen=True)
class SourceLine:
    function: str
    file: str  # full path as DWARF names it
    line: int
    column: int = 0
    # the class of the function whose body holds the line, when it is a member function
    scope: ClassScope | None = field(default=None, compare=False, repr=False)
    # (n, count) of an allocating call among the calls its statement makes to the same
    # function (ElfInfo.call_rank), when that is known and matters (Fortran); and among
    # the calls its function body makes to it (a caller whose line the table misplaced)
    call: tuple[int, int] | None = field(default=None, compare=False, repr=False)
    body_call: tuple[int, int] | None = field(default=None, compare=False, repr=False)

    @property
    def site(self) -> str:
        """``function@file.c:line`` with the file's basename (``function@lib.so`` without
        line information); a C++ function's name as :func:`readable` shortens it."""
        if self.line <= 0:
            return f"{readable(self.function)}@{os.path.basename(self.file)}"
        return f"{readable(self.function)}@{os.path.basename(self.file)}:{self.line}"


@dataclass(frozen=True)
class StaticSymbol:
    name: str
    address: int  # link-time address
    size: int
    section: str
    writable: bool


class ElfInfo:
    """One ELF file: loadable segments, symbols, and (lazily) its DWARF line table."""

    def __init__(self, path: str, f=None):
        self.path = path
        # kept open for lazy DWARF reads
        self._f = f if f is not None else open(path, "rb")  # noqa: SIM115
        self.elf = ELFFile(self._f)
        self.loads = [
            (s["p_offset"], s["p_vaddr"], s["p_filesz"], s["p_memsz"])
            for s in self.elf.iter_segments()
            if s["p_type"] == "PT_LOAD"
        ]
        self.objects: list[StaticSymbol] = []
        funcs: dict[int, tuple[str, int]] = {}
        sections = list(self.elf.iter_sections())
        sec_flags = np.array([sec["sh_flags"] for sec in sections] + [0], dtype=np.uint64)
        # a stripped file's full symbol table is in its separate debug file, where the
        # distribution installs one (`libc6-dbg`: glibc's `main_arena`), as perf and gdb
        # find it
        self.debug_file = None if self.elf.get_section_by_name(".symtab") else _debug_file(self.elf, path)
        tables = [(self.elf, ".symtab"), (self.elf, ".dynsym")]
        debug = None
        if self.debug_file is not None:
            try:
                fd, _ = profile_io.open_regular(self.debug_file)
                debug = ELFFile(os.fdopen(fd, "rb"))
                tables.insert(0, (debug, ".symtab"))
            except (*DAMAGED, ProfileError):
                self.debug_file = None
        for elf, tabname in tables:
            try:
                tab = elf.get_section_by_name(tabname)
                if not isinstance(tab, SymbolTableSection):
                    continue
                secs = sections if elf is self.elf else list(elf.iter_sections())
                flags = sec_flags if elf is self.elf else np.array([sec["sh_flags"] for sec in secs] + [0],
                                                                   dtype=np.uint64)
                seen = {o.address for o in self.objects}
                for name, typ, shndx, value, size in self._symbols(tab, secs, flags):
                    if typ in (STT_FUNC, STT_GNU_IFUNC):
                        funcs.setdefault(value, (name, size))
                    elif value not in seen:
                        fl = int(flags[shndx])
                        self.objects.append(StaticSymbol(readable(demangle(name)), value, size, secs[shndx].name,
                                                         bool(fl & SHF_WRITE)))
                        seen.add(value)
            except DAMAGED:
                if elf is not debug:
                    raise
                self.debug_file = None  # a damaged debug file: the file's own tables only
        if debug is not None:
            debug.stream.close()
        order = sorted(funcs)
        self.func_addr = np.array(order, dtype=np.uint64)
        self.func_info = [funcs[a] for a in order]
        # the sections loaded in memory, by address: what a data address with no symbol is in
        alloc = sorted((int(sec["sh_addr"]), int(sec["sh_size"]), sec.name, int(sec["sh_flags"]))
                       for sec in sections
                       if int(sec["sh_flags"]) & SHF_ALLOC and sec["sh_size"] and sec["sh_addr"])
        self._sec_addr = np.array([a for a, _, _, _ in alloc], dtype=np.uint64)
        self._sec_info = [(a + size, name, bool(fl & SHF_WRITE)) for a, size, name, fl in alloc]
        self._lines = None
        self._dwarf = None
        self._common: dict[str, list[tuple[str, int]]] | None = None
        self._scopes: dict[int, tuple] = {}  # CU offset -> code scopes (inline_positions)
        self._cu_files: dict[int, list[str]] = {}
        self._sites: dict[int, dict[int, tuple]] = {}  # CU offset -> call sites (call_rank)
        self._classes: dict[int, ClassScope] = {}  # class DIE offset -> its scope
        self.frames = None  # analyzer/frames.py FrameIndex, built on first use

    def _symbols(self, tab, sections, sec_flags):
        """(name, type, shndx, value, size) of functions and data objects of a symbol table.

        ELF64 little-endian tables are decoded with numpy (pyelftools' per-symbol parsing
        takes seconds on large binaries); other classes go through pyelftools.
        """
        if self.elf.elfclass == 64 and self.elf.little_endian:
            raw = np.frombuffer(tab.data(), dtype=_SYM64)
            strtab = sections[tab["sh_link"]].data()
            typ = raw["info"] & 0xF
            shndx = raw["shndx"].astype(np.int64)
            valid = (shndx > 0) & (shndx < len(sections)) & (raw["name"] > 0)
            fl = sec_flags[np.where(valid, shndx, len(sections))]
            is_func = valid & ((typ == STT_FUNC) | (typ == STT_GNU_IFUNC)) & (raw["value"] > 0)
            is_obj = (valid & (typ == STT_OBJECT) & (raw["size"] > 0) & ((fl & SHF_ALLOC) > 0)
                      & ((fl & (SHF_EXECINSTR | SHF_TLS)) == 0))
            for i in np.flatnonzero(is_func | is_obj).tolist():
                off = int(raw["name"][i])
                end = strtab.find(b"\0", off)
                name = strtab[off : end if end >= 0 else len(strtab)].decode("utf-8", "replace")
                yield name, int(typ[i]), int(shndx[i]), int(raw["value"][i]), int(raw["size"][i])
            return
        types = {"STT_FUNC": STT_FUNC, "STT_GNU_IFUNC": STT_GNU_IFUNC, "STT_LOOS": STT_GNU_IFUNC,
                 "STT_OBJECT": STT_OBJECT}
        for sym in tab.iter_symbols():
            t = types.get(sym["st_info"]["type"])
            shndx = sym["st_shndx"]
            if t is None or not isinstance(shndx, int) or not sym.name or shndx >= len(sections):
                continue
            fl = int(sec_flags[shndx])
            if t == STT_OBJECT and (sym["st_size"] <= 0 or not fl & SHF_ALLOC or fl & (SHF_EXECINSTR | SHF_TLS)):
                continue
            if t != STT_OBJECT and not sym["st_value"]:
                continue
            yield sym.name, t, shndx, sym["st_value"], sym["st_size"]

    # -- addresses --------------------------------------------------------------------
    def vaddr_of_offset(self, off: int) -> int | None:
        """Link-time address of a file offset inside a loadable segment."""
        for p_off, p_vaddr, filesz, _ in self.loads:
            if p_off <= off < p_off + max(filesz, 1):
                return off - p_off + p_vaddr
        return None

    def load_bias(self, start: int, pgoff: int) -> int | None:
        """Bias of a mapping (start, pgoff): runtime address − link-time address."""
        for p_off, p_vaddr, _, _ in self.loads:
            if (p_off & PAGE_MASK) == pgoff:
                return start - (p_vaddr & PAGE_MASK)
        return None

    def section_at(self, vaddr: int) -> tuple[str, bool] | None:
        """(name, writable) of the loaded section holding link-time address vaddr, or None."""
        i = int(np.searchsorted(self._sec_addr, np.uint64(vaddr), side="right")) - 1
        if i < 0 or vaddr >= self._sec_info[i][0]:
            return None
        return self._sec_info[i][1], self._sec_info[i][2]

    def function_at(self, vaddr: int) -> str | None:
        i = int(np.searchsorted(self.func_addr, np.uint64(vaddr), side="right")) - 1
        if i < 0:
            return None
        name, size = self.func_info[i]
        base = int(self.func_addr[i])
        if size and vaddr >= base + size:
            return None
        return demangle(name)

    # -- DWARF ------------------------------------------------------------------------
    def dwarf(self):
        """The file's DWARFInfo, read once (pyelftools reads its sections again, with
        their relocations, on every get_dwarf_info())."""
        if self._dwarf is None:
            self._dwarf = self.elf.get_dwarf_info()
        return self._dwarf

    def _build_lines(self):
        addrs, files, lines, cols, ends, discs = [], [], [], [], [], []
        names: list[str] = []
        index: dict[str, int] = {}
        if self.elf.has_dwarf_info():
            try:
                dw = self.dwarf()
                for cu in dw.iter_CUs():
                    lp = dw.line_program_for_CU(cu)
                    if lp is None:
                        continue
                    top = cu.get_top_DIE()
                    comp_dir = _attr_str(top, "DW_AT_comp_dir")
                    hdr = lp.header
                    v5 = hdr["version"] >= 5
                    incdirs = [_s(d) for d in hdr["include_directory"]]
                    fentries = hdr["file_entry"]
                    local: dict[int, int] = {}
                    for e in lp.get_entries():
                        st = e.state
                        if st is None:
                            continue
                        fi = st.file
                        g = local.get(fi)
                        if g is None:
                            path = _file_path(fentries, incdirs, fi, v5, comp_dir)
                            g = index.setdefault(path, len(names))
                            if g == len(names):
                                names.append(path)
                            local[fi] = g
                        addrs.append(st.address)
                        files.append(g)
                        lines.append(st.line)
                        cols.append(st.column)
                        ends.append(st.end_sequence)
                        discs.append(st.discriminator)
            except DAMAGED:
                pass  # damaged DWARF: keep what was read
        a = np.array(addrs, dtype=np.uint64)
        order = np.argsort(a, kind="stable")
        ends_arr = np.array(ends, dtype=bool)[order]
        self._lines = (a[order], np.array(files, dtype=np.int32)[order], np.array(lines, dtype=np.int32)[order],
                       np.array(cols, dtype=np.int32)[order], ends_arr, names)
        self._discriminators = np.array(discs, dtype=np.int64)[order]

    def common_blocks(self) -> dict[str, list[tuple[str, int]]]:
        """Fortran COMMON blocks from DWARF: {linkage name: [(member, link-time address)]}.

        A COMMON block is one ELF symbol holding several arrays; its members are reported
        as objects of their own.  Only Fortran compile units are walked.
        """
        if self._common is not None:
            return self._common
        out: dict[str, list[tuple[str, int]]] = {}
        if self.elf.has_dwarf_info():
            try:
                dw = self.dwarf()
                for cu in dw.iter_CUs():
                    top = cu.get_top_DIE()
                    lang = top.attributes.get("DW_AT_language")
                    if lang is None or lang.value not in _FORTRAN_LANGS:
                        continue
                    for die in cu.iter_DIEs():
                        if die.tag != "DW_TAG_common_block":
                            continue
                        block = _attr_str(die, "DW_AT_linkage_name") or _attr_str(die, "DW_AT_name")
                        members = []
                        for ch in die.iter_children():
                            loc = ch.attributes.get("DW_AT_location")
                            name = _attr_str(ch, "DW_AT_name")
                            v = loc.value if loc is not None else None
                            if name and isinstance(v, list) and len(v) == 9 and v[0] == 0x03:  # DW_OP_addr
                                members.append((name, int.from_bytes(bytes(v[1:9]), "little")))
                        if block and len(members) >= 2:
                            out.setdefault(block, sorted(members, key=lambda m: m[1]))
            except DAMAGED:
                pass
        self._common = out
        return out

    def _class_scope(self, die) -> ClassScope | None:
        """The class of a function DIE (through DW_AT_abstract_origin and
        DW_AT_specification to the declaration inside the class, and from an OpenMP
        outlined region to the function it was outlined from), None for a function that
        is no member of one."""
        d = die
        for _ in range(8):
            parent = d.get_parent()
            if parent is not None and parent.tag in _CLASS_TAGS:
                return self._class_members(parent)
            a = d.attributes
            nxt = next((k for k in ("DW_AT_abstract_origin", "DW_AT_specification") if k in a), None)
            if nxt is not None:
                d = d.get_DIE_from_attribute(nxt)
            elif parent is not None and parent.tag == "DW_TAG_subprogram":
                d = parent  # an outlined region (gcc nests `f._omp_fn.0` in f): f's class
            else:
                return None
        return None

    def _class_members(self, cls) -> ClassScope:
        got = self._classes.get(cls.offset)
        if got is None:
            members: set[str] = set()
            todo, seen = [cls], set()
            while todo and len(seen) < 64:  # bases, transitively (a bounded walk)
                c = todo.pop()
                if c.offset in seen:
                    continue
                seen.add(c.offset)
                for ch in c.iter_children():
                    if ch.tag in ("DW_TAG_member", "DW_TAG_variable"):
                        members.add(_attr_str(ch, "DW_AT_name"))
                    elif ch.tag == "DW_TAG_inheritance" and "DW_AT_type" in ch.attributes:
                        todo.append(ch.get_DIE_from_attribute("DW_AT_type"))
            members.discard("")
            got = self._classes[cls.offset] = ClassScope(_qualified(cls), frozenset(members))
        return got

    def _row_at(self, vaddr: int) -> int | None:
        """Index of the line-table row covering a link-time code address."""
        if self._lines is None:
            self._build_lines()
        a, _, ln, _, end, _ = self._lines
        if len(a) == 0:
            return None
        i = int(np.searchsorted(a, np.uint64(vaddr), side="right")) - 1
        # Several rows may share an address; the last one that is not an end marker wins.
        while i >= 0 and end[i] and a[i] == vaddr:
            i -= 1
        if i < 0 or end[i] or ln[i] == 0:
            return None
        return i

    def line_at(self, vaddr: int) -> tuple[str, int, int] | None:
        """(file, line, column) of a link-time code address, from the DWARF line table."""
        i = self._row_at(vaddr)
        if i is None:
            return None
        _, f, ln, col, _, names = self._lines
        return names[f[i]], int(ln[i]), int(col[i])

    def call_rank(self, ret: int, statement: bool = True) -> tuple[int, int] | None:
        """(n, count): the call returning to link-time address ``ret`` is the n-th (from 0)
        of the ``count`` calls to the same function that its source statement (file, line
        and column of the call) makes, in source order; not ``statement``: of the calls
        its function body makes, in code order.

        One Fortran ``allocate(u(n), v(n), w(n))`` calls malloc three times from one line
        and column; the line table tells the calls apart only by their discriminators,
        which GCC numbers in the order it lowers the statement's parts (DWARF 5 §6.2.2),
        i.e. source order.  The calls are the function's DWARF call sites
        (DW_TAG_call_site, emitted with optimisation), or else, on x86-64, the direct
        calls to the same target found in the function's code.  None when unknown."""
        row = self._row_at(ret - 1)
        if row is None:
            return None
        _, f, ln, col, _, _ = self._lines
        # the same statement of the same function body: a subroutine inlined twice has
        # two copies of each statement, one per DW_TAG_inlined_subroutine
        key = (f[row], ln[row], col[row], self._body_of(ret - 1))
        same = []
        for r in self._calls_like(ret):
            i = self._row_at(r - 1)
            if i is not None and self._body_of(r - 1) == key[3] and (
                    not statement or (f[i], ln[i], col[i]) == key[:3]):
                same.append((int(self._discriminators[i]) if statement else r, r))
        rets = [r for _, r in sorted(same)]
        return (rets.index(ret), len(rets)) if ret in rets else None

    def _body_of(self, vaddr: int) -> int:
        """An identity of the function body holding ``vaddr``: its innermost DWARF code
        scope (subprogram or inlined instance), else its ELF function symbol."""
        chain, _ = self._scope_chain(vaddr)
        if chain:
            return chain[-1][5]
        return int(np.searchsorted(self.func_addr, np.uint64(vaddr), side="right")) - 1

    def _calls_like(self, ret: int) -> list[int]:
        """Return addresses of the calls to the function the call returning to ``ret``
        calls, in the function holding it."""
        sites = self._call_sites(ret)
        if sites:
            callee = sites.get(ret)
            return [r for r, c in sites.items() if c == callee] if callee is not None else []
        return self._direct_calls_like(ret)

    def callee_name(self, ret: int) -> str | None:
        """The name of the function the call returning to link-time address ``ret``
        calls, as its DWARF call site's origin declares it (its linkage name, else its
        name: `sqrtf`, not `__builtin_sqrtf`); None for an indirect call or without
        call-site information."""
        origin = self._call_sites(ret).get(ret)
        if origin is None:
            return None
        form, value = origin
        try:
            dw = self.dwarf()
            cu = _cu_at(dw, ret)
            if cu is None:
                return None
            local = form in ("DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4", "DW_FORM_ref8", "DW_FORM_ref_udata")
            die = dw.get_DIE_from_refaddr(value + cu.cu_offset if local else value, cu)
            for _ in range(4):
                a = die.attributes
                for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name", "DW_AT_name"):
                    if key in a:
                        v = a[key].value
                        return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                ref = next((k for k in ("DW_AT_specification", "DW_AT_abstract_origin") if k in a), None)
                if ref is None:
                    return None
                die = die.get_DIE_from_attribute(ref)
        except (ELFError, KeyError, IndexError, ValueError, AttributeError, TypeError):
            return None
        return None

    def _call_sites(self, vaddr: int) -> dict[int, tuple]:
        """{return address: callee} of the DWARF call sites of the compile unit holding
        ``vaddr`` (DW_TAG_call_site of DWARF 5, DW_TAG_GNU_call_site before); the callee
        is the referenced declaration, None for an indirect call."""
        if not self.elf.has_dwarf_info():
            return {}
        try:
            dw = self.dwarf()
            cu = _cu_at(dw, vaddr)
            if cu is None:
                return {}
            if cu.cu_offset not in self._sites:
                out = {}
                for die in cu.iter_DIEs():
                    if die.tag not in ("DW_TAG_call_site", "DW_TAG_GNU_call_site"):
                        continue
                    a = die.attributes
                    ret = a.get("DW_AT_call_return_pc") or a.get("DW_AT_low_pc")
                    origin = a.get("DW_AT_call_origin") or a.get("DW_AT_abstract_origin")
                    if ret is not None:
                        out[int(ret.value)] = (origin.form, origin.value) if origin is not None else None
                self._sites[cu.cu_offset] = out
            return self._sites[cu.cu_offset]
        except (ELFError, KeyError, IndexError, ValueError, AttributeError, TypeError):
            return {}

    def _direct_calls_like(self, ret: int) -> list[int]:
        """x86-64 without call-site information (unoptimised code): the return addresses
        of the calls in the function holding ``ret`` that have the encoding and target of
        the call before ``ret`` (``call rel32``, or ``call *disp32(%rip)`` with -fno-plt).
        A match inside another instruction's bytes would need the same 32-bit target and a
        line-table row of the same statement: the caller filters by statement."""
        if self.elf["e_machine"] != "EM_X86_64":
            return []
        i = int(np.searchsorted(self.func_addr, np.uint64(ret - 1), side="right")) - 1
        if i < 0:
            return []
        base, size = int(self.func_addr[i]), self.func_info[i][1]
        code = self._code(base, size) if 0 < size <= 1 << 20 and ret <= base + size else None
        if code is None:
            return []
        at = ret - base
        forms = ((b"\xe8", 5), (b"\xff\x15", 6))  # call rel32; call *disp32(%rip)
        for op, length in forms:
            if at >= length and code[at - length:at - 4] == op:
                target = at + int.from_bytes(code[at - 4:at], "little", signed=True)
                out = []
                start = code.find(op)
                while start >= 0:
                    end = start + length
                    if end <= len(code) and end + int.from_bytes(code[end - 4:end], "little", signed=True) == target:
                        out.append(base + end)
                    start = code.find(op, start + 1)
                return out
        return []

    def _code(self, vaddr: int, size: int) -> bytes | None:
        for p_off, p_vaddr, filesz, _ in self.loads:
            if p_vaddr <= vaddr and vaddr + size <= p_vaddr + filesz:
                self._f.seek(p_off + vaddr - p_vaddr)
                return self._f.read(size)
        return None

    def inline_positions(self, vaddr: int) -> list[SourceLine]:
        """Source positions of a link-time code address through the functions inlined
        there, innermost first: the line-table position (in the body of the innermost
        inlined function), then each inlined call's call site (DW_AT_call_file/line/column
        of DW_TAG_inlined_subroutine, in the body of its caller), out to the physical
        function.  Each carries the (demangled) name of the function whose body holds it.
        Empty without DWARF for that address."""
        li = self.line_at(vaddr)
        if li is None:
            return []
        chain, files = self._scope_chain(vaddr)
        if not chain:
            return [SourceLine(self.function_at(vaddr) or "?", *li)]
        out = [SourceLine(chain[-1][0], *li, scope=chain[-1][4])]
        for k in range(len(chain) - 1, 0, -1):
            _, call_file, call_line, call_col, _, _ = chain[k]
            if call_line <= 0 or not 0 <= call_file < len(files):
                break
            out.append(SourceLine(chain[k - 1][0], files[call_file], call_line, call_col, scope=chain[k - 1][4]))
        return out

    def _scope_chain(self, vaddr: int) -> tuple[list[tuple], list[str]]:
        """(name, call file index, call line, call column, class scope, DIE offset) of
        the subprogram holding ``vaddr`` and of the inlined subroutines nested in it
        around ``vaddr``, outermost first; and the file table the call file indexes."""
        if not self.elf.has_dwarf_info():
            return [], []
        try:
            dw = self.dwarf()
            cu = _cu_at(dw, vaddr)
            if cu is None:
                return [], []
            key = cu.cu_offset
            if key not in self._scopes:
                self._scopes[key] = _code_scopes(dw, cu)
                self._cu_files[key] = _cu_files(dw, cu)
            lo, hi, depth, dies = self._scopes[key]
            files = self._cu_files[key]
            hit = np.flatnonzero((lo <= vaddr) & (vaddr < hi))
            chain = []
            for i in sorted(hit.tolist(), key=lambda i: depth[i]):
                die = dies[i]
                a = die.attributes
                chain.append((_die_name(die),
                              int(a["DW_AT_call_file"].value) if "DW_AT_call_file" in a else -1,
                              int(a["DW_AT_call_line"].value) if "DW_AT_call_line" in a else 0,
                              int(a["DW_AT_call_column"].value) if "DW_AT_call_column" in a else 0,
                              self._class_scope(die), die.offset))
            return chain, files
        except DAMAGED:
            return [], []  # damaged DWARF: no inline information


# DW_LANG_Fortran77, 90, 95, 03, 08 (DWARF 5 §7.12)
_FORTRAN_LANGS = {0x07, 0x08, 0x0E, 0x22, 0x23, 0x2A}
_CODE_SCOPES = {"DW_TAG_subprogram", "DW_TAG_inlined_subroutine"}


def _cu_at(dw, vaddr: int):
    """The compile unit whose code holds ``vaddr`` (.debug_aranges, else each CU's ranges)."""
    aranges = dw.get_aranges()
    if aranges is not None:
        try:
            return dw.get_CU_at(aranges.cu_offset_at_addr(vaddr))
        except (KeyError, ValueError, IndexError):
            pass
    for cu in dw.iter_CUs():
        top = cu.get_top_DIE()
        if any(lo <= vaddr < hi for lo, hi in _die_ranges(dw, top)):
            return cu
    return None


def _die_ranges(dw, die) -> list[tuple[int, int]]:
    a = die.attributes
    if "DW_AT_low_pc" in a and "DW_AT_high_pc" in a:
        lo = a["DW_AT_low_pc"].value
        hi = a["DW_AT_high_pc"]
        # DWARF 4+: a constant high_pc is a length (DWARF 5 §2.17.2)
        end = lo + hi.value if hi.form.startswith("DW_FORM_data") or hi.form == "DW_FORM_udata" else hi.value
        return [(lo, end)]
    if "DW_AT_ranges" in a:
        rl = dw.range_lists()
        if rl is None:
            return []
        top = die.cu.get_top_DIE()
        base = top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes else 0
        out = []
        for e in rl.get_range_list_at_offset(a["DW_AT_ranges"].value, cu=die.cu):
            if hasattr(e, "base_address"):
                base = e.base_address
            elif e.is_absolute:
                out.append((e.begin_offset, e.end_offset))
            else:
                out.append((base + e.begin_offset, base + e.end_offset))
        return out
    return []


def _code_scopes(dw, cu):
    """Every subprogram and inlined subroutine of a CU with code (lexical blocks walked
    through), as
    parallel arrays (low, high, nesting depth) and the DIEs (one row per range)."""
    lo, hi, depth, dies = [], [], [], []
    todo = [(cu.get_top_DIE(), 0)]
    while todo:
        die, d = todo.pop()
        for ch in die.iter_children():
            if ch.tag == "DW_TAG_lexical_block":
                todo.append((ch, d))  # a block is no function: only what it holds counts
            elif ch.tag in _CODE_SCOPES:
                rs = _die_ranges(dw, ch)
                if not rs:
                    # a declaration or an abstract instance: no code of its own, but GCC
                    # nests an OpenMP region's outlined function (`f._omp_fn.0`) in f's
                    if ch.tag == "DW_TAG_subprogram" and ch.has_children:
                        todo.append((ch, d))
                    continue
                for a, b in rs:
                    lo.append(a)
                    hi.append(b)
                    depth.append(d + 1)
                    dies.append(ch)
                todo.append((ch, d + 1))
            elif ch.has_children and ch.tag in ("DW_TAG_namespace", "DW_TAG_class_type",
                                                "DW_TAG_structure_type", "DW_TAG_union_type",
                                                "DW_TAG_module"):
                todo.append((ch, d))
    return (np.array(lo, dtype=np.uint64), np.array(hi, dtype=np.uint64), depth, dies)


def _cu_files(dw, cu) -> list[str]:
    """File table of a CU's line program, indexed as DW_AT_call_file / DW_AT_decl_file."""
    lp = dw.line_program_for_CU(cu)
    if lp is None:
        return []
    comp_dir = _attr_str(cu.get_top_DIE(), "DW_AT_comp_dir")
    hdr = lp.header
    v5 = hdr["version"] >= 5
    incdirs = [_s(d) for d in hdr["include_directory"]]
    n = len(hdr["file_entry"])
    # DWARF 5 numbers files from 0, earlier versions from 1 (index 0 unused)
    return [_file_path(hdr["file_entry"], incdirs, i, v5, comp_dir) for i in range(n + (0 if v5 else 1))]


def _die_name(die) -> str:
    """Qualified, demangled name of a (possibly inlined or out-of-line) function DIE:
    through DW_AT_abstract_origin / DW_AT_specification to its linkage name, else its
    DW_AT_name qualified by the enclosing namespaces and classes."""
    d = die
    for _ in range(8):
        a = d.attributes
        for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
            if key in a:
                return demangle(_s(a[key].value))
        nxt = next((k for k in ("DW_AT_abstract_origin", "DW_AT_specification") if k in a), None)
        if nxt is None:
            break
        d = d.get_DIE_from_attribute(nxt)
    name = _attr_str(d, "DW_AT_name")
    if name.startswith("_Z"):
        # a function the compiler made and named after its mangled parent: gcc's OpenMP
        # outlined regions, `PowerMethod::assemble(unsigned long, int) [clone ._omp_fn.0]`
        return demangle(name)
    return _qualified(d)


_CLASS_TAGS = ("DW_TAG_class_type", "DW_TAG_structure_type", "DW_TAG_union_type")


def _qualified(d) -> str:
    """A DIE's DW_AT_name qualified by the enclosing namespaces, classes and modules."""
    parts = [_attr_str(d, "DW_AT_name") or "?"]
    p = d.get_parent()
    while p is not None and p.tag in ("DW_TAG_namespace", *_CLASS_TAGS, "DW_TAG_module"):
        parts.append(_attr_str(p, "DW_AT_name") or "(anonymous namespace)")
        p = p.get_parent()
    return "::".join(reversed(parts))


def _s(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _attr_str(die, name) -> str:
    a = die.attributes.get(name)
    return _s(a.value) if a is not None else ""


def _file_path(fentries, incdirs, fi, v5, comp_dir) -> str:
    idx = fi if v5 else fi - 1
    if not 0 <= idx < len(fentries):
        return "?"
    fe = fentries[idx]
    name = _s(fe.name)
    d = fe.dir_index
    if v5:
        directory = incdirs[d] if 0 <= d < len(incdirs) else comp_dir
    else:
        directory = comp_dir if d == 0 else (incdirs[d - 1] if d - 1 < len(incdirs) else "")
    if not os.path.isabs(directory) and comp_dir:
        directory = os.path.join(comp_dir, directory)
    return os.path.normpath(os.path.join(directory, name))


def _debug_file(elf, path: str) -> str | None:
    """The separate debug file of a stripped ELF file (:mod:`debuginfo`), or None."""
    try:
        note = elf.get_section_by_name(".note.gnu.build-id")
        bid = next((n["n_desc"] for n in note.iter_notes() if n["n_type"] == "NT_GNU_BUILD_ID"),
                   None) if note is not None else None
        link = elf.get_section_by_name(".gnu_debuglink")
        name = link.data().split(b"\0", 1)[0].decode("utf-8", "replace") if link is not None else None
    except DAMAGED:
        return None
    return debuginfo.find(bid if isinstance(bid, str) else None, name, path)


def elf_info(path: str, archive: Archive = EMPTY) -> ElfInfo | None:
    """The parsed ELF file at ``path`` (its copy in ``archive``, the profile's, when there
    is one), or None when absent, not a regular file or not ELF."""
    if ELFFile is None or not path.startswith("/"):
        return None
    copy = archive.binary(path)
    try:
        st = os.lstat(copy) if copy is not None else os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None  # a device, FIFO or directory named in the mappings: no symbols
    # keyed by identity too, so a rebuilt binary at the same path is read again
    return _elf_info(copy or path, copy is not None, st.st_mtime_ns, st.st_size, st.st_ino)


@lru_cache(maxsize=256)
def _elf_info(path: str, archived: bool, _mtime: int, _size: int, _ino: int) -> ElfInfo | None:
    try:
        fd, _ = profile_io.open_regular(path, follow=not archived)
    except (OSError, ProfileError):
        return None
    f = os.fdopen(fd, "rb")
    try:
        if f.read(4) != b"\x7fELF":
            f.close()
            return None
        return ElfInfo(path, f)
    except DAMAGED:
        f.close()
        return None


class Mappings:
    """File-backed mappings of each process, to turn runtime code addresses into ELF ones."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.by_pid: dict[int, tuple[np.ndarray, list]] = {}
        pid = np.asarray(table["pid"]).astype(np.int64)
        start = np.asarray(table["start"]).astype(np.uint64)
        length = np.asarray(table["len"]).astype(np.uint64)
        pgoff = np.asarray(table["pgoff"]).astype(np.uint64)
        paths = list(table["path"])
        for p in np.unique(pid).tolist():
            idx = np.flatnonzero(pid == p)
            idx = idx[np.argsort(start[idx], kind="stable")]
            rows = [(int(start[i]), int(length[i]), int(pgoff[i]), paths[i]) for i in idx]
            self.by_pid[p] = (start[idx], rows)

    def find(self, pid: int, addr: int):
        """(start, len, pgoff, path) of the mapping containing addr, or None."""
        if not 0 <= addr < 1 << 64:
            return None  # a return address of 0 looked up as 0 - 1: no call there
        entry = self.by_pid.get(pid)
        if entry is None:
            # a single-process profile may record mappings under the parent's pid only
            if len(self.by_pid) != 1:
                return None
            entry = next(iter(self.by_pid.values()))
        starts, rows = entry
        i = int(np.searchsorted(starts, np.uint64(addr), side="right")) - 1
        # mappings recorded over time may overlap (a region remapped): look a few back
        for j in range(i, max(i - 16, -1), -1):
            s, ln, _, _ = rows[j]
            if s <= addr < s + ln:
                return rows[j]
        return None

    def files(self, pid: int | None = None):
        """Distinct (pid, path) of file-backed mappings."""
        for p, (_, rows) in self.by_pid.items():
            if pid is not None and p != pid:
                continue
            for r in rows:
                if r[3].startswith("/"):
                    yield p, r


class CodeResolver:
    """Runtime code address → function, file:line (cached)."""

    def __init__(self, mappings: Mappings, archive: Archive = EMPTY):
        self.mappings = mappings
        self.archive = archive
        self._cache: dict[tuple[int, int], SourceLine | None] = {}

    def elf_address(self, pid: int, ip: int) -> tuple[ElfInfo, int] | None:
        m = self.mappings.find(pid, ip)
        if m is None:
            return None
        start, _, pgoff, path = m
        info = elf_info(path, self.archive)
        if info is None:
            return None
        vaddr = info.vaddr_of_offset(ip - start + pgoff)
        return None if vaddr is None else (info, vaddr)

    def resolve(self, pid: int, ip: int, return_address: bool = False) -> SourceLine | None:
        """Source line of ``ip``; for a return address look up ``ip − 1`` (the call)."""
        key = (pid, ip * 2 + return_address)
        if key in self._cache:
            return self._cache[key]
        out = None
        found = self.elf_address(pid, ip - 1 if return_address else ip)
        if found is not None:
            info, vaddr = found
            func = info.function_at(vaddr) or "?"
            li = info.line_at(vaddr)
            if li is not None:
                out = SourceLine(func, li[0], li[1], li[2])
                if is_system_source(li[0]):
                    # code inlined from a library header (std::vector's allocate): the
                    # user's line is the call site the inlining came from
                    out = next((p for p in info.inline_positions(vaddr) if not is_system_source(p.file)), out)
            else:
                # no line table (a system library): the function and the file still help,
                # the file as the process mapped it (info.path may be the profile's copy)
                m = self.mappings.find(pid, ip - 1 if return_address else ip)
                out = SourceLine(func, m[3] if m is not None else info.path, 0)
        self._cache[key] = out
        return out

    def allocation_site(self, pid: int, ips: list[int]) -> SourceLine | None:
        """The user's frame of an allocation call stack (return addresses, innermost
        first): the first frame with a source line outside the system headers, named
        after the function whose body holds that line (an inlined constructor is
        ``Matrix::Matrix(unsigned long)``, not the ``main`` it was inlined into).
        Frames of system libraries (libc, libstdc++'s ``operator new``, ld.so) and code
        of system headers only (an out-of-line ``std::vector`` method) are skipped.
        Without any line information, the innermost frame outside the system libraries
        (``main@app`` of a binary built without -g), else the innermost resolvable one."""
        for sl in self.user_frames(pid, ips):
            return sl
        fallback = None
        user_fallback = None
        for ip in ips:
            sl = self.resolve(pid, ip, return_address=True)
            if sl is None or sl.function == "?":
                continue
            if fallback is None:
                fallback = sl
            if user_fallback is None and sl.line <= 0 and not is_system_library(sl.file):
                user_fallback = sl
        return user_fallback or fallback

    def user_frames(self, pid: int, ips: list[int]):
        """The frames of a call stack (innermost first) with a source line outside the
        system headers, each named after the function whose body holds the line: the
        allocation site, then its callers (for allocation wrappers).  A function inlined
        into its caller is a frame too: after the line in its body come the call sites it
        was inlined at (a wrapper `return calloc(...)` inlined into `u = make_grid(n)`)."""
        for ip in ips:
            sl = self.resolve(pid, ip, return_address=True)
            if sl is None or sl.line <= 0 or is_system_source(sl.file):
                continue
            found = self.elf_address(pid, ip - 1)
            chain = found[0].inline_positions(found[1]) if found is not None else []
            at = next((k for k, p in enumerate(chain)
                       if (p.file, p.line, p.column) == (sl.file, sl.line, sl.column)), None)
            frame = sl if at is None or chain[at].function == "?" else chain[at]
            if not at and found is not None and source_language(sl.file) == "fortran":
                # the call is the statement's own (not inlined library code): which of
                # its allocations it makes (one `allocate` names several arrays)
                frame = replace(frame, call=found[0].call_rank(found[1] + 1),
                                body_call=found[0].call_rank(found[1] + 1, statement=False))
            yield frame
            if at is None:
                continue
            for p in chain[at + 1:]:
                if p.line > 0 and not is_system_source(p.file):
                    yield p


def source_language(path: str) -> str:
    """``c``, ``cpp`` or ``fortran``: the grammar a source file is parsed with, by its
    extension (``.C`` and ``.H``, capitalised, are C++ as GCC takes them); C otherwise."""
    return sourcelang.source_language(path) or "c"
