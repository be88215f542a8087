"""Compiled before offered (recommender/patch/compile.py, analyzer/buildflags.py): the
flags come from the binary's DWARF or compile_commands.json, the unpatched unit is the
baseline, and a patch with an error, a new warning or a wrong size is not offered."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import ROOT

from numaprof.analyzer.buildflags import compile_units, parse_producer
from numaprof.recommender.patch import Patch, parallelize_first_touch, place_static
from numaprof.recommender.patch.compile import (
    BuildInfo,
    check_patches,
    compile_database_entry,
    parse_diagnostics,
)
from numaprof.recommender.patch.edits import Edit, PatchInfo, make_patch
from numaprof.recommender.patch.place import size_probe

INCLUDE = str(ROOT / "collector" / "include")

PROGRAM = """\
#include <stdio.h>
#include "config.h"
static entry_t idx[N];

static void fill(entry_t idx[], int n)
{
    for (int i = 0; i < n; i++)
        idx[i] = (i * 7) % n;
}

int main(void)
{
    fill(idx, N);
    printf("%d\\n", idx[5]);
    return 0;
}
"""


@pytest.mark.parametrize("producer, family, lang, version, flags", [
    ("GNU C11 12.2.0 -mtune=generic -march=x86-64 -g -O2 -std=c11 -fopenmp", "gcc", "c",
     "12.2.0", ("-mtune=generic", "-march=x86-64", "-O2", "-std=c11", "-fopenmp")),
    ("GNU C17 12.2.0 -mtune=generic -O3", "gcc", "c", "12.2.0",
     ("-std=gnu17", "-mtune=generic", "-O3")),  # the standard its name says, as the default
    ("GNU C++17 13.1.0 -O2 -fopenmp -Werror -fdiagnostics-color=always", "gcc", "c++",
     "13.1.0", ("-std=gnu++17", "-O2", "-fopenmp")),
    ("GNU Fortran2008 12.2.0 -O2 -fopenmp -fintrinsic-modules-path /usr/lib/finclude", "gcc",
     "fortran", "12.2.0", ("-O2", "-fopenmp", "-fintrinsic-modules-path", "/usr/lib/finclude")),
    ("Debian clang version 14.0.6 /usr/bin/clang-14 -g -grecord-command-line -O2 -Iinc "
     "-DX=1 -std=c11 -c app.c -o app.o", "clang", "", "14.0.6",
     ("-O2", "-Iinc", "-DX=1", "-std=c11")),
    ("clang version 17.0.1 (https://github.com/llvm/llvm-project abc)", "clang", "", "17.0.1",
     ()),
])
def test_producer_strings(producer, family, lang, version, flags):
    p = parse_producer(producer)
    assert (p.family, p.language, p.version, p.flags) == (family, lang, version, flags)


def test_diagnostics_of_gcc_and_gfortran():
    gcc = ("a.c: In function 'f':\n"
           "a.c:3:31: error: 'sizeof' on array function parameter 'a' will return size of "
           "'int *' [-Werror=sizeof-array-argument]\n"
           "a.c:1:11: note: declared here\n"
           "a.c:9:5: warning: unused variable 'q' [-Wunused-variable]\n")
    got = parse_diagnostics(gcc)
    assert [(d.line, d.severity, d.option) for d in got] == [
        (3, "error", "-Werror=sizeof-array-argument"), (9, "warning", "-Wunused-variable")]
    fortran = "b.f90:7:9:\n\n    7 | call foo(\n      |         1\nError: Syntax error in argument list at (1)\n"
    [d] = parse_diagnostics(fortran)
    assert (d.file, d.line, d.severity) == ("b.f90", 7, "error")


@pytest.fixture
def built(tmp_path):
    """PROGRAM built with a config header in inc/ (-Iinc, which the producer leaves out;
    the header declares a type the program uses, so the line table names it)."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "config.h").write_text("#define N 2000\ntypedef int entry_t;\n")
    src = tmp_path / "app.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "app"
    subprocess.run(["gcc", "-std=c11", "-O2", "-g", "-fopenmp", "-Iinc", "-o", str(exe),
                    str(src)], check=True, cwd=tmp_path)
    return SimpleNamespace(dir=tmp_path, src=src, exe=exe)


def _build(built, search=()):
    return BuildInfo(compile_units(str(built.exe)), list(search) or [str(built.dir)], INCLUDE)


def _inside_fill(src: Path, probe: bool) -> Patch:
    """The patch the old patcher wrote: the call inside fill(int idx[])."""
    data = src.read_bytes()
    at = data.index(b"    for (int i = 0; i < n; i++)\n        idx[i]")
    stmt = "numaprof_place(idx, sizeof(idx), NUMAPROF_BIND_BLOCK);"
    info = PatchInfo("place_static", stmt, "app.c:7", probe=Edit(
        at, "    " + size_probe("sizeof(idx)", 8000) + "\n") if probe else None)
    return make_patch(str(src), data, [Edit(at, f"    {stmt}\n"),
                                       Edit(data.index(b"static"), '#include "numaprof_place.h"\n')],
                      str(src.parent), "old", info)


def test_flags_from_the_producer_and_the_line_table(built):
    [unit] = compile_units(str(built.exe))
    assert unit.producer.label == "gcc 12.2.0" or unit.producer.family == "gcc"
    assert "-std=c11" in unit.producer.flags and "-fopenmp" in unit.producer.flags
    assert str(built.dir / "inc") in unit.include_dirs  # for the -I gcc does not record


