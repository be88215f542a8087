"""Helpers of the naming tests (tests/unit/test_analyzer_naming.py and
test_names_through_calls.py): build a program, find its calls, and write a profile of
allocations at given return addresses, its executable mapped at BASE."""

import re
import shutil
import subprocess

import profgen
import pytest

from numaprof.analyzer import symbols

BASE = 0x555555554000


def _build(tmp_path, name, src, compiler, flags):
    if shutil.which(compiler) is None or shutil.which("objdump") is None:
        pytest.skip(f"{compiler} or objdump not installed")
    s = tmp_path / name
    s.write_text(src)
    exe = tmp_path / (name.split(".")[0])
    # in tmp_path: gfortran writes a module's .mod file where it runs
    subprocess.run([compiler, *flags, "-o", str(exe), str(s)], check=True, capture_output=True, cwd=tmp_path)
    return exe


def _return_addresses(exe, callees):
    """Link-time addresses following each call to one of ``callees`` (in code order)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(exe)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    ras = []
    for i, line in enumerate(out):
        if re.search(r"\bcall\s+[0-9a-f]+ <({})@plt>".format("|".join(callees)), line):
            nxt = out[i + 1].split(":")[0].strip()
            ras.append(int(nxt, 16))
    return ras


def _mappings_for(exe):
    """The loader's mappings of a PIE executable at BASE: one per PT_LOAD."""
    info = symbols.elf_info(str(exe))
    rows = []
    for p_off, p_vaddr, _filesz, memsz in info.loads:
        start = BASE + (p_vaddr & ~0xFFF)
        end = BASE + p_vaddr + memsz
        rows.append((start, ((end + 0xFFF) & ~0xFFF) - start, p_off & ~0xFFF))
    return rows


def _profile(tmp_path, exe, allocs, extra_samples=(), faults=()):
    """allocs: [(return address, size)] → a profile with one allocation per call site."""
    w = profgen.ProfileWriter(tmp_path / "prof")
    w.manifest(cwd=str(tmp_path))
    w.topology([[0, 1]])
    maps = _mappings_for(exe)
    w.table("mappings", time=[0] * len(maps), pid=[9] * len(maps), start=[m[0] for m in maps],
            len=[m[1] for m in maps], pgoff=[m[2] for m in maps], prot=[5] * len(maps), flags=[2] * len(maps),
            path=[str(exe)] * len(maps))
    heap = 0x7F00_0000_0000
    addrs = [heap + i * 0x1000_0000 for i in range(len(allocs))]
    k = len(allocs)
    w.table("objects", time=[1] * k, free_time=[0] * k, pid=[9] * k, tid=[9] * k, addr=addrs,
            size=[s for _, s in allocs], kind=[1] * k, stack=list(range(1, k + 1)), prev=[0] * k)
    w.table("stack_frames", stack=list(range(1, k + 1)), depth=[0] * k, ip=[BASE + ra for ra, _ in allocs])
    s_addr = [a + 64 for a in addrs] + list(extra_samples)
    n = len(s_addr)
    w.table("samples", time=list(range(10, 10 + n)), pid=[9] * n, tid=[9] * n, cpu=[0] * n, ip=[0] * n,
            addr=s_addr, access=[1] * n)
    if faults:
        nf = len(faults)
        w.table("faults", time=[5] * nf, pid=[9] * nf, tid=[9] * nf, cpu=[0] * nf,
                ip=[BASE + ip for ip, _ in faults], addr=[a for _, a in faults], flags=[3] * nf, source=[1] * nf)
    return w.path, addrs


def _calls(exe, callee):
    """Return addresses of the calls to ``callee`` (local or @plt), in code order."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(exe)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    return [int(out[i + 1].split(":")[0].strip(), 16) for i, line in enumerate(out)
            if re.search(rf"\bcall\s+[0-9a-f]+ <{callee}(@plt)?>", line)]


def _stacks_profile(tmp_path, exe, stacks):
    """A profile with one 1 MiB allocation per call stack (return addresses, innermost
    first) and a sample in each: (profile path, the allocations' addresses)."""
    w = profgen.ProfileWriter(tmp_path / "prof")
    w.manifest(cwd=str(tmp_path))
    w.topology([[0, 1]])
    maps = _mappings_for(exe)
    w.table("mappings", time=[0] * len(maps), pid=[9] * len(maps), start=[m[0] for m in maps],
            len=[m[1] for m in maps], pgoff=[m[2] for m in maps], prot=[5] * len(maps),
            flags=[2] * len(maps), path=[str(exe)] * len(maps))
    addrs = [0x7F00_0000_0000 + i * 0x1000_0000 for i in range(len(stacks))]
    k = len(stacks)
    w.table("objects", time=[1] * k, free_time=[0] * k, pid=[9] * k, tid=[9] * k, addr=addrs,
            size=[1 << 20] * k, kind=[1] * k, stack=list(range(1, k + 1)), prev=[0] * k)
    rows = [(i + 1, d, BASE + ra) for i, st in enumerate(stacks) for d, ra in enumerate(st)]
    w.table("stack_frames", stack=[r[0] for r in rows], depth=[r[1] for r in rows],
            ip=[r[2] for r in rows])
    w.table("samples", time=list(range(10, 10 + k)), pid=[9] * k, tid=[9] * k, cpu=[0] * k,
            ip=[0] * k, addr=[a + 64 for a in addrs], access=[1] * k)
    return w.path, addrs
