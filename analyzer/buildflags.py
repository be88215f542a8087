"""How the recorded program was compiled, from the DWARF of its binaries.

Every compile unit's DW_AT_producer names the compiler and its version, and records the
command-line options: gcc does so by default (``-grecord-gcc-switches``: "GNU C11
12.2.0 -mtune=generic -march=x86-64 -g -O2 -std=c11 -fopenmp"; preprocessor options such
as -I and -D are left out), clang with ``-grecord-command-line`` (the whole driver
command after "clang version X.Y.Z").  `suggest` compiles every patched translation unit
with these flags before it offers the patch (recommender/patch/compile.py); the include
directories the unit's line table names stand in for the -I options gcc does not record.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from numaprof.errors import ProfileError
from numaprof.syspaths import is_system_path

#: DW_AT_language codes (DWARF 5, section 7.12) -> the language a compiler is asked for.
DWARF_LANGUAGES = {
    0x01: "c", 0x02: "c", 0x0C: "c", 0x1D: "c", 0x2C: "c",  # C89, C, C99, C11, C17
    0x04: "c++", 0x19: "c++", 0x1A: "c++", 0x21: "c++", 0x2B: "c++",  # C++, 03, 11, 14, 20
    0x07: "fortran", 0x08: "fortran", 0x0E: "fortran", 0x22: "fortran", 0x23: "fortran",
}

#: The -std gcc takes by default for the standard its producer names ("GNU C11").
_GNU_STD = {"C89": "gnu89", "C90": "gnu90", "C99": "gnu99", "C11": "gnu11", "C17": "gnu17",
            "C18": "gnu18", "C2X": "gnu2x", "C23": "gnu23", "C++98": "gnu++98",
            "C++03": "gnu++03", "C++11": "gnu++11", "C++14": "gnu++14", "C++17": "gnu++17",
            "C++20": "gnu++20", "C++23": "gnu++23"}

#: Options with a separate argument that say where outputs go or which file is compiled.
_DROP_WITH_ARG = frozenset({"-o", "-MF", "-MT", "-MQ", "-main-file-name", "-dumpdir",
                            "-dumpbase", "-dumpbase-ext", "-aux-info"})
_DROP = re.compile(r"^(-c|-S|-E|-M|-MM|-MD|-MMD|-MP|-MG|-save-temps.*|-Werror(=.*)?|"
                   r"-pedantic-errors|-fdiagnostics-.*|-fdump-.*|-flto.*|-fprofile-use.*|"
                   r"-fauto-profile.*|-frandom-seed=.*|-fcompare-debug.*|-fcolor-diagnostics|"
                   r"-fno-color-diagnostics|-g.*|-fdebug-prefix-map=.*|-ffile-prefix-map=.*)$")
_SOURCE_SUFFIX = re.compile(r"\.(c|cc|cp|cpp|cxx|c\+\+|C|f|for|f90|f95|f03|f08|F|F90|o|a|so)$")


@dataclass(frozen=True)
class Producer:
    """A parsed DW_AT_producer: compiler family, language, version and flags."""

    family: str  # gcc | clang | unknown
    language: str  # c | c++ | fortran | "" (not said)
    version: str  # "12.2.0", "" when not said
    flags: tuple[str, ...]  # the recorded options that matter to a compile
    text: str  # the attribute as recorded

    @property
    def major(self) -> str:
        return self.version.split(".", 1)[0] if self.version else ""

    @property
    def label(self) -> str:
        """``gcc 12.2.0``, ``clang 16.0.6``."""
        name = {"gcc": {"c++": "g++", "fortran": "gfortran"}.get(self.language, "gcc"),
                "clang": "clang++" if self.language == "c++" else "clang"}.get(self.family,
                                                                              "compiler")
        return f"{name} {self.version}".strip()


def _compile_flags(words: list[str]) -> list[str]:
    """The options of a recorded command line that a syntax check needs: outputs,
    dependency files, the inputs, debug and diagnostic formatting are dropped."""
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w in _DROP_WITH_ARG:
            skip = True
            continue
        if _DROP.match(w) or (not w.startswith("-") and _SOURCE_SUFFIX.search(w)):
            continue
        out.append(w)
    return out


def parse_producer(text: str) -> Producer:
    """Split a DW_AT_producer into compiler, language, version and flags.

    gcc: ``GNU <language> <version> <flags>``, where the language is ``C11``, ``C++17``,
    ``Fortran2008``...; a -std is added for the standard it names when the flags do not
    say one (the default of that gcc version).  clang: ``[Vendor] clang version X.Y.Z
    [(...)] [<driver command line>]``, the command line only with
    ``-grecord-command-line``.
    """
    words = text.split()
    if len(words) >= 3 and words[0] == "GNU" and not words[1].startswith("-"):
        std, version = words[1], words[2]
        lang = "c++" if std.startswith("C++") else "fortran" if std.startswith("Fortran") \
            else "c" if std.startswith("C") else ""
        flags = _compile_flags(words[3:])
        if lang in ("c", "c++") and not any(f.startswith("-std=") for f in flags) and \
                std in _GNU_STD:
            flags.insert(0, f"-std={_GNU_STD[std]}")
        return Producer("gcc", lang, version, tuple(flags), text)
    m = re.search(r"clang version (\S+)", text)
    if m:
        rest = text[m.end():].lstrip()
        if rest.startswith("("):
            depth = 0
            for i, ch in enumerate(rest):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0:
                    rest = rest[i + 1:]
                    break
        try:
            cmd = shlex.split(rest)
        except ValueError:
            cmd = rest.split()
        if cmd and not cmd[0].startswith("-"):
            cmd = cmd[1:]  # the driver's own path
        # the language is the compile unit's DW_AT_language
        return Producer("clang", "", m.group(1), tuple(_compile_flags(cmd)), text)
    return Producer("unknown", "", "", (), text)


@dataclass(frozen=True)
class CompileUnit:
    """One translation unit of a recorded binary."""

    binary: str  # the binary as the program ran it
    source: str  # absolute path of its main source file, as it was compiled
    comp_dir: str
    producer: Producer
    language: str  # from DW_AT_language (c | c++ | fortran), else the producer's
    include_dirs: tuple[str, ...]  # non-system directories of its line table's files
    files: tuple[str, ...]  # every file of its line table (absolute)


def _s(value) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def compile_units(binary: str, readable: str | None = None) -> list[CompileUnit]:
    """The compile units of an ELF file (`readable`: a copy to read instead, such as the
    profile's archive of it).  Empty for a file without DWARF."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    units: list[CompileUnit] = []
    try:
        f = open(readable or binary, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return units
    with f:
        try:
            elf = ELFFile(f)
            if not elf.has_dwarf_info():
                return units
            dwarf = elf.get_dwarf_info()
            for cu in dwarf.iter_CUs():
                top = cu.get_top_DIE()
                attrs = top.attributes
                name = _s(attrs["DW_AT_name"].value) if "DW_AT_name" in attrs else ""
                comp_dir = _s(attrs["DW_AT_comp_dir"].value) if "DW_AT_comp_dir" in attrs \
                    else ""
                producer = parse_producer(_s(attrs["DW_AT_producer"].value)) \
                    if "DW_AT_producer" in attrs else parse_producer("")
                code = attrs["DW_AT_language"].value if "DW_AT_language" in attrs else None
                if not name:
                    continue
                source = os.path.normpath(os.path.join(comp_dir, name))
                files = _line_files(dwarf, cu)
                dirs = tuple(dict.fromkeys(
                    os.path.dirname(p) for p in files
                    if not is_system_path(p) and os.path.isfile(p)
                    and os.path.dirname(p) != os.path.dirname(source)))
                units.append(CompileUnit(binary, source, comp_dir, producer,
                                         DWARF_LANGUAGES.get(code, producer.language), dirs,
                                         tuple(files)))
        except (ELFError, ValueError, KeyError, IndexError, AttributeError):
            pass  # a damaged debug section: what was read so far
    return units


def _line_files(dwarf, cu) -> list[str]:
    from numaprof.analyzer.symbols import _cu_files  # the one reading of DWARF file tables

    return list(dict.fromkeys(p for p in _cu_files(dwarf, cu) if p != "?"))


def recorded_binaries(profile_dir: str | os.PathLike) -> list[tuple[str, str]]:
    """(path as run, path to read) of the user's binaries a profile names: the copies its
    archive kept at record time (archive.json), else the files themselves where they
    still exist.  System libraries are left out."""
    profile = Path(profile_dir)
    out: dict[str, str] = {}
    try:
        doc = json.loads((profile / "archive.json").read_text())
        for original, digest in (doc.get("binaries") or {}).items():
            copy = profile / "archive" / str(digest)
            if copy.is_file():
                out[str(original)] = str(copy)
    except (OSError, ValueError, AttributeError):
        pass
    if not out:
        try:
            from numaprof.analyzer.profile import read_table

            for p in dict.fromkeys(str(x) for x in read_table(profile, "mappings")["path"]):
                if p.startswith("/") and not is_system_path(p) and os.path.isfile(p) and \
                        p not in out:
                    with open(p, "rb") as f:
                        if f.read(4) == b"\x7fELF":
                            out[p] = p
        except (ProfileError, OSError, KeyError, ValueError):
            pass  # no mappings table: nothing is known
    return sorted(out.items())
