"""analyzer/libstate.py: a system library's own stack frame, from the sampled stack
pointer (less the red zone) to the canonical frame address its .eh_frame gives."""

import os

import numpy as np
import pytest

from numaprof.analyzer import libstate, symbols

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
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


def _locked_instruction(info):
    """The link-time address of fgets' first `lock`-prefixed instruction in libc, and of a
    plain load or store of it."""
    import capstone
    from capstone import x86

    names = [name for name, _ in info.func_info]
    k = next((i for i, n in enumerate(names) if n in ("fgets", "_IO_fgets")), None)
    if k is None:
        pytest.skip("no fgets symbol")
    lo, size = int(info.func_addr[k]), info.func_info[k][1]
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    locked = plain = None
    for insn in md.disasm(info._code(lo, size), lo):
        mem = any(o.type == x86.X86_OP_MEM for o in insn.operands)
        if mem and x86.X86_PREFIX_LOCK in insn.prefix and locked is None:
            locked = insn.address
        elif mem and insn.mnemonic == "mov" and plain is None:
            plain = insn.address
    if locked is None or plain is None:
        pytest.skip("fgets takes no lock here")
    return locked, plain


def test_a_librarys_lock_and_the_structure_below_it_are_its_own():
    """glibc keeps a stream's lock right after its FILE (struct locked_FILE): an atomic
    read-modify-write by the library on memory no object of the program's holds is its
    lock, and the library's accesses to the LOCK_REACH bytes below it its stream's
    fields; a buffer after it, or far from any lock, is not the library's."""
    if not os.path.exists(LIBC):
        pytest.skip("no glibc at " + LIBC)
    info, resolver = _mapped(LIBC)
    locked, plain = _locked_instruction(info)
    lock = 0x5555_0000_1380  # the stream's lock word, in the heap
    addr = np.array([lock, lock - 192, lock - 8, lock + 128, lock - 4096], dtype=np.uint64)
    ip = np.array([locked, plain, plain, plain, plain], dtype=np.uint64) + np.uint64(BASE)
    pid = np.ones(len(addr), dtype=np.int64)
    cand = np.ones(len(addr), dtype=bool)
    got = libstate._around_locks(resolver, pid, ip, addr, cand)
    assert got.tolist() == [True, True, True, False, False]
    # without the lock's own sample, nothing says the memory is the library's
    assert not libstate._around_locks(resolver, pid[1:], ip[1:], addr[1:], cand[1:]).any()
    # nor in another process
    assert libstate._around_locks(resolver, np.array([1, 2, 2]), ip[:3], addr[:3], cand[:3]).tolist() == \
        [True, False, False]


def test_a_threads_descriptor_is_from_its_pointer_up():
    """glibc's `struct pthread` is at and above the thread pointer (the stack guard at
    %fs:0x28, the cancellation state); the TLS block below it, another thread's or
    another process's memory are not in it."""
    tp1, tp2 = 0x7F00_0000_8000, 0x7F00_0010_8000
    addr = np.array([tp1, tp1 + 0x28, tp1 + libstate.DESCRIPTOR - 1, tp1 + libstate.DESCRIPTOR, tp1 - 8,
                     tp2 + 0x300, tp2 + 0x300], dtype=np.uint64)
    pid = np.array([1, 1, 1, 1, 1, 1, 2])
    got = libstate._descriptors({1: [tp2, tp1, tp1]}, pid, addr)
    assert got.tolist() == [True, True, True, False, False, True, False]


def _vaddr_of(info, needle: bytes) -> int:
    """The link-time address of ``needle`` in a loaded segment of the file."""
    with open(info.path, "rb") as f:
        data = f.read()
    off = data.find(needle)
    if off < 0:
        pytest.skip(f"{needle!r} not in {info.path}")
    for p_off, p_vaddr, filesz, _ in info.loads:
        if p_off <= off < p_off + filesz:
            return p_vaddr + off - p_off
    pytest.skip(f"{needle!r} not in a loaded segment")


