"""analyzer/libstate.py: a system library's own stack frame, from the sampled stack
pointer (less the red zone) to the canonical frame address its .eh_frame gives."""

import os

import numpy as np
import pytest

from numaprof.analyzer import libstate, symbols

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
BASE = 0x7F00_0000_0000


def _mapped(path):
    info = symbols.elf_info(path)
    if info is None:
        pytest.skip(f"{path} not readable")
    rows = [(BASE + (p_vaddr & symbols.PAGE_MASK), p_off & symbols.PAGE_MASK, filesz)
            for p_off, p_vaddr, filesz, _ in info.loads]
    mt = {"pid": [1] * len(rows), "start": [r[0] for r in rows], "len": [max(r[2], 4096) + 4096 for r in rows],
          "pgoff": [r[1] for r in rows], "path": [path] * len(rows), "time": [0] * len(rows)}
    return info, symbols.CodeResolver(symbols.Mappings(mt))


def test_the_frame_is_from_the_stack_pointer_to_the_cfa():
    if not os.path.exists(LIBC):
        pytest.skip("no glibc at " + LIBC)
    info, resolver = _mapped(LIBC)
    names = [name for name, _ in info.func_info]
    k = next((i for i, n in enumerate(names) if n in ("printf", "__printf", "_IO_printf")), None)
    if k is None:
        pytest.skip("no printf symbol")
    entry = int(info.func_addr[k])
    ip = BASE + entry  # at the entry: the CFA is the stack pointer + 8 (the return address)
    assert resolver.elf_address(1, ip)[1] == entry
    sp = 0x7FFD_0000_1000
    addr = np.array([sp - 8, sp, sp + 8, sp + 64, sp - 512], dtype=np.uint64)
    n = len(addr)
    regs = {"sp": np.full(n, sp, dtype=np.uint64), "bp": np.zeros(n, dtype=np.uint64)}
    own = libstate._own_frame(resolver, regs, np.ones(n, dtype=np.int64), np.full(n, ip, dtype=np.uint64),
                              addr, np.arange(n))
    # the red zone and the return address's slot are its; the caller's frame and what is
    # far below the stack pointer are not
    assert own.tolist() == [True, True, False, False, False]
