"""Thread-local variables (analyzer/tls.py): OpenMP threadprivate arrays and C11
_Thread_local, each thread's copy below its thread pointer, named and thread-private."""
from __future__ import annotations

import shutil
import subprocess

import profgen  # noqa: E402
import pytest

from numaprof.analyzer import analyze, symbols, tls  # noqa: E402

SRC = """\
#include <stdio.h>
#include <stdlib.h>

#define NW 200000
static double work[NW];
#pragma omp threadprivate(work)
static _Thread_local long hist[65536];
_Thread_local char flag;

int main(int argc, char **argv)
{
    long n = argc * 1000;
    double t = 0;
#pragma omp parallel reduction(+ : t)
    for (long i = 0; i < n; i++) {
        work[i % NW] += i;
        hist[i & 65535]++;
        t += work[(i * 7) % NW] + hist[i & 7] + flag;
    }
    printf("%f\\n", t);
    return 0;
}
"""

BASE = 0x555555554000


def _build(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    (tmp_path / "tp.c").write_text(SRC)
    exe = tmp_path / "tp"
    subprocess.run(["gcc", "-g", "-O2", "-fopenmp", "-o", str(exe), str(tmp_path / "tp.c")], check=True,
                   capture_output=True)
    return exe


def _fs_offsets(exe) -> set[int]:
    """The negative displacements gcc put on the %fs-relative accesses (initial-exec or
    local-exec TLS of the executable: tp + the variable's offset)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(exe)], capture_output=True,
                         text=True, check=True).stdout
    import re

    return {int(m.group(1), 16) - (1 << 64) for m in re.finditer(r"lea\s+0x(f{6,}[0-9a-f]+),", out)} | \
        {-int(m.group(1), 16) for m in re.finditer(r"%fs:-0x([0-9a-f]+)", out)}


def test_layout_matches_the_compilers_offsets(tmp_path):
    """Where gcc's code puts each variable below the thread pointer is where the layout
    says it is (variant II: the executable's block ends at the thread pointer)."""
    exe = _build(tmp_path)
    info = symbols.elf_info(str(exe))
    offset, syms = tls.layout(info)
    by_name = {s.name: s for s in syms}
    assert set(by_name) == {"work", "hist", "flag"}, by_name
    assert by_name["work"].size == 200000 * 8 and by_name["hist"].size == 65536 * 8
    placed = {s.address - offset for s in syms}
    used = _fs_offsets(exe)
    assert used and used <= placed | {0}, (sorted(used), sorted(placed))


def test_each_threads_copy_is_one_thread_private_object(tmp_path):
    """Samples in two threads' copies of `work` and `hist` (at their thread pointers, as
    the collector records them) are two objects, each with an instance per thread."""
    exe = _build(tmp_path)
    info = symbols.elf_info(str(exe))
    offset, syms = tls.layout(info)
    by_name = {s.name: s for s in syms}
    tps = [0x7F00_1000_0000, 0x7F00_2000_0000]
    w = profgen.ProfileWriter(tmp_path / "prof")
    w.manifest(cwd=str(tmp_path))
    w.topology([[0, 1]])
    loads = [(p, seg) for p, seg in [(s["p_vaddr"], s) for s in info.elf.iter_segments()] if seg["p_type"] == "PT_LOAD"]
    starts = [BASE + (int(seg["p_vaddr"]) & ~0xFFF) for _, seg in loads]
    lens = [((int(seg["p_vaddr"]) + int(seg["p_memsz"]) + 0xFFF) & ~0xFFF) - (int(seg["p_vaddr"]) & ~0xFFF)
            for _, seg in loads]
    k = len(loads)
    w.table("mappings", time=[0] * k, pid=[9] * k, start=starts, len=lens,
            pgoff=[int(seg["p_offset"]) & ~0xFFF for _, seg in loads], prot=[5] * k, flags=[2] * k,
            path=[str(exe)] * k)
    w.table("threads", pid=[9, 9], tid=[9, 10], tls_base=tps)
    addrs, tids = [], []
    for t, tp in zip((9, 10), tps, strict=True):
        for name, n in (("work", 40), ("hist", 20)):
            lo = tp - offset + by_name[name].address
            addrs += [lo + (i * 7919 * 8) % by_name[name].size for i in range(n)]
            tids += [t] * n
    n = len(addrs)
    w.table("samples", time=list(range(10, 10 + n)), pid=[9] * n, tid=tids, cpu=[0] * n, ip=[0] * n,
            addr=addrs, access=[1] * n)
    objs = {o.name: o for o in analyze(w.path).objects}
    assert objs["work"].samples == 80 and objs["hist"].samples == 40, objs
    for name in ("work", "hist"):
        assert objs[name].thread_private and objs[name].count == 2, objs[name]
        assert objs[name].kind == "static" and objs[name].site == ".tbss@tp", objs[name]
    # no thread pointer recorded (no shim): no thread-local objects
    w.table("threads", pid=[9, 9], tid=[9, 10], tls_base=[0, 0])
    assert not {"work", "hist"} & {o.name for o in analyze(w.path).objects}


def test_a_shared_library_is_not_the_executables_block(tmp_path):
    """Only the executable (with PT_INTERP) is the block at the thread pointer; a library's
    block is where the shim recorded it (tls_modules), or nowhere."""
    lib = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6",) if shutil.os.path.exists(p)), None)
    if lib is None:
        pytest.skip("no libc.so.6")
    info = symbols.elf_info(lib)
    assert tls.layout(info) is None
    recorded = tls.layout(info, 0x1040)
    if recorded is not None:  # libc's own thread-locals, when its symbol table lists them
        offset, syms = recorded
        assert offset == 0x1040 and all(s.section == ".tbss" for s in syms)


def test_a_variable_from_the_thread_pointer_with_its_dwarf_type(tmp_path):
    """variable_at: the executable's variable holding tp + k, named and typed as its DWARF
    declares it (`DW_OP_const8u k; DW_OP_form_tls_address`); nothing past the block's end
    (the TCB at tp), nothing for a library's code."""
    exe = _build(tmp_path)
    info = symbols.elf_info(str(exe))
    offset, syms = tls.layout(info)
    for s in syms:
        for k in (0, s.size - 1):
            v = tls.variable_at(info, s.address - offset + k)
            assert v is not None and (v.symbol, v.name, v.size) == (s.name, s.name, s.size), (s, k, v)
            assert v.type is not None and v.type.tag in ("DW_TAG_array_type", "DW_TAG_base_type"), v
    assert tls.variable_at(info, 0) is None and tls.variable_at(info, 8) is None
    assert tls.variable_at(info, -offset - 1) is None
    lib = "/lib/x86_64-linux-gnu/libc.so.6"
    if shutil.os.path.exists(lib):
        assert tls.variable_at(symbols.elf_info(lib), -8) is None
