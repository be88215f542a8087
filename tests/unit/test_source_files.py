"""The source files record hashes come from the executables' DWARF line tables, read by
the collector with libdw (`numaprof-collect --source-files`, collector/src/srcfiles.c).
They must be the files a DWARF reader finds there: pyelftools (the analyzer's reader) is
the reference, for DWARF 4 and 5, C, C++ and Fortran, relative and absolute paths."""

import os
import shutil
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from numaprof.recommender.sources import dwarf_source_files, source_files_of


def _reference(path: str) -> list[str]:
    """The file tables as pyelftools reads them, made absolute and normal, in order."""
    out: list[str] = []
    with open(path, "rb") as f:
        elf = ELFFile(f)
        if not elf.has_dwarf_info():
            return out
        dwarf = elf.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            lp = dwarf.line_program_for_CU(cu)
            if lp is None:
                continue
            attr = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
            comp = attr.value.decode() if attr else ""
            dirs = [d.decode() for d in lp.header.get("include_directory", ())]
            v5 = lp.header.get("version", cu.header.version) >= 5
            for fe in lp.header.get("file_entry", ()):
                i = fe.dir_index
                d = (dirs[i] if i < len(dirs) else comp) if v5 else (
                    comp if i == 0 else dirs[i - 1] if i - 1 < len(dirs) else "")
                d = os.path.join(comp, d)
                name = fe.name.decode()
                out.append(os.path.normpath(os.path.join(d, name)))
    return list(dict.fromkeys(out))


def _build(tmp_path, compiler: str, flags: list[str], files: dict[str, str], main: str):
    if shutil.which(compiler) is None:
        pytest.skip(f"no {compiler}")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    exe = tmp_path / "prog"
    # relative paths from the build directory, as make builds: the tables hold them so
    subprocess.run([compiler, *flags, "-o", "prog", main], cwd=tmp_path, check=True)
    return str(exe)


C_FILES = {"src/main.c": '#include "inc/grid.h"\nint main(void) { return grid_size(3); }\n',
           "src/inc/grid.h": "static inline int grid_size(int n) { return n * n; }\n"}


@pytest.mark.parametrize("dwarf", ["-gdwarf-4", "-gdwarf-5"])
def test_c_tables_with_relative_paths(tmp_path, dwarf):
    exe = _build(tmp_path, "gcc", [dwarf, "-O2"], C_FILES, "src/main.c")
    got = dwarf_source_files(exe)
    assert got == _reference(exe)
    assert str(tmp_path / "src" / "main.c") in got
    assert str(tmp_path / "src" / "inc" / "grid.h") in got


def test_cpp_and_fortran(tmp_path):
    cpp = _build(tmp_path / "cpp", "g++", ["-g", "-O2"], {
        "a.cpp": "#include <vector>\n#include \"../cpp/b.hpp\"\n"
                 "int main() { std::vector<double> v(9); return f(v); }\n",
        "b.hpp": "#include <vector>\ninline int f(std::vector<double> &v) { return v.size(); }\n"},
        "a.cpp")
    f90 = _build(tmp_path / "f", "gfortran", ["-g", "-O2"], {
        "m.f90": "program p\n  real, allocatable :: u(:)\n  allocate(u(8))\n  u = 1\n"
                 "  print *, sum(u)\nend program\n"}, "m.f90")
    got = source_files_of([cpp, "/nonexistent", f90, "/usr/bin/true"])
    assert got[0] == _reference(cpp) and str(tmp_path / "cpp" / "b.hpp") in got[0]
    assert got[1] == [] and got[3] == []  # no file, no DWARF
    assert got[2] == _reference(f90) and str(tmp_path / "f" / "m.f90") in got[2]


def test_a_child_reaped_by_another_thread_still_gives_its_lists(tmp_path, monkeypatch):
    """record's supervisor reaps every child of the process (cli/supervise.py), the
    helper its prefetch thread runs included: the lists are then taken from the output."""
    exe = _build(tmp_path, "gcc", ["-g", "-O2"], C_FILES, "src/main.c")
    real_waitpid = os.waitpid

    def reaped_elsewhere(pid, options):
        real_waitpid(pid, options)
        raise ChildProcessError(10, "No child processes")

    monkeypatch.setattr(os, "waitpid", reaped_elsewhere)
    assert source_files_of([exe, "/usr/bin/true"]) == [_reference(exe), []]


@pytest.mark.parametrize("output", [b"2\0/a.c\0", b"2\0/a.c\0/b.h", b"1\0/a.c\0",
                                    b"1\0/a.c\0" b"0\0x"])
def test_a_run_cut_short_gives_nothing(tmp_path, monkeypatch, output):
    """Output cut short (a list short, a field unended, a list missing, bytes after the
    last list) is never taken for the file tables, whoever reaped the helper."""
    from numaprof import paths

    fake = tmp_path / "collector"
    (tmp_path / "out").write_bytes(output)
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'out'}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(paths, "collector", lambda: fake)
    assert source_files_of(["/x", "/y"]) == [[], []]
    monkeypatch.setattr(os, "waitpid", lambda pid, options: (_ for _ in ()).throw(
        ChildProcessError(10, "No child processes")))
    assert source_files_of(["/x", "/y"]) == [[], []]
    (tmp_path / "out").write_bytes(b"1\0/a.c\0" b"0\0")
    assert source_files_of(["/x", "/y"]) == [["/a.c"], []]  # the same helper, output whole
