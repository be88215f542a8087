"""Compiled before offered: every patched translation unit is compiled, syntax only, with
the flags the program was built with, before `suggest` shows the patch.

The flags come from ``compile_commands.json`` when the tree has one (it holds the -I and
-D options too), else from the DW_AT_producer of the unit's DWARF (analyzer/buildflags.py;
the directories of the unit's line table stand in for the -I options gcc does not
record), plus ``numaprof config --cflags``.  The compiler is the one the producer names
(``gcc-12``, else ``gcc`` of the same major version, else another version with a note);
without it the patch is offered as not compile-checked, and the note says why.

The unpatched unit is compiled first: if it does not compile here (a header or macro the
recorded flags do not give), the patch cannot be checked and says so.  The patched unit is
then compiled with the same flags, with the warnings that signal a wrong patch made
errors (``-Werror=sizeof-array-argument``, ``-Werror=sizeof-pointer-memaccess``,
implicit declarations in C) and shadowing warned about; any error, or any warning the
unpatched unit did not have, and the patch is not offered.  A placement whose size is a
constant carries a probe statement (``(void)sizeof(char[(sizeof(a) == 8000) ? 1 :
-1]);``), inserted next to it in the compiled copy only: it compiles only if the size
the statement passes is the size the profile recorded, so the compiler itself confirms
it, at that point, with the program's own headers and macros.

Everything is compiled in a scratch directory (a mirror of the patched files under it,
so the user's tree is never written, not even the module files gfortran makes).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from numaprof.recommender.patch.edits import Edit, Patch, apply_edits

#: Warnings that mean a placement names the wrong object or the wrong size: errors.
SIGNAL_ERRORS = {
    "c": ("sizeof-array-argument", "sizeof-pointer-memaccess", "sizeof-pointer-div",
          "implicit-function-declaration", "int-conversion", "incompatible-pointer-types"),
    "c++": ("sizeof-array-argument", "sizeof-pointer-memaccess", "sizeof-pointer-div"),
    "fortran": (),
}
#: Warnings turned on so that a patch that brings one is seen (compared with the original).
SIGNAL_WARNINGS = {"c": ("shadow", "unknown-pragmas"), "c++": ("shadow", "unknown-pragmas"),
                   "fortran": ()}

TIMEOUT = 120  # seconds per compile

_PROBE = "(void)sizeof(char[((unsigned long long)("
_DIAG = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|"
                   r"warning): (?P<msg>.*?)(?: \[(?P<opt>-W[^\]]+)\])?$")
_F_LOC = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+):$")
_F_MSG = re.compile(r"^(?P<sev>Error|Warning|Fatal Error): (?P<msg>.*?)(?: \[(?P<opt>-W[^\]]+)\])?$")


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    severity: str  # error | warning
    message: str
    option: str = ""  # -Wxxx, "" when the compiler names none

    def key(self) -> tuple:
        """What identifies a diagnostic across two versions of a file whose lines moved."""
        opt = self.option.replace("-Werror=", "-W")
        return (os.path.basename(self.file), opt, re.sub(r"\d+", "#", self.message))

    def __str__(self) -> str:
        opt = f" [{self.option}]" if self.option else ""
        return f"{os.path.basename(self.file)}:{self.line}: {self.severity}: {self.message}{opt}"


@dataclass
class CheckResult:
    """How one patched file fared: ``clean``, ``failed`` or ``not checked``."""

    status: str
    detail: str  # one sentence: what was compiled how, or why not, or what failed
    compiler: str = ""  # "gcc 12.2.0"
    flags_from: str = ""  # where the flags came from
    size_confirmed: bool = False  # a size probe compiled: the compiler agrees on the bytes
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status != "failed"


def parse_diagnostics(output: str) -> list[Diagnostic]:
    """Errors and warnings of gcc, clang or gfortran output (notes are left out)."""
    out, loc = [], None
    for raw in output.splitlines():
        line = raw.rstrip()
        m = _DIAG.match(line)
        if m:
            sev = "error" if "error" in m.group("sev") else "warning"
            out.append(Diagnostic(m.group("file"), int(m.group("line")), sev, m.group("msg"),
                                  m.group("opt") or ""))
            continue
        m = _F_LOC.match(line)
        if m:
            loc = (m.group("file"), int(m.group("line")))
            continue
        m = _F_MSG.match(line.strip())
        if m and loc is not None:
            sev = "warning" if m.group("sev") == "Warning" else "error"
            out.append(Diagnostic(loc[0], loc[1], sev, m.group("msg"), m.group("opt") or ""))
    return out


@lru_cache(maxsize=32)
def _version(exe: str) -> str:
    """The full version of a compiler executable ("12.2.0"), "" when it does not say."""
    for args in (["-dumpfullversion"], ["--version"]):
        try:
            r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30,
                               env={**os.environ, "LC_ALL": "C"})
        except (OSError, subprocess.SubprocessError):
            return ""
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", r.stdout)
        if r.returncode == 0 and m:
            return m.group(1)
    return ""


_DRIVERS = {("gcc", "c"): "gcc", ("gcc", "c++"): "g++", ("gcc", "fortran"): "gfortran",
            ("clang", "c"): "clang", ("clang", "c++"): "clang++",
            ("clang", "fortran"): "flang", ("unknown", "c"): "cc",
            ("unknown", "c++"): "c++", ("unknown", "fortran"): "gfortran"}


def find_compiler(family: str, language: str, version: str) -> tuple[str | None, str]:
    """(executable, note) for a compiler of `family` (gcc | clang | unknown) compiling
    `language`: ``gcc-12`` or ``gcc`` of the recorded major version first, else the same
    compiler of another version (the note says which), else None with the note why."""
    driver = _DRIVERS.get((family, language))
    if driver is None:
        return None, f"no compiler is known for {language or 'this file'}"
    major = version.split(".", 1)[0] if version else ""
    names = ([f"{driver}-{major}"] if major else []) + [driver]
    if family == "unknown" and language == "c":
        names += ["gcc", "clang"]
    elif family == "unknown" and language == "c++":
        names += ["g++", "clang++"]
    found = [shutil.which(n) for n in names]
    found = [f for f in dict.fromkeys(found) if f]
    if not found:
        shown = f"{driver} {version}".strip()
        return None, (f"the program was built with {shown}, and no {driver} is installed "
                      "here to check the patch with")
    for exe in found:
        got = _version(exe)
        if not major or got.split(".", 1)[0] == major:
            return exe, ""
    exe = found[0]
    return exe, (f"checked with {os.path.basename(exe)} {_version(exe)}; the program was built "
                 f"with {driver} {version}")


# --------------------------------------------------------------- compile_commands.json

def _absolute_flags(flags: list[str], base: str) -> list[str]:
    """-I/-iquote/-isystem/-include and friends with paths relative to `base` made absolute."""
    out, want = [], False
    opts = ("-I", "-iquote", "-isystem", "-idirafter", "-include", "-imacros", "-J")
    for f in flags:
        if want:
            out.append(f if os.path.isabs(f) else os.path.normpath(os.path.join(base, f)))
            want = False
            continue
        if f in opts:
            out.append(f)
            want = True
            continue
        for o in opts:
            if f.startswith(o) and len(f) > len(o) and o in ("-I", "-J"):
                path = f[len(o):]
                f = o + (path if os.path.isabs(path) else
                         os.path.normpath(os.path.join(base, path)))
                break
        out.append(f)
    return out


def _trusted_file(path: str) -> bool:
    """A compile_commands.json names the compiler to run: one is only read when it and its
    directory belong to this user (or root) and are not writable by every user.  The
    search includes the DWARF compile directory of a recorded binary, which a crafted
    profile chooses (/tmp, where anyone could have left one)."""
    uid = os.getuid()
    for p in (path, os.path.dirname(path)):
        try:
            st = os.stat(p)
        except OSError:
            return False
        if st.st_uid not in (uid, 0) or st.st_mode & 0o002:
            return False
    return True


def compile_database_entry(source: str, search: list[str]) -> tuple[str, list[str], str] | None:
    """(compiler, flags, directory) of `source` in the first compile_commands.json found in
    `search` (each directory and its ``build/``), or None."""
    real = os.path.realpath(source)
    for d in dict.fromkeys(search):
        for cand in (os.path.join(d, "compile_commands.json"),
                     os.path.join(d, "build", "compile_commands.json")):
            if not _trusted_file(cand):
                continue
            try:
                with open(cand, encoding="utf-8") as f:
                    entries = json.load(f)
            except (OSError, ValueError, RecursionError):
                continue
            if not isinstance(entries, list):
                continue
            for e in entries:
                if not isinstance(e, dict) or "file" not in e:
                    continue
                directory = str(e.get("directory", d))
                file = os.path.realpath(os.path.join(directory, str(e["file"])))
                if file != real:
                    continue
                words = e.get("arguments")
                if not isinstance(words, list):
                    try:
                        words = shlex.split(str(e.get("command", "")))
                    except ValueError:
                        continue
                if not words:
                    continue
                from numaprof.analyzer.buildflags import _compile_flags

                return (str(words[0]), _absolute_flags(_compile_flags([str(w) for w in words[1:]]),
                                                       directory), directory)
    return None


# ------------------------------------------------------------------------- the checker

@dataclass(frozen=True)
class _Plan:
    """How to compile one translation unit."""

    compiler: str | None
    compiler_label: str
    language: str
    flags: tuple[str, ...]
    flags_from: str
    note: str  # why it cannot be compiled (compiler is None), or a version note
    source: str  # the translation unit's main file
    comp_dir: str
    include_dirs: tuple[str, ...]


class BuildInfo:
    """What is known of how the recorded program was built, to check patches with.

    `units`: its compile units (analyzer.buildflags.compile_units of every recorded
    binary); `search`: directories where a compile_commands.json may be (the tree being
    patched); `include`: the directory of numaprof_place.h (`numaprof config --cflags`).
    """

    def __init__(self, units, search: list[str], include: str):
        self.units = list(units)
        self.search = list(search)
        self.include = include
        self._baseline: dict[tuple, tuple[int, list[Diagnostic], str]] = {}

    @classmethod
    def from_profile(cls, profile_dir: str | os.PathLike | None, root: str) -> BuildInfo:
        from numaprof import paths
        from numaprof.analyzer.buildflags import compile_units, recorded_binaries

        units = []
        if profile_dir:
            for original, readable in recorded_binaries(profile_dir):
                units += compile_units(original, readable)
        return cls(units, [root], str(paths.include_dir()))

    def _units_of(self, path: str) -> list:
        real = os.path.realpath(path)
        own = [u for u in self.units if os.path.realpath(u.source) == real]
        if own:
            return own[:1]
        # a header: the first units that include it
        return [u for u in self.units if any(os.path.realpath(f) == real for f in u.files)][:2]

    def _plan(self, tu_source: str, unit) -> _Plan:
        from numaprof.analyzer.sourcelang import source_language

        lang = {"cpp": "c++", "c": "c", "fortran": "fortran"}.get(
            source_language(tu_source) or "", "")
        if unit is not None and unit.language:
            lang = unit.language
        search = [*self.search, os.path.dirname(tu_source)] + (
            [unit.comp_dir] if unit is not None and unit.comp_dir else [])
        db = compile_database_entry(tu_source, search)
        if db is not None:
            exe = shutil.which(db[0]) if not os.path.isabs(db[0]) else (
                db[0] if os.path.exists(db[0]) else None)
            note = ""
            if exe is None:
                family = "clang" if "clang" in os.path.basename(db[0]) else "gcc"
                exe, note = find_compiler(family, lang, "")
            label = f"{os.path.basename(exe)} {_version(exe)}".strip() if exe else db[0]
            return _Plan(exe, label, lang, tuple(db[1]), "compile_commands.json", note,
                         tu_source, db[2], ())
        if unit is None:
            exe, note = find_compiler("unknown", lang, "")
            label = f"{os.path.basename(exe)} {_version(exe)}".strip() if exe else ""
            return _Plan(exe, label, lang, (), "the compiler's defaults (no compile unit of "
                         "the recorded binaries is this file)", note, tu_source,
                         os.path.dirname(tu_source), ())
        prod = unit.producer
        exe, note = find_compiler(prod.family, lang, prod.version)
        flags = _absolute_flags(list(prod.flags), unit.comp_dir or os.path.dirname(tu_source))
        where = "DW_AT_producer" if prod.flags else \
            "the compiler's defaults (its DW_AT_producer records no flags)"
        label = f"{os.path.basename(exe)} {_version(exe)}".strip() if exe else prod.label
        return _Plan(exe, label, lang, tuple(flags), where, note, tu_source, unit.comp_dir,
                     unit.include_dirs)

    def check(self, path: str, original: bytes, edits: list[Edit],
              probes: list[Edit] = (), kinds: tuple[str, ...] = ()) -> CheckResult:
        """Compile the translation unit(s) of `path` with `edits` (the patch) and `probes`
        (check-only statements) inserted into `original`, and judge the result."""
        units = self._units_of(path) or [None]
        result = None
        for unit in units:
            tu = unit.source if unit is not None else path
            if unit is None and not os.path.isfile(tu):
                return CheckResult("not checked", f"{os.path.basename(path)} is in no compile "
                                                  "unit of the recorded binaries")
            if unit is None and os.path.splitext(tu)[1].lower() in (".h", ".hpp", ".hh",
                                                                    ".hxx", ".inc"):
                return CheckResult("not checked", f"{os.path.basename(path)} is a header that no "
                                                  "compile unit of the recorded binaries lists")
            plan = self._plan(tu, unit)
            result = self._check_unit(plan, path, original, edits, probes, kinds)
            if result.status != "clean":
                return result
        return result

    def _check_unit(self, plan: _Plan, path: str, original: bytes, edits, probes,
                    kinds) -> CheckResult:
        name = os.path.basename(path)
        if plan.compiler is None:
            return CheckResult("not checked", f"not compile-checked: {plan.note}",
                               flags_from=plan.flags_from)
        if "parallel_first_touch" in kinds and plan.flags_from in (
                "DW_AT_producer", "compile_commands.json") and not any(
                f in ("-fopenmp", "-qopenmp", "-fiopenmp", "-openmp") or
                f.startswith("-fopenmp=") for f in plan.flags):
            return CheckResult("failed", f"the program was not built with OpenMP (no -fopenmp "
                                         f"in the flags of {os.path.basename(plan.source)}, from "
                                         f"{plan.flags_from}): the directive would be ignored",
                               plan.compiler_label, plan.flags_from)
        patched = apply_edits(original, [*edits, *probes]).encode("utf-8", "surrogateescape")
        base_rc, base_diags, base_out = self._baseline_of(plan, path, original)
        real_errors = [d for d in base_diags if d.severity == "error"
                       and not d.option.startswith("-Werror=")]
        if real_errors or (base_rc != 0 and not base_diags):
            first = str(real_errors[0]) if real_errors else \
                (base_out.strip().splitlines() or ["no message"])[-1]
            return CheckResult("not checked", f"not compile-checked: the unpatched "
                                              f"{os.path.basename(plan.source)} does not compile "
                                              f"here with the flags of {plan.flags_from} "
                                              f"({first})", plan.compiler_label, plan.flags_from)
        rc, diags, out = self._compile(plan, {path: patched})
        probe_lines = {i for i, ln in enumerate(patched.decode("utf-8", "surrogateescape")
                                                .splitlines(), start=1) if _PROBE in ln}
        real = os.path.realpath(path)
        at_probe = [d for d in diags if os.path.realpath(d.file) == real and
                    d.line in probe_lines]
        rest = [d for d in diags if d not in at_probe]
        label = plan.compiler_label + (f" ({plan.note})" if plan.note else "")
        if any(d.severity == "error" for d in at_probe):
            why = next((d for d in at_probe if "negative" not in d.message), None)
            return CheckResult("failed", "the size the statement passes is not the size the "
                                         f"profile recorded, as {plan.compiler_label} evaluates "
                                         "it there with the program's flags"
                                         + (f" ({why})" if why is not None else ""),
                               plan.compiler_label, plan.flags_from, diagnostics=at_probe)
        old = Counter(d.key() for d in base_diags)
        new = []
        for d in rest:
            if old[d.key()] > 0:
                old[d.key()] -= 1
            else:
                new.append(d)
        if new or (rc != 0 and base_rc == 0):
            shown = next((d for d in new if d.severity == "error"), new[0] if new else None)
            what = str(shown) if shown is not None else (out.strip().splitlines() or ["?"])[-1]
            return CheckResult("failed", f"the patched {name} does not compile cleanly with "
                                         f"{label} and {plan.flags_from} flags: {what}",
                               plan.compiler_label, plan.flags_from, diagnostics=new)
        flags = " ".join(plan.flags)
        return CheckResult("clean", f"{name} compiled cleanly with {label} -fsyntax-only and "
                                    f"the flags of {plan.flags_from}"
                                    + (f" ({flags})" if flags else ""),
                           plan.compiler_label, plan.flags_from, size_confirmed=bool(probes))

    def _baseline_of(self, plan: _Plan, path: str, original: bytes):
        key = (plan.source, plan.flags, plan.compiler, path)
        if key not in self._baseline:
            self._baseline[key] = self._compile(plan, {path: original})
        return self._baseline[key]

    def _compile(self, plan: _Plan, texts: dict[str, bytes]) -> tuple[int, list[Diagnostic], str]:
        """Compile `plan.source` with `texts` (path -> contents) replacing those files."""
        with tempfile.TemporaryDirectory(prefix="numaprof-check-") as tmp:

            def mirror(p: str) -> str:
                return os.path.join(tmp, "tree", os.path.abspath(p).lstrip("/"))

            files = dict(texts)
            if plan.source not in files:
                with open(plan.source, "rb") as f:
                    files[plan.source] = f.read()
            for p, data in files.items():
                os.makedirs(os.path.dirname(mirror(p)), exist_ok=True)
                with open(mirror(p), "wb") as f:
                    f.write(data)
            lang = plan.language
            args = [plan.compiler, "-fsyntax-only"]
            if lang in ("c", "c++"):
                args += ["-x", lang]
            for p in texts:
                if p != plan.source:
                    args += ["-iquote", os.path.dirname(mirror(p)), "-I",
                             os.path.dirname(mirror(p))]
            src_dir = os.path.dirname(os.path.abspath(plan.source))
            args += ["-iquote", src_dir] if lang in ("c", "c++") else ["-I", src_dir]
            args += list(plan.flags)
            args += [f"-I{d}" for d in plan.include_dirs]
            if lang == "fortran":
                args += [f"-J{tmp}", f"-I{plan.comp_dir or src_dir}"]
            args += [f"-I{self.include}"]
            args += [f"-W{w}" for w in SIGNAL_WARNINGS.get(lang, ())]
            args += [f"-Werror={w}" for w in SIGNAL_ERRORS.get(lang, ())]
            args.append(mirror(plan.source))
            try:
                r = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT,
                                   cwd=tmp, env={**os.environ, "LC_ALL": "C"},
                                   stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                return 1, [], f"the compiler took more than {TIMEOUT} s"
            except OSError as e:
                return 1, [], f"cannot run {plan.compiler}: {e.strerror or e}"
            out = (r.stdout + r.stderr).replace(os.path.join(tmp, "tree"), "")
            return r.returncode, parse_diagnostics(out), out


def check_patches(build: BuildInfo, patches: list[Patch]) -> CheckResult:
    """Compile one file with all of `patches` (made from the same text) applied."""
    first = patches[0]
    with open(first.path, "rb") as f:
        original = f.read()
    edits = [e for p in patches for e in p.edits]
    probes = [p.info.probe for p in patches if p.info is not None and p.info.probe is not None]
    kinds = tuple(p.info.kind for p in patches if p.info is not None)
    return build.check(first.path, original, edits, probes, kinds)
