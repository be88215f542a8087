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

# A DW_AT_producer is profile content (an archived binary's DWARF): its options are
# passed to a compiler that `suggest` runs, so only options that shape how a translation
# unit compiles are kept — an allowlist, never a list of what to drop.  Nothing that names
# a program, a plugin, a response file or an output survives (gcc's -wrapper runs any
# command: docs/security.md).
#: Kept options with a separate argument (a directory to read headers or modules from).
_KEEP_WITH_ARG = frozenset({"-I", "-isystem", "-iquote", "-idirafter", "-D", "-U",
                            "-fintrinsic-modules-path", "-J"})
#: Dropped options with a separate argument: their argument goes too.
_DROP_WITH_ARG = frozenset({"-o", "-MF", "-MT", "-MQ", "-main-file-name", "-dumpdir",
                            "-dumpbase", "-dumpbase-ext", "-aux-info", "-Xclang",
                            "-Xpreprocessor", "-Xassembler", "-Xlinker", "-mllvm", "-wrapper",
                            "-B", "-include", "-imacros", "-x", "-L", "-T", "-u", "-z",
                            "-load", "--param", "-target", "-arch", "-isysroot", "--sysroot",
                            "-iprefix", "-iwithprefix", "-iwithprefixbefore", "-specs"})
# -f and -m options whose value is not a path (no "/"), except those that read or write
# files or load code; warnings except -Wa,/-Wl,/-Wp, (options for other tools) and
# -Werror; the language standard, optimisation, macros and include directories.
_F_DENIED = ("plugin", "pass-plugin", "dump", "profile", "opt-info", "save-optimization",
             "stack-usage", "callgraph-info", "crash-diagnostics", "modules", "module-",
             "prebuilt-module", "implicit-module", "record-", "debug-prefix", "file-prefix",
             "macro-prefix", "auto-profile", "lto", "test-coverage", "coverage",
             "branch-probabilities", "embed-bitcode", "sanitize-blacklist",
             "sanitize-ignorelist", "xray", "diagnostics", "compare-debug", "random-seed",
             "self-test", "create-profile", "use-ld", "fuse-ld", "ld-path",
             "color-diagnostics")
_KEEP = re.compile(r"^(-std=[\w+.-]+|-ansi|-pedantic|-w|-pthread|-fopenmp|-O[0-3sgz]?|-Ofast|"
                   r"-[DU]\S+|-I\S+|-m(?!llvm$)[\w+.-]+(=[\w.,+:-]+)?|"
                   r"-W(?![alp],)(?!error)[\w+.=-]+|"
                   r"-f[\w+.-]+(=[\w.,+:-]+)?)$")
_VERSION = re.compile(r"\d+(\.\d+)*")


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
    """The options of a recorded command line that a syntax check needs and that are safe
    to pass on: the allowlist above (standard, optimisation, target, warnings, macros,
    include and module directories).  Outputs, inputs, dependency files, debug and
    diagnostic formatting, and anything that would run a program, load a plugin or read
    a response file are dropped; gfortran's -J (where module files are written) becomes
    -I (where they are read)."""
    out, skip, take = [], False, False
    for w in words:
        if skip:
            skip = False
            continue
        if take:
            out.append(w)
            take = False
            continue
        if w in _KEEP_WITH_ARG:
            out.append("-I" if w == "-J" else w)
            take = True
            continue
        if w in _DROP_WITH_ARG:
            skip = True
            continue
        if w.startswith("-J") and len(w) > 2:
            w = "-I" + w[2:]
        if not _KEEP.match(w) or (w.startswith("-f") and
                                  w.removeprefix("-f").removeprefix("no-").startswith(_F_DENIED)):
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
        version = version if _VERSION.fullmatch(version) else ""  # it names a compiler to run
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
        version = m.group(1) if _VERSION.fullmatch(m.group(1)) else ""
        return Producer("clang", "", version, tuple(_compile_flags(cmd)), text)
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
    from elftools.elf.elffile import ELFFile

    from numaprof.analyzer import profile_io
    from numaprof.analyzer.symbols import DAMAGED

    units: list[CompileUnit] = []
    try:
        fd, _ = profile_io.open_regular(readable or binary, follow=readable is None)
    except (OSError, ValueError, ProfileError):
        return units
    with os.fdopen(fd, "rb") as f:
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
        except DAMAGED:
            pass  # a damaged or crafted debug section: what was read so far
    return units


def _line_files(dwarf, cu) -> list[str]:
    from numaprof.analyzer.symbols import _cu_files  # the one reading of DWARF file tables

    return list(dict.fromkeys(p for p in _cu_files(dwarf, cu) if p != "?"))


def recorded_binaries(profile_dir: str | os.PathLike) -> list[tuple[str, str]]:
    """(path as run, path to read) of the user's binaries a profile names: the copies its
    archive kept at record time (archive.json, each checked as
    :func:`~numaprof.analyzer.profile_io.archive_copy` checks it), else the files
    themselves where they still exist as regular ELF files.  System libraries are left
    out."""
    from numaprof.analyzer.archive import Archive

    profile = Path(profile_dir)
    out: dict[str, str] = dict(Archive.read(profile).binaries)
    if not out:
        try:
            from numaprof.analyzer.profile import read_table

            for p in dict.fromkeys(str(x) for x in read_table(profile, "mappings")["path"]):
                if p.startswith("/") and not is_system_path(p) and p not in out and _is_elf(p):
                    out[p] = p
        except (ProfileError, OSError, KeyError, ValueError):
            pass  # no mappings table: nothing is known
    return sorted(out.items())


def _is_elf(path: str) -> bool:
    """A regular file (not a FIFO or device a mapping path may name) starting as ELF."""
    from numaprof.analyzer import profile_io

    try:
        fd, _ = profile_io.open_regular(path, follow=True)
    except (OSError, ValueError, ProfileError):
        return False
    with os.fdopen(fd, "rb") as f:
        return f.read(4) == b"\x7fELF"
