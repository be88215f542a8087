"""Attribution by code (analyzer/frames.py FrameIndex.origin, analyzer/varattr.py): an
address that only a whole mapping holds (`[heap]`: small allocations the shim does not
track) is named by what the instruction accesses -- a pointer variable, a structure's
member, a C++ class's std::vector member -- in real binaries built with gcc / g++ at -O2
and -O3.  The charged instruction of each sample is taken from objdump's disassembly of
the function (the first floating-point load through a general register), its base
register from the instruction text."""

import re
import subprocess

import numpy as np
import profgen  # noqa: E402
import pytest
from helpers import build_program

from numaprof.analyzer import analyze, symbols, varattr  # noqa: E402

C_GRID = r"""
#include <stdio.h>
#include <stdlib.h>

struct grid {
    long n;
    double *energy;
    double *xs;
};

__attribute__((noinline)) double total(const struct grid *g)
{
    double s = 0.0;
    for (long i = 0; i < g->n; i++)
        s += g->energy[i] * 2.0;
    return s;
}

__attribute__((noinline)) double strided(const double *tw, int n, int stride)
{
    double s = 0.0;
    for (int k = 0; k < n; k++)
        s += tw[k * stride];
    return s;
}

/* the elements' address as an offset plus a member read from memory, `add 8(%rdi),%rax`
 * (what gfortran emits for an array component's elements inside a loop nest) */
__attribute__((noinline)) double shifted(const struct grid *g, long i)
{
    const double *p;
    __asm__("lea (,%1,8), %0\n\tadd 8(%2), %0" : "=&r"(p) : "r"(i), "r"(g));
    return p[0] * 3.0;
}

/* a pointer kept in a vector register between its load and its use, as gcc
 * -march=znver4 keeps pointers when short of general registers (CloverLeaf's viscosity
 * kernel: `vmovq %r12,%xmm3` ... `vmovq %xmm3,%rcx`) */
__attribute__((noinline)) double parked(const struct grid *g, long i)
{
    const double *p;
    __asm__("mov 16(%1), %0\n\tvmovq %0, %%xmm3\n\tvmovdqa %%xmm3, %%xmm5\n\txor %0, %0\n\t"
            "vmovq %%xmm5, %0" : "=&r"(p) : "r"(g) : "xmm3", "xmm5");
    return p[i] * 3.0;
}

int main(int argc, char **argv)
{
    struct grid g = {1000 + argc, 0, 0};
    g.energy = malloc((size_t)g.n * sizeof *g.energy);
    g.xs = malloc((size_t)g.n * sizeof *g.xs);
    for (long i = 0; i < g.n; i++)
        g.energy[i] = g.xs[i] = (double)i;
    printf("%f %f %f %f\n", total(&g), strided(g.xs, 100, argc + 1), shifted(&g, argc), parked(&g, argc));
    return 0;
}
"""

C_STATIC = r"""
#include <stdio.h>
#include <stdlib.h>

struct grid {
    long n;
    double *energy;
    double *xs;
};

static double *table; /* a table small enough that the shim tracks no allocation of it */

__attribute__((noinline)) double lookups(const int *idx, int n)
{
    double s = 0.0;
    for (int k = 0; k < n; k++)
        s += table[idx[k]];
    return s;
}

/* a block reached only by a jump, after code that restores rbx (gcc puts a loop's rare
 * branch after the function's epilogue and return, as in Rodinia's streamcluster): what
 * lies above it in the code is not what ran before it */
__attribute__((noinline)) double detour(const struct grid *g, long i)
{
    double r;
    __asm__("mov 16(%1), %%rbx\n\t"
            "jmp 2f\n\t"
            "1: pop %%rbx\n\t"
            "jmp 1b\n\t"
            "2: movsd (%%rbx,%2,8), %0"
            : "=x"(r) : "r"(g), "r"(i) : "rbx", "memory");
    return r * 2.0;
}

int main(int argc, char **argv)
{
    int idx[4] = {0, 3, 1, 2};
    table = malloc(64 * sizeof *table);
    struct grid g = {64, 0, 0};
    g.xs = malloc(64 * sizeof *g.xs);
    for (int i = 0; i < 64; i++)
        table[i] = g.xs[i] = (double)i;
    printf("%f %f\n", lookups(idx, 4), detour(&g, argc));
    return 0;
}
"""

