"""Values of thread-local arrays followed into the frame (analyzer/frames.py): the
executable's code addresses its thread-local variables as the thread pointer plus a
constant (the local-exec TLS model) -- `mov %fs:0, %rdx; lea -0x1790(%rdx), %rdx`, a
constant read `%fs:0xc0(%r10)`, or added to the thread pointer -- and NPB BT keeps the
elements of its threadprivate `fjac`/`njac`/`lhs` it read in frame slots: those slots
are the arrays' copies and temporaries, as for any array whose pointer is known."""

import pytest

from numaprof.analyzer import datatype, frames, tls

RAX, RDX, RCX, R8, R10, RSP = 0, 1, 2, 8, 10, 7
XMM3, XMM4, XMM5 = 20, 21, 22

# 0x1000 mov %fs:0,%rdx; lea -0x1790(%rdx),%rdx        rdx = tp - 0x1790: fjac
# 0x1010 mov $-0x65c0,%r10                             r10 = njac's offset
# 0x1017 mov %fs:0,%rax; lea 0x190(%r10,%rax,1),%rcx   rcx = tp - 0x65c0 + 0x190: njac
# 0x1028 mov $-0x5230,%r8; add %fs:0,%r8               r8 = tp - 0x5230: lhs
# 0x1038 loop: movsd 0x28(%rdx),%xmm3                  an element of fjac
# 0x103d movsd %fs:0xc0(%r10),%xmm4                    of njac
# 0x1047 mulsd 0x8(%rcx),%xmm4                         njac * njac: njac's temporary
# 0x104c movsd (%r8),%xmm5                             of lhs
# 0x1051 movsd %xmm3,0x10(%rsp); %xmm4,0x18(%rsp); %xmm5,0x20(%rsp)
# 0x1063 add $0xc8,%rdx; add $0xc8,%rcx; cmp %rdx,%rcx; jne loop; ret
CODE = bytes.fromhex(
    "64488b142500000000488d9270e8ffff49c7c2409affff64488b042500000000498d8c0290010000"
    "49c7c0d0adffff644c03042500000000f20f105a2864f2410f10a2c0000000f20f596108f2410f10"
    "28f20f115c2410f20f11642418f20f116c24204881c2c80000004881c1c80000004839d175c2c3")

VARIABLES = [tls.Variable("__work_MOD_njac", "njac", -0x65c0, 5000, None),
             tls.Variable("__work_MOD_lhs", "lhs", -0x5230, 15000, None),
             tls.Variable("__work_MOD_fjac", "fjac", -0x1790, 5000, None)]


@pytest.fixture
def fi(monkeypatch):
    def variable_at(info, k):
        return next((v for v in VARIABLES if v.start <= k < v.start + v.size), None)

    monkeypatch.setattr(frames.tls, "variable_at", variable_at)
    insns = datatype.decode(CODE, 0x1000)
    f = frames._Func("x_solve", 0, None, [], [(0x1000, 0x1000 + len(CODE))],
                     code=(insns, [i.addr for i in insns]))
    fi = frames.FrameIndex.__new__(frames.FrameIndex)
    fi._busy, fi._at, fi.usable, fi._work = set(), {}, True, datatype.WORK
    fi.info = type("Info", (), {"path": "/bin/bt"})()
    fi._function_at = lambda pc: f
    fi._held_at = lambda pc, reg: None
    fi._cfa_offset = lambda pc, reg, disp: disp - 0x80  # CFA = rsp + 0x80
    fi.frame_register = lambda pc, reg: reg == RSP
    fi.f = f
    return fi


def test_the_thread_pointer_and_constants_decode():
    insns = datatype.decode(CODE, 0x1000)
    by = {i.addr: i for i in insns}
    assert (by[0x1000].op, by[0x1000].dst) == ("tp", RDX)
    assert (by[0x1010].op, by[0x1010].dst, by[0x1010].disp) == ("const", R10, -0x65c0)
    assert (by[0x1017 + 9].op, by[0x1017 + 9].base, by[0x1017 + 9].index, by[0x1017 + 9].scale) == (
        "lea", R10, RAX, 1)
    assert (by[0x102f].op, by[0x102f].dst) == ("addtp", R8)
    assert (by[0x103d].op, by[0x103d].base, by[0x103d].disp, by[0x103d].tls) == ("vload", R10, 0xc0, True)
    assert not by[0x1038].tls and by[0x1038].op == "vload"
    assert (by[0x1063].op, by[0x1063].disp) == ("step", 0xc8)
    # a word of the TCB other than its self-pointer (the stack protector's canary) is no
    # thread pointer: a load from %fs:0x28
    canary = datatype.decode(bytes.fromhex("64488b042528000000"), 0)[0]
    assert canary.op == "load" and canary.tls and canary.base == -1 and canary.disp == 0x28


def test_offsets_from_the_thread_pointer_are_followed(fi):
    assert fi._tracked(0x1038, RDX).key == (frames.TP, -0x1790)
    assert fi._tracked(0x1038, RCX).key == (frames.TP, -0x65c0 + 0x190)
    assert fi._tracked(0x1038, R8).key == (frames.TP, -0x5230)
    assert fi._tracked(0x1038, R10).key == (frames.CONST, -0x65c0)
    # to the rest of the analyzer they are no pointer: their accesses are named by address
    assert fi.origin(0x1038, RDX) is None and fi.origin(0x1038, R10) is None


def test_round_the_loop_a_pointer_moved_along_one_array_is_that_array(fi):
    """rdx at the loop's head: tp - 0x1790 on the way in, 0xc8 further on the back edge;
    both in fjac, so they agree (the first); two arrays' would not."""
    o = fi._reaching(fi.f, 0x1038, RDX, 10)
    assert o is not None and o.key == (frames.TP, -0x1790), o
    assert fi._same_tls(-0x1790, -0x1790 + 0xc8) and not fi._same_tls(-0x1790, -0x65c0)


def test_slots_of_thread_local_elements_are_their_arrays_copies(fi):
    got = {slot: fi.slot_value(0x1063, slot - 0x80) for slot in (0x10, 0x18, 0x20)}
    assert got[0x10] == frames.Copy("fjac", ("tls", "/bin/bt", "__work_MOD_fjac"), "x_solve", 8), got
    assert got[0x18] == frames.Copy("njac", ("tls", "/bin/bt", "__work_MOD_njac"), "x_solve", 8, computed=True)
    assert got[0x20] == frames.Copy("lhs", ("tls", "/bin/bt", "__work_MOD_lhs"), "x_solve", 8), got


def test_no_thread_local_variable_there_names_nothing(fi, monkeypatch):
    monkeypatch.setattr(frames.tls, "variable_at", lambda info, k: None)
    assert all(fi.slot_value(0x1063, slot - 0x80) is None for slot in (0x10, 0x18, 0x20))


def test_sums_of_offsets():
    tp, c = frames._offset(frames.TP, -0x100), frames._offset(frames.CONST, 0x10)
    ptr = frames.Origin("u", ("var", "u"), "", None, "register")
    assert frames._sum(tp, c).key == (frames.TP, -0xf0)
    assert frames._sum(c, tp).key == (frames.TP, -0xf0)
    assert frames._sum(c, c, 8).key == (frames.CONST, 0x90)
    assert frames._sum(c, ptr) is ptr and frames._sum(ptr, c) is ptr
    assert frames._sum(tp, tp) is None and frames._sum(tp, ptr) is None and frames._sum(c, tp, 8) is None
    assert frames._moved(tp, 8).key == (frames.TP, -0xf8) and frames._moved(ptr, 8) is ptr