def test_a_string_literal_is_told_by_its_bytes():
    """A format string the program passes to scanf or printf, in its read-only data at
    no symbol: printable characters ended by a NUL, the address on one or on the NUL;
    code bytes, or a NUL between binary bytes, are not."""
    if not os.path.exists(LIBC):
        pytest.skip("no glibc at " + LIBC)
    info, resolver = _mapped(LIBC)
    text = b"Fatal glibc error: "
    v = _vaddr_of(info, text)
    assert libstate.string_literal(resolver, 1, BASE + v)
    assert libstate.string_literal(resolver, 1, BASE + v + 6)
    names = [name for name, _ in info.func_info]
    k = next((i for i, n in enumerate(names) if n in ("fgets", "_IO_fgets")), None)
    if k is None:
        pytest.skip("no fgets symbol")
    assert not libstate.string_literal(resolver, 1, BASE + int(info.func_addr[k]) + 4)
    assert not libstate.string_literal(resolver, 1, BASE - 0x100000)  # nothing mapped there


def test_what_only_the_library_touched_is_its_own():
    """A block the library's code allocated (stdio's stream buffer, its allocation
    stack's first frame in libc), or heap memory in no object of the program's, that no
    other code touched in the whole run is the library's; a sample of the program's
    code anywhere in it, or a block the program allocated, keeps it the program's."""
    from numaprof.analyzer import attribution as att
    from numaprof.analyzer.objects import Obj
    from numaprof.analyzer.runtime import code_mappings

    if not os.path.exists(LIBC):
        pytest.skip("no glibc at " + LIBC)
    info, resolver = _mapped(LIBC)
    code = code_mappings(_mt(info), lambda p: True)[0]
    in_libc = BASE + int(info.func_addr[0])
    heap = 0x5555_0000_0000
    objs = [Obj("heap", ("h", 0), 1, heap, 4096, stack=7),          # malloc'd by libc
            Obj("heap", ("h", 1), 1, heap + 8192, 4096, stack=8),   # malloc'd by the program
            Obj("mapping", ("m", 0), 1, heap + 0x10000, 0x21000, path="[heap]"),
            Obj("heap", ("h", 2), 1, heap + 0x40000, 4096, stack=7)]  # libc's, but the program reads it
    frames_of = {7: [in_libc], 8: [0x401000]}
    ivs = att.Intervals(np.ones(4, dtype=np.int64),
                        np.array([heap, heap + 8192, heap + 0x10000, heap + 0x40000], dtype=np.uint64),
                        np.array([heap + 4096, heap + 12288, heap + 0x31000, heap + 0x41000], dtype=np.uint64),
                        np.zeros(4, dtype=np.uint64), np.full(4, att.NEVER, dtype=np.uint64),
                        np.arange(4, dtype=np.int64))
    # samples: 0-3 by libc on each object, 4 by the program on the last block
    addr = np.array([heap + 64, heap + 8192 + 64, heap + 0x10000 + 64, heap + 0x40000 + 64,
                     heap + 0x40000 + 128], dtype=np.uint64)
    pid = np.ones(5, dtype=np.int64)
    idx = np.arange(4)
    where = np.arange(4, dtype=np.int64)
    got = libstate._only_theirs(where, np.zeros(4, dtype=bool), objs, ivs, frames_of, code, pid, addr, idx,
                                resolver)
    assert got.tolist() == [True, False, True, False]
    # without the program's sample, the last block is the library's too
    got = libstate._only_theirs(where, np.zeros(4, dtype=bool), objs, ivs, frames_of, code, pid[:4],
                                addr[:4], idx, resolver)
    assert got.tolist() == [True, False, True, True]
    # the sample in the last block by code that is no program's (the OpenMP runtime's:
    # libgomp's GOMP_parallel skidded into stdio's buffer in a bfs run) does not keep it
    not_program = np.array([True, True, True, True, True])
    got = libstate._only_theirs(where, np.zeros(4, dtype=bool), objs, ivs, frames_of, code, pid, addr, idx,
                                resolver, not_program)
    assert got.tolist() == [True, False, True, True]


def _mt(info):
    rows = [(BASE + (p_vaddr & symbols.PAGE_MASK), p_off & symbols.PAGE_MASK, filesz)
            for p_off, p_vaddr, filesz, _ in info.loads]
    return {"pid": [1] * len(rows), "start": [r[0] for r in rows], "len": [max(r[2], 4096) + 4096 for r in rows],
            "pgoff": [r[1] for r in rows], "path": [info.path] * len(rows), "time": [0] * len(rows),
            "prot": [5] * len(rows)}