C_TYPEDEF = r"""
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    long n;
    double *energy;
} grid_t;

__attribute__((noinline)) double total(const grid_t *g)
{
    double s = 0.0;
    for (long i = 0; i < g->n; i++)
        s += g->energy[i] * 2.0;
    return s;
}

int main(int argc, char **argv)
{
    grid_t g = {1000 + argc, 0};
    g.energy = malloc((size_t)g.n * sizeof *g.energy);
    for (long i = 0; i < g.n; i++)
        g.energy[i] = (double)i;
    printf("%f\n", total(&g));
    return 0;
}
"""

CXX_MESH = r"""
#include <cstdio>
#include <vector>

class Mesh {
public:
    explicit Mesh(int n) : m_pos(n, 1.0), m_mass(n, 2.0) {}
    double moment() const;
private:
    std::vector<double> m_pos;
    std::vector<double> m_mass;
};

__attribute__((noinline)) double Mesh::moment() const
{
    double s = 0.0;
    for (std::size_t i = 0; i < m_pos.size(); i++)
        s += m_pos[i] * m_mass[i];
    return s;
}

int main(int argc, char **)
{
    Mesh m(1000 + argc);
    std::printf("%f\n", m.moment());
    return 0;
}
"""

BASE = 0x555555554000
HEAP = 0x555556000000
DWARF = {r: n for n, regs in enumerate([("rax", "eax"), ("rdx", "edx"), ("rcx", "ecx"), ("rbx", "ebx"),
                                        ("rsi", "esi"), ("rdi", "edi"), ("rbp", "ebp"), ("rsp", "esp")])
         for r in regs} | {f"r{k}": k for k in range(8, 16)}
_LOAD = re.compile(r"^\s*([0-9a-f]+):\s+(?:v?movsd|v?movupd|v?addsd|v?mulsd|v?movapd|v?addpd|v?mulpd)\s+"
                   r"(?:-?0x[0-9a-f]+)?\(%(\w+)(?:,%(\w+),(\d))?\)")


F_GRID = r"""
module fields
  implicit none
  type :: grid_t
    integer :: n
    double precision, allocatable :: energy(:)
    double precision, allocatable :: xs(:)
  end type grid_t
contains
  function total(g) result(s)
    type(grid_t), intent(in) :: g
    double precision :: s
    integer :: i
    s = 0.0d0
    do i = 1, g%n
      s = s + g%energy(i) * 2.0d0
    end do
  end function total
end module fields

program grid
  use fields
  implicit none
  type(grid_t) :: g
  integer :: i
  g%n = 1000 + command_argument_count()
  allocate(g%energy(g%n), g%xs(g%n))
  do i = 1, g%n
    g%energy(i) = dble(i)
    g%xs(i) = dble(2 * i)
  end do
  print *, total(g), sum(g%xs)
end program grid
"""


def _loads(exe, function):
    """(address, base register, index register or None) of the floating-point loads of
    ``function`` through a general register, in code order."""
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", str(exe)], capture_output=True,
                         text=True, check=True).stdout
    body = out.split(f"<{function}>:\n", 1)[1].split("\n\n", 1)[0]
    found = []
    for line in body.splitlines():
        m = _LOAD.match(line)
        if m and m.group(2) not in ("rip", "rsp", "rbp"):
            found.append((int(m.group(1), 16), m.group(2), m.group(3)))
    assert found, f"no load through a register in {function}:\n{body}"
    return found


