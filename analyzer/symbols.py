"""Code and data symbols: ELF symbol tables, DWARF line tables, source-line naming.

Everything here is cached per ELF file, because a profile names the same few binaries
thousands of times.  A missing or stripped binary is not an error: lookups return None
and the caller falls back to a weaker name (``heap@0x...``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

try:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection
except ImportError:  # pragma: no cover - pyelftools is a hard dependency
    ELFFile = None
    ELFError = Exception

SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_TLS = 0x1, 0x2, 0x4, 0x400
STT_OBJECT, STT_FUNC, STT_GNU_IFUNC = 1, 2, 10
_SYM64 = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"),
                   ("value", "<u8"), ("size", "<u8")])
PAGE_MASK = ~0xFFF


@dataclass(frozen=True)
class SourceLine:
    function: str
    file: str  # full path as DWARF names it
    line: int
    column: int = 0

    @property
    def site(self) -> str:
        """``function@file.c:line`` with the file's basename (``function@lib.so`` without
        line information)."""
        if self.line <= 0:
            return f"{self.function}@{os.path.basename(self.file)}"
        return f"{self.function}@{os.path.basename(self.file)}:{self.line}"


@dataclass(frozen=True)
class StaticSymbol:
    name: str
    address: int  # link-time address
    size: int
    section: str
    writable: bool


class ElfInfo:
    """One ELF file: loadable segments, symbols, and (lazily) its DWARF line table."""

    def __init__(self, path: str):
        self.path = path
        self._f = open(path, "rb")  # noqa: SIM115 - kept open for lazy DWARF reads
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
        for tabname in (".symtab", ".dynsym"):
            tab = self.elf.get_section_by_name(tabname)
            if not isinstance(tab, SymbolTableSection):
                continue
            seen = {o.address for o in self.objects}
            for name, typ, shndx, value, size in self._symbols(tab, sections, sec_flags):
                if typ in (STT_FUNC, STT_GNU_IFUNC):
                    funcs.setdefault(value, (name, size))
                elif value not in seen:
                    fl = int(sec_flags[shndx])
                    self.objects.append(StaticSymbol(name, value, size, sections[shndx].name, bool(fl & SHF_WRITE)))
                    seen.add(value)
        order = sorted(funcs)
        self.func_addr = np.array(order, dtype=np.uint64)
        self.func_info = [funcs[a] for a in order]
        self._lines = None
        self._common: dict[str, list[tuple[str, int]]] | None = None

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

    def function_at(self, vaddr: int) -> str | None:
        i = int(np.searchsorted(self.func_addr, np.uint64(vaddr), side="right")) - 1
        if i < 0:
            return None
        name, size = self.func_info[i]
        base = int(self.func_addr[i])
        if size and vaddr >= base + size:
            return None
        return name

    # -- DWARF ------------------------------------------------------------------------
    def _build_lines(self):
        addrs, files, lines, cols, ends = [], [], [], [], []
        names: list[str] = []
        index: dict[str, int] = {}
        if self.elf.has_dwarf_info():
            try:
                dw = self.elf.get_dwarf_info()
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
            except (ELFError, KeyError, IndexError, ValueError, AttributeError):
                pass  # damaged DWARF: keep what was read
        a = np.array(addrs, dtype=np.uint64)
        order = np.argsort(a, kind="stable")
        ends_arr = np.array(ends, dtype=bool)[order]
        self._lines = (a[order], np.array(files, dtype=np.int32)[order], np.array(lines, dtype=np.int32)[order],
                       np.array(cols, dtype=np.int32)[order], ends_arr, names)

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
                dw = self.elf.get_dwarf_info()
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
            except (ELFError, KeyError, IndexError, ValueError, AttributeError):
                pass
        self._common = out
        return out

    def line_at(self, vaddr: int) -> tuple[str, int, int] | None:
        """(file, line, column) of a link-time code address, from the DWARF line table."""
        if self._lines is None:
            self._build_lines()
        a, f, ln, col, end, names = self._lines
        if len(a) == 0:
            return None
        i = int(np.searchsorted(a, np.uint64(vaddr), side="right")) - 1
        # Several rows may share an address; the last one that is not an end marker wins.
        while i >= 0 and end[i] and a[i] == vaddr:
            i -= 1
        if i < 0 or end[i] or ln[i] == 0:
            return None
        return names[f[i]], int(ln[i]), int(col[i])


# DW_LANG_Fortran77, 90, 95, 03, 08 (DWARF 5 §7.12)
_FORTRAN_LANGS = {0x07, 0x08, 0x0E, 0x22, 0x23, 0x2A}


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


_ARCHIVE: dict[str, str] = {}


def use_archive(profile_dir) -> None:
    """Reads the profile's archive (archive.json): copies of the user's executables and
    sources taken at record time, used instead of the files on disk, which may have been
    rebuilt or patched since (as perf's build-id cache does for perf report)."""
    _ARCHIVE.clear()
    index = Path(profile_dir) / "archive.json"
    try:
        doc = json.loads(index.read_text())
    except (OSError, ValueError):
        return
    base = Path(profile_dir) / "archive"
    for group in ("binaries", "sources"):
        for original, digest in (doc.get(group) or {}).items():
            copy = base / str(digest)
            if copy.is_file():
                _ARCHIVE[str(original)] = str(copy)


def elf_info(path: str) -> ElfInfo | None:
    """The parsed ELF file at ``path`` (its archived copy when the profile has one), or None
    when absent or not ELF."""
    if ELFFile is None or not path.startswith("/"):
        return None
    path = _ARCHIVE.get(path, path)
    try:
        st = os.stat(path)
    except OSError:
        return None
    # keyed by identity too, so a rebuilt binary at the same path is read again
    return _elf_info(path, st.st_mtime_ns, st.st_size, st.st_ino)


@lru_cache(maxsize=256)
def _elf_info(path: str, _mtime: int, _size: int, _ino: int) -> ElfInfo | None:
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
        return ElfInfo(path)
    except (OSError, ELFError, ValueError):
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

    def __init__(self, mappings: Mappings):
        self.mappings = mappings
        self._cache: dict[tuple[int, int], SourceLine | None] = {}

    def elf_address(self, pid: int, ip: int) -> tuple[ElfInfo, int] | None:
        m = self.mappings.find(pid, ip)
        if m is None:
            return None
        start, _, pgoff, path = m
        info = elf_info(path)
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
            else:
                # no line table (a system library): the function and the file still help
                out = SourceLine(func, info.path, 0)
        self._cache[key] = out
        return out


# ------------------------------------------------------------------- naming from source

_PARSERS: dict[str, object] = {}


def _parser(lang: str):
    if lang not in _PARSERS:
        try:
            from tree_sitter import Language, Parser

            if lang == "c":
                import tree_sitter_c as mod
            else:
                import tree_sitter_fortran as mod
            _PARSERS[lang] = Parser(Language(mod.language()))
        except Exception:  # noqa: BLE001 - a missing grammar only disables naming
            _PARSERS[lang] = None
    return _PARSERS[lang]


_FORTRAN_EXT = {".f", ".for", ".f90", ".f95", ".f03", ".f08", ".ftn"}


def find_source(path: str, roots: list[str]) -> Path | None:
    """The source file DWARF names (its archived copy when the profile has one), or the same
    name under one of ``roots``."""
    if os.path.normpath(path) in _ARCHIVE:
        return Path(_ARCHIVE[os.path.normpath(path)])
    p = Path(path)
    if p.is_file():
        return p
    for r in roots:
        for cand in (Path(r) / path.lstrip("/"), Path(r) / p.name):
            if cand.is_file():
                return cand
    return None


@lru_cache(maxsize=128)
def _parse_file(path: str, lang: str):
    parser = _parser(lang)
    if parser is None:
        return None
    try:
        src = Path(path).read_bytes()
    except OSError:
        return None
    return parser.parse(src), src


def assigned_name(path: str, line: int, column: int = 0) -> str | None:
    """The variable an allocation on ``path:line`` is assigned to, if the source says so.

    C: ``double *field = malloc(...)`` → ``field``; ``a = (double *)calloc(...)`` →
    ``a``; ``s->buf = malloc(...)`` → ``s->buf``.  Fortran: ``allocate(x(n))`` → ``x``.
    ``column`` (1-based, from DWARF) picks among several calls on the line.
    """
    lang = "fortran" if Path(path).suffix.lower() in _FORTRAN_EXT else "c"
    parsed = _parse_file(path, lang)
    if parsed is None or line <= 0:
        return None
    tree, src = parsed
    row = line - 1
    calls = []
    want = ("call_expression",) if lang == "c" else ("sized_allocation", "allocate_statement")
    _collect(tree.root_node, row, want, calls)
    if not calls:
        return None
    call = calls[0]
    if column > 0:
        for c in calls:
            if c.start_point[0] == row and c.start_point[1] <= column - 1 < c.end_point[1]:
                call = c
    if lang == "fortran":
        node = call
        if node.type == "allocate_statement":
            alloc = next((ch for ch in node.named_children if ch.type == "sized_allocation"), None)
            node = alloc if alloc is not None else node
        ident = next((ch for ch in node.named_children if ch.type in ("identifier", "derived_type_member_expression")), None)
        return _text(ident, src) if ident is not None else None
    return _c_target(call, src)


def _collect(node, row, types, out):
    if node.start_point[0] > row or node.end_point[0] < row:
        return
    if node.type in types and node.start_point[0] <= row <= node.end_point[0]:
        out.append(node)
    for ch in node.children:
        _collect(ch, row, types, out)


def _text(node, src: bytes) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _c_target(call, src: bytes) -> str | None:
    node = call
    while node.parent is not None:
        parent = node.parent
        t = parent.type
        if t in ("cast_expression", "parenthesized_expression", "conditional_expression"):
            node = parent
            continue
        if t == "init_declarator" and parent.child_by_field_name("value") == node:
            d = parent.child_by_field_name("declarator")
            while d is not None and d.type in ("pointer_declarator", "array_declarator",
                                               "parenthesized_declarator", "attributed_declarator"):
                d = d.child_by_field_name("declarator") or (d.named_children[0] if d.named_children else None)
            return _text(d, src) if d is not None and d.type == "identifier" else None
        if t == "assignment_expression" and parent.child_by_field_name("right") == node:
            left = parent.child_by_field_name("left")
            return " ".join(_text(left, src).split()) if left is not None else None
        return None
    return None