def test_blocks_the_library_allocated_are_told_by_their_first_frame():
    """A heap object whose allocation stack's first frame is in a system library's code
    (the dynamic linker's link maps, stdio's buffers) is the library's allocation; one
    the program's code allocated, one with no stack and a mapping are not."""
    from numaprof.analyzer.objects import Obj

    if not os.path.exists(LIBC):
        pytest.skip("no glibc at " + LIBC)
    info, resolver = _mapped(LIBC)
    in_libc = BASE + int(info.func_addr[0])
    objs = [Obj("heap", ("h", 0), 1, 0x5555_0000_0000, 4096, stack=7),
            Obj("heap", ("h", 1), 1, 0x5555_0000_2000, 4096, stack=8),
            Obj("heap", ("h", 2), 1, 0x5555_0000_4000, 4096),
            Obj("mapping", ("m", 0), 1, 0x5555_0000_0000, 0x21000, path="[heap]")]
    got = libstate.allocated_by_library(_mt(info), {7: [in_libc], 8: [0x401000]}, objs, resolver)
    assert got.tolist() == [True, False, False, False, False]
    # through a function that allocates for its caller (strdup): the caller's
    names = [name for name, _ in info.func_info]
    k = next((i for i, n in enumerate(names) if n.split("@")[0] in ("strdup", "__strdup")), None)
    if k is not None:
        in_strdup = BASE + int(info.func_addr[k]) + 8
        got = libstate.allocated_by_library(_mt(info), {7: [in_strdup, 0x401000], 8: [in_strdup, in_libc]},
                                            objs[:2], resolver)
        assert got.tolist() == [False, True, False]
    # C++'s operator new allocates for its caller: a `new` in the program is the program's
    if os.path.exists(LIBSTDCXX):
        cxx, cxx_resolver = _mapped(LIBSTDCXX)
        names = [name for name, _ in cxx.func_info]
        k = next((i for i, n in enumerate(names) if n.split("@")[0] == "_Znwm"), None)
        other = next((i for i, n in enumerate(names) if not n.startswith(("_Znw", "_Zna"))), None)
        if k is not None and other is not None:
            in_new = BASE + int(cxx.func_addr[k]) + 8
            in_other = BASE + int(cxx.func_addr[other]) + 8
            got = libstate.allocated_by_library(_mt(cxx), {7: [in_new, 0x401000], 8: [in_new, in_other]},
                                                objs[:2], cxx_resolver)
            assert got.tolist() == [False, True, False]
    assert libstate.library_code(_mt(info), np.ones(2, dtype=np.int64), np.array([in_libc, 0x401000], dtype=np.uint64),
                                 np.zeros(2, dtype=np.uint64)).tolist() == [True, False]


def test_the_programs_samples_on_a_librarys_block_keep_the_name_the_code_gives():
    """A sample of the program's code on a block the library allocated (or the gap the
    analyzer gave it, where the program's unsampled blocks are: miniMD's ForceLJ tables
    among the dynamic linker's link maps) keeps the variable its register or type names;
    one the code did not name, or named by frame only, goes back to the block."""
    from numaprof.analyzer import walked
    from numaprof.analyzer.objects import Obj

    objs = [Obj("heap", ("h", 0), 1, 0x1000, 4096, stack=7),
            Obj("heap", ("var", "sigma6"), 1, 0x1100, 128, name="ForceLJ::sigma6", attribution="type"),
            Obj("stack", ("var", "t"), 1, 0x7ffd0000, 8, name="t", attribution="frame")]
    idx = np.arange(3)
    was_obj = np.zeros(3, dtype=np.int64)
    was_iv = np.array([5, 5, 5], dtype=np.int64)
    a_obj = np.array([1, 0, 2], dtype=np.int64)  # after the attribution by code
    a_iv = np.array([40, 5, 41], dtype=np.int64)
    walked.named_or_back(objs, idx, was_obj, was_iv, a_obj, a_iv)
    assert a_obj.tolist() == [1, 0, 0] and a_iv.tolist() == [40, 5, 5]