def test_a_right_patch_compiles_and_the_compiler_confirms_its_size(built):
    p = place_static(built.src, "idx", "bind_block", before_line=8, recorded_size=8000)
    assert isinstance(p, Patch) and p.info.probe is not None
    check = check_patches(_build(built), [p])
    assert check.status == "clean", check.detail
    assert check.size_confirmed and "DW_AT_producer" in check.detail
    assert "-std=c11" in check.detail


def test_the_old_patch_is_not_offered(built):
    """sizeof on the parameter: a -Werror'd warning, and without the probe too."""
    build = _build(built)
    check = check_patches(build, [_inside_fill(built.src, probe=True)])
    assert check.status == "failed" and "not the size the profile recorded" in check.detail
    check = check_patches(build, [_inside_fill(built.src, probe=False)])
    assert check.status == "failed" and "sizeof-array-argument" in check.detail


def test_a_new_warning_refuses_and_old_ones_do_not(built):
    src = built.src
    src.write_text(PROGRAM.replace("int main(void)\n{\n", "int main(void)\n{\n    int unused;\n"))
    data = src.read_bytes()
    at = data.index(b"    fill(idx, N);")
    ok = make_patch(str(src), data, [Edit(at, "    (void)0;\n")], str(built.dir), "ok")
    build = _build(built)
    base = check_patches(build, [ok])
    assert base.status == "clean", base.detail  # the file's own -Wunused is not ours
    shadow = make_patch(str(src), data, [Edit(at, "    { int idx = 1; (void)idx; }\n")],
                        str(built.dir), "shadow")
    check = check_patches(build, [shadow])
    assert check.status == "failed" and "-Wshadow" in check.detail


def test_no_such_compiler_or_a_unit_that_does_not_compile_is_not_checked(built, monkeypatch):
    import numaprof.recommender.patch.compile as compile_mod

    p = place_static(built.src, "idx", "bind_block", before_line=8, recorded_size=8000)
    build = _build(built)
    monkeypatch.setattr(compile_mod.shutil, "which", lambda name: None)
    check = check_patches(build, [p])
    assert check.status == "not checked" and "no gcc is installed" in check.detail
    monkeypatch.undo()
    build.units = []  # no DWARF: compiler defaults, and inc/ is then unknown
    check = check_patches(build, [p])
    assert check.status == "not checked" and "does not compile here" in check.detail
    assert "config.h" in check.detail


def test_compile_commands_json_gives_the_include_and_define_options(built):
    src = built.src
    src.write_text(PROGRAM.replace('#include "config.h"\n', "typedef int entry_t;\n")
                   .replace("[N]", "[LEN]").replace("fill(idx, N)", "fill(idx, LEN)"))
    (built.dir / "compile_commands.json").write_text(json.dumps([{
        "directory": str(built.dir), "file": "app.c",
        "arguments": ["gcc", "-std=c11", "-DLEN=2000", "-fopenmp", "-c", "app.c", "-o",
                      "app.o"]}]))
    assert compile_database_entry(str(src), [str(built.dir)])[1] == [
        "-std=c11", "-DLEN=2000", "-fopenmp"]
    p = place_static(src, "idx", "bind_block", before_line=8, recorded_size=8000)
    check = check_patches(BuildInfo([], [str(built.dir)], INCLUDE), [p])
    assert check.status == "clean" and check.flags_from == "compile_commands.json"
    assert check.size_confirmed


def test_a_parallel_loop_in_a_program_built_without_openmp_is_refused(tmp_path):
    src = tmp_path / "serial.c"
    src.write_text("int main(void)\n{\n    static double a[100];\n"
                   "    for (int i = 0; i < 100; i++)\n        a[i] = i;\n    return (int)a[3];\n}\n")
    exe = tmp_path / "serial"
    subprocess.run(["gcc", "-O2", "-g", "-o", str(exe), str(src)], check=True)
    p = parallelize_first_touch(src, 5)
    assert isinstance(p, Patch)
    check = check_patches(BuildInfo(compile_units(str(exe)), [str(tmp_path)], INCLUDE), [p])
    assert check.status == "failed" and "not built with OpenMP" in check.detail


def test_fortran_is_checked_in_a_scratch_directory(tmp_path):
    src = tmp_path / "m.f90"
    src.write_text("module m\ncontains\n  subroutine s(x, n)\n    integer :: n, i\n"
                   "    real(8) :: x(n)\n    do i = 1, n\n      x(i) = 0\n    end do\n"
                   "  end subroutine\nend module\nprogram p\n  use m\n  real(8) :: y(9)\n"
                   "  call s(y, 9)\n  print *, y(1)\nend program\n")
    exe = tmp_path / "p"
    subprocess.run(["gfortran", "-O2", "-g", "-fopenmp", "-o", str(exe), str(src)],
                   check=True, cwd=tmp_path)
    (tmp_path / "m.mod").unlink()
    p = parallelize_first_touch(src, 7)
    check = check_patches(BuildInfo(compile_units(str(exe)), [str(tmp_path)], INCLUDE), [p])
    assert check.status == "clean", check.detail
    assert not (tmp_path / "m.mod").exists()  # the user's tree is not written