def _profile(path, exe, accesses):
    """A soft-backend profile of ``exe`` loaded at BASE, a `[heap]` mapping, and one
    sample per (charged address, base register, index, address)."""
    info = symbols.elf_info(str(exe))
    w = profgen.ProfileWriter(path)
    w.manifest(cwd=str(path.parent))
    w.topology([[0, 1]])
    maps = [(BASE + (v & ~0xFFF), ((v + m + 0xFFF) & ~0xFFF) - (v & ~0xFFF), o & ~0xFFF, str(exe), 5)
            for o, v, _, m in info.loads] + [(HEAP, 1 << 20, 0, "[heap]", 3)]
    n = len(maps)
    w.table("mappings", time=[0] * n, pid=[7] * n, start=[m[0] for m in maps], len=[m[1] for m in maps],
            pgoff=[m[2] for m in maps], prot=[m[4] for m in maps], flags=[2] * n, path=[m[3] for m in maps])
    k = len(accesses)
    w.table("threads", pid=[7, 7], tid=[7, 8], comm=["prog", "prog"])
    w.table("samples", time=list(range(1000, 1000 + 10 * k, 10)), pid=[7] * k,
            tid=[7 + (i % 2) for i in range(k)], cpu=[i % 2 for i in range(k)],
            ip=[BASE + a[0] for a in accesses], addr=[a[3] for a in accesses], access=[1] * k, size=[8] * k,
            rule=[1] * k, sp=[0x7FFD00000000] * k, bp=[0x7FFD00000100] * k, insn_off=[0] * k,
            base_reg=[DWARF[a[1]] + 1 for a in accesses],
            index_reg=[DWARF[a[2]] + 1 if a[2] else 0 for a in accesses],
            base_off=[a[3] - a[4] for a in accesses])
    return path


