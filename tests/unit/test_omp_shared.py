"""Shared variables of an OpenMP region (analyzer/frames.py, datatype.Member.reference):
GCC's outlined function reads them from its data record, by value, or by reference
when the variable's address is taken or it is written in the region.  A pointer read
through a by-reference member is the variable's own value, named after it, not a
pointer read from its target (`byref[]`).  A real binary, as the compiler emits it."""

import shutil
import subprocess

import pytest

from numaprof.analyzer import datatype, frames, symbols

SRC = """\
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static void release(double **p)
{
    free(*p);
    *p = NULL;
}

int main(int argc, char **argv)
{
    long n = 1000L * argc;
    double *byref = malloc(n * sizeof *byref);
    double *byval = malloc(n * sizeof *byval);
#pragma omp parallel for
    for (long i = 0; i < n; i++) {
        byref[i] = (double)i;
        byval[i] = 2.0 * (double)i;
    }
    printf("%f\\n", byref[n - 1] + byval[n - 1]);
    release(&byref);
    free(byval);
    return 0;
}
"""


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    work = tmp_path_factory.mktemp("omp_shared")
    (work / "r.c").write_text(SRC)
    exe = work / "r"
    subprocess.run(["gcc", "-O2", "-g", "-fopenmp", "-o", str(exe), str(work / "r.c")], check=True)
    info = symbols.elf_info(str(exe))
    return info, frames.frame_index(info)


def test_the_stores_of_the_region_are_named_after_the_shared_pointers(index):
    info, fi = index
    lo = next(int(a) for a, (name, _) in zip(info.func_addr, info.func_info, strict=True)
              if name == "main._omp_fn.0")
    f = fi._function_at(lo)
    insns, _ = fi._code(f)
    stores = [i for i in insns if i.op == "vstore" and i.index >= 0]
    assert len(stores) == 2, stores
    names = {fi.origin(i.addr, i.base).name for i in stores}
    assert names == {"byref", "byval"}, names


def test_a_by_reference_member_is_told_from_a_by_value_one(index):
    info, fi = index
    records = []
    for cu in info.dwarf().iter_CUs():
        for die in cu.iter_DIEs():
            if die.tag == "DW_TAG_structure_type" and "DW_AT_artificial" in die.attributes:
                records.append(fi.types.resolve(die))
    members = {m.name: m.reference for r in records if r is not None for m in r.members}
    assert members.get("byref") is True and members.get("byval") is False, members
    assert datatype.Member("x", 0, 8, 0).reference is False