def _samples(load, base_value, n=60, stride=8):
    pc, base, index = load
    if index:  # base + index * 8: the base register holds the array's start
        return [(pc, base, index, base_value + stride * i, base_value) for i in range(n)]
    # a pointer stepped through the array: it holds each element's address
    return [(pc, base, None, base_value + stride * i, base_value + stride * i) for i in range(n)]


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_structure_member_and_pointer_parameter(tmp_path, opt):
    """`g->energy[i]` through a register loaded from `8(%rdi)` (g a `struct grid *`): the
    type and member, `struct grid.energy`; `tw[k * stride]` through `tw`'s register, or
    a copy of it: the parameter `tw`."""
    exe = build_program(tmp_path, "grid.c", C_GRID, "gcc", ["-g", opt], ("objdump",))
    energy = _samples(_loads(exe, "total")[0], HEAP + 0x1000)
    tw = _samples(_loads(exe, "strided")[0], HEAP + 0x40000, stride=24)
    a = analyze(_profile(tmp_path / "p", exe, energy + tw))
    by_name = {o.name: o for o in a.objects}
    assert "struct grid.energy" in by_name and "tw" in by_name, [(o.name, o.samples) for o in a.objects]
    e, t = by_name["struct grid.energy"], by_name["tw"]
    assert (e.kind, e.attribution, e.samples) == ("heap", "type", len(energy))
    assert e.site.startswith("struct grid@grid.c:")
    assert (t.kind, t.attribution, t.samples) == ("heap", "register", len(tw))
    assert t.site.startswith("strided@grid.c:")
    assert e.address <= HEAP + 0x1000 and t.address <= HEAP + 0x40000
    assert not any(o.name == "[heap]" and o.samples for o in a.objects)
    assert a.profile.outside_objects == 0


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_a_typedef_names_an_anonymous_structure(tmp_path, opt):
    """`typedef struct { ... } grid_t;` (miniAMR's `block`): the member is named after the
    typedef, in C's notation, `grid_t.energy`, not `energy` of a `struct (anonymous)`."""
    exe = build_program(tmp_path, "typedef.c", C_TYPEDEF, "gcc", ["-g", opt], ("objdump",))
    energy = _samples(_loads(exe, "total")[0], HEAP + 0x1000)
    a = analyze(_profile(tmp_path / "p", exe, energy))
    named = [(o.name, o.attribution, o.site.split("@")[0], o.samples) for o in a.objects if o.samples]
    assert named == [("grid_t.energy", "type", "grid_t", 60)], named


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_member_added_to_an_offset(tmp_path, opt):
    """A register set by `lea (,i,8)` and then `add 8(%rdi)` (g->energy added from
    memory): the member read, `struct grid.energy`, not the offset, names the access."""
    exe = build_program(tmp_path, "grid.c", C_GRID, "gcc", ["-g", opt], ("objdump",))
    load = _loads(exe, "shifted")[0]
    assert load[2] is None  # through the register alone: (%rax)
    accesses = [(load[0], load[1], None, HEAP + 0x1000 + 8 * i, HEAP + 0x1000 + 8 * i) for i in range(60)]
    a = analyze(_profile(tmp_path / "p", exe, accesses))
    named = [(o.name, o.attribution, o.samples) for o in a.objects if o.samples]
    assert named == [("struct grid.energy", "type", 60)], named


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_pointer_kept_in_a_vector_register(tmp_path, opt):
    """`g->xs` loaded, moved to xmm3, copied to xmm5, back into a general register that
    was cleared in between: the walk follows the vector registers to the member read."""
    exe = build_program(tmp_path, "grid.c", C_GRID, "gcc", ["-g", opt], ("objdump",))
    load = _loads(exe, "parked")[0]
    accesses = [(load[0], load[1], load[2], HEAP + 0x2000 + 8 * i, HEAP + 0x2000) for i in range(60)]
    a = analyze(_profile(tmp_path / "p", exe, accesses))
    named = [(o.name, o.attribution, o.samples) for o in a.objects if o.samples]
    assert named == [("struct grid.xs", "type", 60)], named


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_pointer_loaded_from_a_static_variable(tmp_path, opt):
    """`table[idx[k]]` through a register loaded by `mov table(%rip)`: the static pointer
    names the array it points to, declared at its line (before: `[heap]`)."""
    exe = build_program(tmp_path, "static.c", C_STATIC, "gcc", ["-g", opt], ("objdump",))
    load = _loads(exe, "lookups")[-1]
    accesses = [(load[0], load[1], load[2], HEAP + 0x3000 + 8 * (i * 7 % 64), HEAP + 0x3000) for i in range(60)]
    a = analyze(_profile(tmp_path / "p", exe, accesses))
    named = [(o.name, o.attribution, o.site, o.samples) for o in a.objects if o.samples]
    line = next(k for k, text in enumerate(C_STATIC.splitlines(), 1) if text.startswith("static double *table"))
    assert named == [("table", "register", f"static pointer@static.c:{line}", 60)], named


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_block_reached_by_a_jump_takes_the_registers_one_definition(tmp_path, opt):
    """A load in a block that only a jump reaches, below a `pop %rbx` that never runs
    before it: rbx's one definition in the function, `mov 16(%rdi), %rbx` (g->xs), names
    it, not the pop above it in the code."""
    exe = build_program(tmp_path, "static.c", C_STATIC, "gcc", ["-g", opt], ("objdump",))
    load = _loads(exe, "detour")[0]
    assert load[1] == "rbx", load
    accesses = [(load[0], load[1], load[2], HEAP + 0x5000 + 8 * i, HEAP + 0x5000) for i in range(60)]
    a = analyze(_profile(tmp_path / "p", exe, accesses))
    named = [(o.name, o.attribution, o.samples) for o in a.objects if o.samples]
    assert named == [("struct grid.xs", "type", 60)], named


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_cxx_vector_members(tmp_path, opt):
    """`m_pos[i] * m_mass[i]` in `Mesh::moment`: the data pointers are loaded from
    `this`; the accesses are named by the class and member, `Mesh::m_pos` and
    `Mesh::m_mass`, not by std::vector's own members."""
    exe = build_program(tmp_path, "mesh.cpp", CXX_MESH, "g++", ["-g", opt], ("objdump",))
    loads = _loads(exe, "Mesh::moment() const")
    assert len(loads) >= 2
    pos = _samples(loads[0], HEAP + 0x2000)
    mass = _samples(loads[1], HEAP + 0x8000)
    a = analyze(_profile(tmp_path / "p", exe, pos + mass))
    names = {o.name: o for o in a.objects if o.samples}
    assert set(names) == {"Mesh::m_pos", "Mesh::m_mass"}, [(o.name, o.samples) for o in a.objects]
    assert names["Mesh::m_pos"].samples == len(pos) and names["Mesh::m_mass"].samples == len(mass)
    assert {o.attribution for o in names.values()} == {"type"}
    assert all(o.site.startswith("Mesh@mesh.cpp:") for o in names.values())


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_fortran_allocatable_component(tmp_path, opt):
    """`g%energy(i)` of a derived type's allocatable component: the elements' address is
    the first word of the component's descriptor, loaded from `g` (`mov 0x8(%rdi)`, then
    offset by the descriptor's `offset` word): named by the type and component,
    `grid_t%energy`, as a C structure's pointer member is."""
    exe = build_program(tmp_path, "grid.f90", F_GRID, "gfortran", ["-g", opt, "-fno-inline"], ("objdump",))
    energy = _samples(_loads(exe, "__fields_MOD_total")[0], HEAP + 0x3000)
    a = analyze(_profile(tmp_path / "p", exe, energy))
    named = [o for o in a.objects if o.samples]
    assert [(o.name, o.kind, o.attribution, o.samples) for o in named] == \
        [("grid_t%energy", "heap", "type", len(energy))], [(o.name, o.samples) for o in a.objects]
    assert named[0].site.startswith("grid_t@grid.f90:")


F_RELAX = r"""
subroutine relax(n, x, b, r, idx)
  implicit none
  integer, intent(in) :: n
  double precision, intent(inout) :: x(n)
  double precision, intent(in) :: b(n)
  double precision, intent(out) :: r(n)
  integer, intent(in) :: idx(n)
  integer :: i
  !$omp parallel do schedule(static)
  do i = 1, n
    r(i) = b(i) - 0.5d0 * x(idx(i))
  end do
  !$omp end parallel do
end subroutine relax

program ws
  implicit none
  integer, parameter :: n = 1000
  double precision :: work(3 * n)
  integer :: idx(n), i
  do i = 1, n
    idx(i) = mod(7 * i, n) + 1
  end do
  work = 1.0d0
  call relax(n, work(1), work(n + 1), work(2 * n + 1), idx)
  print *, sum(work)
end program ws
"""


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_fortran_arguments_shared_with_an_openmp_region(tmp_path, opt):
    """In the outlined body of an `!$omp parallel do`, a Fortran subroutine's array
    arguments are read from the block its caller filled (`mov 0x8(%rbx),%rdi`; their
    DWARF locations `DW_OP_breg3 (rbx): 0; DW_OP_plus_uconst: 8`): the accesses through
    those registers are named by the arguments, `b` and `x` (before: nothing)."""
    exe = build_program(tmp_path, "ws.f90", F_RELAX, "gfortran", ["-g", opt, "-fopenmp"], ("objdump",))
    loads = _loads(exe, "relax_._omp_fn.0")
    assert len(loads) >= 2, loads
    first = _samples(loads[0], HEAP + 0x1000)
    second = _samples(loads[1], HEAP + 0x9000)
    a = analyze(_profile(tmp_path / "p", exe, first + second))
    named = {o.name: o for o in a.objects if o.samples}
    assert set(named) == {"b", "x"}, [(o.name, o.samples) for o in a.objects]
    assert all(o.attribution == "register" and o.samples == 60 for o in named.values())
    # which register each argument was loaded into, as the code says (x is the block's
    # second field, b its third: n, x, b, r, idx)
    body = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(exe)], capture_output=True, text=True,
                          check=True).stdout.split("<relax_._omp_fn.0>:\n", 1)[1].split("\n\n", 1)[0]
    field = {m.group(2): {"0x8": "x", "0x10": "b"}[m.group(1)]
             for m in re.finditer(r"mov\s+(0x8|0x10)\(%r\w+\),%(\w+)", body)}
    if loads[0][1] in field:
        assert named[field[loads[0][1]]].address <= HEAP + 0x1000 < named[field[loads[0][1]]].address + 4096


def _var_samples(region, stack_addr=False):
    n = len(region)
    z = np.zeros(n, dtype=np.int64)
    addr = np.arange(n, dtype=np.uint64) * 64 + (0x7ff000000000 if stack_addr else 0x1000000)
    return varattr.Samples(pid=z + 1, tid=z + 1, time=z, ip=z, addr=addr, size=z + 8, sp=z + 1,
                           bp=z, insn_off=z, base_reg=z, base_off=z, region=np.asarray(region))


def _var_found(names_and_samples):
    f = varattr._Found()
    for name, smp in names_and_samples:
        k = f.object(("t", name), name, "main@m.c:1", varattr.TYPE)
        f.add(np.asarray(smp, dtype=np.int64), k, np.asarray(smp) * 64 + 0x1000000, 0, -1)
    return f


def test_one_grid_reached_through_two_pointers_is_one_object():
    """multigrid's rows read through the parallel region's `u` and through `lv->u`
    (named by type, `struct level.u[][]`): one array, named `u[][]`; the pointer array
    `u[]` and another record's member of the same name stay apart."""
    s = _var_samples([3] * 10)
    f = _var_found([("struct level.u[][]", [0, 1]), ("u[][]", [2, 3, 4]), ("u[]", [5]),
                ("f[][]", [6, 7])])
    varattr._merge_aliases(f, s, np.zeros(10, dtype=bool))
    a = varattr._instances(f, s, np.zeros(10, dtype=bool), 10)
    names = [o.name for o in a.objects]
    assert sorted(names) == ["f[][]", "u[]", "u[][]"]
    per = dict(zip(names, np.bincount(a.inst_obj[a.instance], minlength=len(names)), strict=True))
    assert per["u[][]"] == 5 and per["u[]"] == 1 and per["f[][]"] == 2

    # two records' members named x, or memory in different regions: not merged
    f = _var_found([("struct a.x", [0, 1]), ("struct b.x", [2, 3])])
    varattr._merge_aliases(f, s, np.zeros(10, dtype=bool))
    assert [o.name for o in f.objects] == ["struct a.x", "struct b.x"]
    s2 = _var_samples([3, 3, 4, 4])
    f = _var_found([("u[][]", [0, 1]), ("struct level.u[][]", [2, 3])])
    varattr._merge_aliases(f, s2, np.zeros(4, dtype=bool))
    assert len(f.objects) == 2


def test_type_names_of_library_records_are_the_type_alone():
    """perf-style type names: a user's record and its member (`Mesh::m_pos`), a C struct
    (`struct grid.energy`); a standard-library record read through a pointer to it (the
    headers of a `std::vector<std::vector<int>>`'s elements) is its readable type, not
    its internals (`std::vector<int, std::allocator<int> >::_M_impl`)."""
    from numaprof.analyzer import datatype

    mesh = datatype.TypeInfo("record", "Mesh", 48, 1, file="/src/mesh.hpp", line=3)
    grid = datatype.TypeInfo("record", "struct grid", 24, 2, file="/src/grid.c", line=9)
    vec = datatype.TypeInfo("record", "std::vector<int, std::allocator<int> >", 24, 3,
                            file="/usr/include/c++/12/bits/stl_vector.h", line=423)
    assert datatype.member_name(mesh, ["m_pos"]) == "Mesh::m_pos"
    assert datatype.member_name(grid, ["energy"]) == "struct grid.energy"
    assert datatype.member_name(vec, ["_M_impl"]) == "std::vector<int>"


def test_an_instance_holds_every_access_named_by_it():
    """A record's member reached through a pointer past it (a negative displacement) is
    inside the instance it is named by: positions in the pattern features stay in [0, 1)
    (LULESH's `gamma` stopped the report with a negative one)."""
    s = _var_samples([0, 0, 0])  # accesses at 0x1000000, +64, +128, 8 bytes each
    found = varattr._Found()
    k = found.object(("record", "struct hg"), "struct hg", "hg@x.c:1", varattr.TYPE)
    found.add(np.array([0, 1, 2]), k, np.full(3, 0x1000000 + 64), 32, np.full(3, -1))
    a = varattr._instances(found, s, np.zeros(3, dtype=bool), 3)
    assert len(a.inst_start) == 1
    assert int(a.inst_start[0]) == 0x1000000 and int(a.inst_end[0]) == 0x1000000 + 128 + 8
