"""Object names from real binaries: DWARF line of the allocation call + the source line
parsed with tree-sitter; static arrays from the ELF symbol table with the load bias."""

import re
import shutil
import subprocess

import pytest
from naming_helpers import (  # noqa: E402
    BASE,
    _build,
    _calls,
    _profile,
    _return_addresses,
    _stacks_profile,
)

from numaprof.analyzer import analyze, srcnames, symbols  # noqa: E402

C_SRC = """\
#include <stdlib.h>
#include <stdio.h>

double table[100000];

struct S { double *buf; };

int main(int argc, char **argv)
{
    size_t n = (size_t)argc * 1000000;
    struct S s;
    double *field = malloc(n * sizeof(double));
    double *a;
    a = (double *)calloc(n, sizeof(double));
    s.buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        field[i] = a[i] + table[i % 100000];
    printf("%f %p\\n", field[n / 2], (void *)s.buf);
    return 0;
}
"""

F_SRC = """\
program demo
  implicit none
  real(8), allocatable :: u(:), v(:,:)
  integer :: n
  n = 1000
  allocate(u(n))
  allocate(v(n, n))
  u = 1.0d0
  v = 2.0d0
  print *, sum(u) + sum(v)
end program demo
"""

def _address_of_line(exe, line):
    info = symbols.elf_info(str(exe))
    lo, hi = min(int(a) for a in info.func_addr), max(int(a) for a in info.func_addr) + 0x1000
    for a in range(lo, hi):
        li = info.line_at(a)
        if li is not None and li[1] == line:
            return a
    raise AssertionError(f"no code for line {line}")


def test_c_heap_names_statics_and_first_touch_site(tmp_path):
    exe = _build(tmp_path, "mix.c", C_SRC, "gcc", ["-g", "-O1"])
    ras = _return_addresses(exe, ["malloc", "calloc"])
    assert len(ras) == 3
    info = symbols.elf_info(str(exe))
    table = next(o for o in info.objects if o.name == "table")
    table_rt = BASE + table.address
    loop_ip = _address_of_line(exe, 17)
    path, addrs = _profile(tmp_path, exe, [(ra, 8 << 20) for ra in ras],
                           extra_samples=[table_rt + 800, table_rt + 8000],
                           faults=[(loop_ip, 0x7F00_0000_0000 + 4096 * i) for i in range(3)])
    a = analyze(path)
    names = {o.address: (o.name, o.site, o.kind) for o in a.objects}
    assert names[addrs[0]] == ("field", "main@mix.c:12", "heap")
    assert names[addrs[1]] == ("a", "main@mix.c:14", "heap")
    assert names[addrs[2]] == ("s.buf", "main@mix.c:15", "heap")
    st = next(o for o in a.objects if o.kind == "static")
    assert st.name == "table" and st.samples == 2 and st.size == 800000 and st.site == ".bss@mix"
    field = next(o for o in a.objects if o.name == "field")
    assert field.first_touch.sites == ["main@mix.c:17"] and field.first_touch.pages == 3
    assert a.profile.outside_objects == 0


def test_source_moved_falls_back_to_function_at_line(tmp_path):
    exe = _build(tmp_path, "mix.c", C_SRC, "gcc", ["-g", "-O1"])
    ras = _return_addresses(exe, ["malloc", "calloc"])
    (tmp_path / "mix.c").unlink()
    path, addrs = _profile(tmp_path, exe, [(ras[0], 1 << 20)])
    o = analyze(path).objects[0]
    assert o.name == "main@mix.c:12" == o.site


def test_no_binary_gives_heap_address(tmp_path):
    exe = _build(tmp_path, "mix.c", C_SRC, "gcc", ["-g", "-O1"])
    ras = _return_addresses(exe, ["malloc"])
    path, addrs = _profile(tmp_path, exe, [(ras[0], 1 << 20)])
    exe.unlink()
    o = analyze(path).objects[0]
    assert o.name == f"heap@{addrs[0]:#x}"


def test_fortran_allocate_names(tmp_path):
    exe = _build(tmp_path, "demo.f90", F_SRC, "gfortran", ["-g", "-O0"])
    ras = _return_addresses(exe, ["malloc"])
    assert len(ras) >= 2
    path, addrs = _profile(tmp_path, exe, [(ras[0], 8000), (ras[1], 8_000_000)])
    got = {o.address: (o.name, o.site) for o in analyze(path).objects}
    assert got[addrs[0]][0] == "u" and got[addrs[0]][1].endswith("@demo.f90:6")
    assert got[addrs[1]][0] == "v" and got[addrs[1]][1].endswith("@demo.f90:7")


def test_assigned_name_forms(tmp_path):
    src = tmp_path / "forms.c"
    src.write_text(
        "void f(void) {\n"
        "  double *x = malloc(8);\n"
        "  p->grid[3] = (float *) aligned_alloc(64, n);\n"
        "  use(malloc(8));\n"
        "  double **m = NULL, *q = calloc(1, 2);\n"
        "  double *a = malloc(8), *b = malloc(8); c = calloc(1, 2); use(malloc(1));\n"
        "}\n"
    )
    assert srcnames.assigned_name(str(src), 2) == "x"
    assert srcnames.assigned_name(str(src), 3) == "p->grid[3]"
    assert srcnames.assigned_name(str(src), 4) is None
    assert srcnames.assigned_name(str(src), 5) == "q"
    f = tmp_path / "m.f90"
    f.write_text("subroutine s(n)\n  allocate(a(n), b(n,n))\nend subroutine\n")
    assert srcnames.assigned_name(str(f), 2) == "a"
    assert srcnames.assigned_name(str(f), 2, column=18) == "b"
    # every array of the statement, for telling its arrays apart (hot_objects)
    assert srcnames.allocated_names(str(f), 2, "fortran") == ("a", "b")
    assert srcnames.allocated_names(str(f), 1, "fortran") == ()
    assert srcnames.allocated_names(str(src), 2, "c") == ("x",)
    # a C line allocating for several variables (tests/progs/short_loops.c): all of them
    assert srcnames.allocated_names(str(src), 6, "c") == ("a", "b", "c")
    assert srcnames.allocated_names(str(src), 4, "c") == ()


def test_fortran_automatic_arrays_named_by_column(tmp_path):
    """gfortran mallocs a procedure's automatic arrays (local, sized at run time) at the
    line of their declaration, each call at the column of the name's last character
    (SNAP's dim3_sweep); dummy arguments, allocatables and fixed sizes allocate nothing."""
    f = tmp_path / "auto.f90"
    f.write_text(
        "subroutine s(nang, n, a)\n"
        "  integer, intent(in) :: nang, n\n"
        "  real(8), dimension(nang) :: psi, pc, den\n"
        "  real(8), dimension(nang, 4) :: hv, fxhv\n"
        "  real(8) :: w(n), c(3), z\n"
        "  real(8), intent(inout) :: a(n)\n"
        "  real(8), allocatable :: b(:)\n"
        "end subroutine\n"
    )
    line = f.read_text().splitlines()
    for ln, name in ((3, "psi"), (3, "pc"), (3, "den"), (4, "hv"), (4, "fxhv")):
        end = re.search(rf"\b{name}\b", line[ln - 1]).end()  # 1-based column of the last character
        assert srcnames.assigned_name(str(f), ln, column=end) == name
    assert srcnames.assigned_name(str(f), 3) is None  # three arrays, no column: which?
    assert srcnames.assigned_name(str(f), 3, call=(1, 3)) == "pc"
    assert srcnames.assigned_name(str(f), 5) == "w"  # c(3) is fixed, z a scalar
    assert srcnames.assigned_name(str(f), 6) is None  # a dummy argument
    assert srcnames.assigned_name(str(f), 7) is None  # deferred shape


F_COMMON = """\
module fields
  implicit none
  double precision :: w(4096)
end module fields

program common_demo
  use fields
  implicit none
  double precision :: u(8192), v(4096)
  common /grid/ u, v
  u = 1.0d0
  v = 2.0d0
  w = u(1:4096) + v
  print *, sum(w)
end program common_demo
"""


def test_fortran_common_members_and_module_arrays(tmp_path):
    exe = _build(tmp_path, "common_demo.f90", F_COMMON, "gfortran", ["-g", "-O0"])
    info = symbols.elf_info(str(exe))
    grid = next(o for o in info.objects if o.name == "grid_")
    w = next(o for o in info.objects if o.name.endswith("_MOD_w"))
    u0, v0 = BASE + grid.address, BASE + grid.address + 8192 * 8
    path, _ = _profile(tmp_path, exe, [], extra_samples=[u0 + 8, u0 + 8000 * 8, v0 + 16, BASE + w.address + 64])
    got = {o.name: o for o in analyze(path).objects}
    assert got["u"].samples == 2 and got["u"].size == 8192 * 8 and got["u"].site.startswith("/grid/")
    assert got["v"].samples == 1 and got["v"].size == 4096 * 8
    assert got["w"].samples == 1 and got["w"].site.startswith("module fields")


C_WRAPPERS = """\
#include <stdlib.h>

__attribute__((noinline)) static double *xmalloc(size_t n)
{
    double *p = malloc(n);
    if (!p)
        abort();
    return p;
}

__attribute__((noinline)) static double *aligned(size_t n)
{
    void *p;
    if (posix_memalign(&p, 64, n))
        abort();
    return p;
}

__attribute__((noinline)) static double *grid(size_t n) { return xmalloc(n); }

__attribute__((noinline)) static double scratch(size_t n)
{
    double *tmp = malloc(n);
    tmp[0] = 1;
    double r = tmp[0];
    free(tmp);
    return r;
}

int main(int argc, char **argv)
{
    size_t n = (size_t)argc * 1000000;
    double *u = xmalloc(n);
    double *v = aligned(n);
    double *w = grid(n);
    double s = scratch(n);
    return (int)(u[0] + v[0] + w[0] + s);
}
"""


def test_allocation_wrappers_take_the_callers_name(tmp_path):
    """xmalloc-style wrappers return the block: the caller's variable names the array, through
    two wrappers; posix_memalign(&p, ...) names p; a function that frees its block is no
    wrapper (its own variable names it)."""
    exe = _build(tmp_path, "wrap.c", C_WRAPPERS, "gcc", ["-g", "-O0"])
    in_xmalloc, in_scratch = _calls(exe, "malloc")  # code order: xmalloc, scratch
    (in_aligned,) = _calls(exe, "posix_memalign")
    grid_xmalloc, main_xmalloc = _calls(exe, "xmalloc")  # in grid (defined first), in main
    (main_aligned,) = _calls(exe, "aligned")
    (main_grid,) = _calls(exe, "grid")
    (main_scratch,) = _calls(exe, "scratch")
    stacks = [[in_xmalloc, main_xmalloc], [in_aligned, main_aligned],
              [in_xmalloc, grid_xmalloc, main_grid], [in_scratch, main_scratch]]
    path, addrs = _stacks_profile(tmp_path, exe, stacks)
    got = {o.address: (o.name, o.site) for o in analyze(path).objects}
    assert got[addrs[0]] == ("u", "main@wrap.c:33"), got
    assert got[addrs[1]] == ("v", "main@wrap.c:34"), got
    assert got[addrs[2]] == ("w", "main@wrap.c:35"), got
    assert got[addrs[3]] == ("tmp", "scratch@wrap.c:23"), got


C_INLINED_WRAPPER = """\
#include <stdio.h>
#include <stdlib.h>

static double *make_grid(size_t n)
{
    return calloc(n * n, sizeof(double));
}

int main(int argc, char **argv)
{
    size_t n = (size_t)argc * 1000;
    double *u = make_grid(n);
    double *v = make_grid(n + 1);
    printf("%p %p\\n", (void *)u, (void *)v);
    return 0;
}
"""


def test_inlined_wrapper_takes_the_callers_name(tmp_path):
    """At -O2 the wrapper is inlined into main: the allocation's return address is in main,
    its line is the wrapper's `return calloc(...)`, and the inline call site names it."""
    exe = _build(tmp_path, "inl.c", C_INLINED_WRAPPER, "gcc", ["-g", "-O2"])
    ras = _return_addresses(exe, ["calloc"])
    assert len(ras) == 2, "gcc did not inline make_grid twice"
    assert not _calls(exe, "make_grid"), "make_grid was not inlined"
    prof, addrs = _profile(tmp_path, exe, [(ra, 1 << 20) for ra in ras])
    got = {o.address: (o.name, o.site) for o in analyze(prof).objects}
    assert sorted(got.values()) == [("u", "main@inl.c:12"), ("v", "main@inl.c:13")], got


CXX_REGION_LOCAL = """\
#include <cstdio>
#include <vector>

static double total(const std::vector<double> &x, size_t n)
{
    double s = 0.0;
#pragma omp parallel reduction(+ : s)
    {
        std::vector<double> local(n, 0.0);
#pragma omp for
        for (size_t i = 0; i < x.size(); i++)
            local[i % n] += x[i];
        for (size_t g = 0; g < n; g++)
            s += local[g];
    }
    return s;
}

int main(int argc, char **argv)
{
    std::vector<double> x(1000 + argc, 1.0);
    std::printf("%f\\n", total(x, 64));
    return 0;
}
"""


def test_vector_local_to_a_parallel_region(tmp_path):
    """`std::vector<double> local(n)` declared in an OpenMP region of `total`, a static
    function inlined into main: its constructor's `operator new` call is inlined into
    the outlined function, which GCC nests in the abstract DIE of `total` (no code of
    its own); the inlined call chain out of the library headers still reaches the
    declaration's line, so the block is `local`, not the region's `#pragma` line in
    main."""
    exe = _build(tmp_path, "region.cpp", CXX_REGION_LOCAL, "g++", ["-g", "-O2", "-fopenmp"])
    ras = _return_addresses(exe, ["_Znwm"])
    assert len(ras) == 2, ras
    prof, _ = _profile(tmp_path, exe, [(ra, 1 << 20) for ra in ras])
    got = sorted((o.name, o.site.rsplit("@", 1)[1]) for o in analyze(prof).objects if o.kind == "heap")
    assert got == [("local", "region.cpp:9"), ("x", "region.cpp:21")], got


def test_returns_allocation_and_out_argument(tmp_path):
    src = tmp_path / "r.c"
    src.write_text(
        "double *a(size_t n) { return malloc(n); }\n"
        "double *b(size_t n) { double *q = (double *)malloc(n); init(q); return (q); }\n"
        "void c(size_t n) { double *q = malloc(n); keep = q; }\n"
        "void d(size_t n) { posix_memalign((void **)&s->field, 64, n); }\n"
    )
    assert srcnames.returns_allocation(str(src), 1, None)
    assert srcnames.assigned_name(str(src), 2) == "q"
    assert srcnames.returns_allocation(str(src), 2, "q")
    assert not srcnames.returns_allocation(str(src), 3, "q")
    assert srcnames.assigned_name(str(src), 4) == "s->field"
    assert not srcnames.returns_allocation(str(src), 4, "s->field")


def test_knr_definitions_are_functions(tmp_path):
    """K&R-style definitions (legacy numerical C: Rodinia's backprop allocates through
    `float *alloc_1d_dbl(n) int n; { ... }`), which tree-sitter-c does not parse as
    function definitions: their bodies are still the function's, so the wrapper that
    returns what it allocated is one, and a matrix it builds row by row gives its rows."""
    src = tmp_path / "k.c"
    src.write_text(
        "float *alloc_1d(n)\n"
        "int n;\n"
        "{\n"
        "  float *new;\n"
        "  new = (float *) malloc((unsigned) (n * sizeof(float)));\n"
        "  return (new);\n"
        "}\n"
        "float **alloc_2d(m, n)\n"
        "int m, n;\n"
        "{\n"
        "  int i;\n"
        "  float **new;\n"
        "  new = (float **) malloc((unsigned) (m * sizeof(float *)));\n"
        "  for (i = 0; i < m; i++)\n"
        "    new[i] = alloc_1d(n);\n"
        "  return (new);\n"
        "}\n"
        "void keep(n)\n"
        "int n;\n"
        "{\n"
        "  float *q;\n"
        "  q = (float *) malloc(n);\n"
        "  saved = q;\n"
        "}\n"
    )
    assert srcnames.assigned_name(str(src), 5) == "new"
    assert srcnames.returned_part(str(src), 5, "new") == ""
    assert srcnames.returned_part(str(src), 15, "new[i]") == "[]"
    assert srcnames.returned_part(str(src), 22, "q") is None


F_ONE_STATEMENT = """\
module heat
  implicit none
  double precision, allocatable :: u(:, :), v(:, :), w(:, :)
  type fields
    double precision, allocatable :: p(:), q(:)
  end type fields
contains
  subroutine setup(n)
    integer, intent(in) :: n
    allocate(u(n, n), v(n, n), w(n, n))
    u = 1.0d0
    v = 2.0d0
    w = 3.0d0
  end subroutine setup

  subroutine make(f, n)
    type(fields), intent(inout) :: f
    integer, intent(in) :: n
    allocate(f%p(n), f%q(2 * n))
    f%p = 1.0d0
    f%q = 2.0d0
  end subroutine make
end module heat

program multi
  use heat
  implicit none
  type(fields) :: f
  call setup(300)
  call make(f, 1000)
  print *, sum(u) + sum(v) + sum(w) + sum(f%p) + sum(f%q)
end program multi
"""


@pytest.mark.parametrize("opt", ["-O2", "-O0"])
def test_fortran_one_allocate_statement_names_each_array(tmp_path, opt):
    """`allocate(u(n, n), v(n, n), w(n, n))` calls malloc three times from one line and
    column: the n-th call (by the line table's discriminators, GCC numbers them in source
    order) is the n-th array.  -O2 has DWARF call sites for the calls, -O0 has none (the
    calls are found in the code)."""
    exe = _build(tmp_path, "multi.f90", F_ONE_STATEMENT, "gfortran", ["-g", opt])
    info = symbols.elf_info(str(exe))
    lines = F_ONE_STATEMENT.splitlines()
    line_uvw = lines.index("    allocate(u(n, n), v(n, n), w(n, n))") + 1
    line_pq = lines.index("    allocate(f%p(n), f%q(2 * n))") + 1
    ras = _return_addresses(exe, ["malloc"])
    uvw = [ra for ra in ras if info.line_at(ra - 1)[1] == line_uvw]
    pq = [ra for ra in ras if info.line_at(ra - 1)[1] == line_pq]
    assert len(uvw) == 3 and len(pq) == 2, (opt, [info.line_at(ra - 1) for ra in ras])
    assert len({info.line_at(ra - 1) for ra in uvw}) == 1, "the three calls are told apart by column"
    path, addrs = _profile(tmp_path, exe, [(ra, 1 << 20) for ra in uvw + pq])
    got = {o.address: (o.name, o.site) for o in analyze(path).objects}
    # gfortran lays the calls out in source order: the lowest address allocates u
    assert [got[a][0] for a in addrs] == ["u", "v", "w", "f%p", "f%q"], got
    assert got[addrs[0]][1] == f"__heat_MOD_setup@multi.f90:{line_uvw}"
    # both ways of finding the statement's calls were exercised
    assert bool(info._call_sites(uvw[0] - 1)) == (opt == "-O2")


CXX_MEMBERS = """\
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

template <typename T>
__attribute__((noinline)) T *alloc_array(std::size_t n)
{
    void *p = nullptr;
    if (posix_memalign(&p, 64, n * sizeof(T)) != 0)
        throw std::bad_alloc();
    return static_cast<T *>(p);
}

template <typename T>
T *raw_array(std::size_t n)
{
    void *p = std::malloc(n * sizeof(T));
    if (!p)
        throw std::bad_alloc();
    return reinterpret_cast<T *>((p));
}

template <typename T>
__attribute__((noinline)) T scratch_sum(std::size_t n)
{
    std::vector<T> tmp(n, T(1));
    T s = 0;
    for (T x : tmp)
        s += x;
    return s;
}

class Mesh {
public:
    void allocate(std::size_t n);
    std::vector<double> m_pos;
    std::vector<float> m_vel;
    std::unique_ptr<double[]> m_mass;
    std::unique_ptr<int[]> m_ids;
    double *m_charge = nullptr;
    long *m_count = nullptr;
    std::vector<double> m_shadow;
};

__attribute__((noinline)) void Mesh::allocate(std::size_t n)
{
    m_pos.resize(n);
    this->m_vel.reserve(n);
    m_mass = std::make_unique<double[]>(n);
    m_ids.reset(new int[n]);
    m_charge = alloc_array<double>(n);
    m_count = raw_array<long>(n);
    std::vector<double> m_shadow(n);
    m_shadow[n / 2] = m_pos[n / 3];
    std::printf("%f\\n", m_shadow[n / 2] + m_mass[n / 2] + m_ids[1] + m_vel.capacity());
}

struct Grid {
    __attribute__((noinline)) explicit Grid(std::size_t n)
        : m_cells(n),
          m_raw(new double[n]) {}
    std::vector<double> m_cells;
    std::unique_ptr<double[]> m_raw;
};

int main(int argc, char **)
{
    std::size_t n = static_cast<std::size_t>(argc) * 1000000;
    Grid grid(n);
    Mesh mesh;
    mesh.allocate(n);
    std::vector<double> local;
    local.resize(n);
    mesh.m_shadow.assign(n, 1.0);
    mesh.m_charge[1] = scratch_sum<double>(n);
    std::printf("%f %f %ld\\n", local[n / 2] + mesh.m_shadow[2], mesh.m_charge[1], mesh.m_count[0]);
    std::free(mesh.m_charge);
    std::free(mesh.m_count);
    return (int)(local.size() + grid.m_cells.size() + (grid.m_raw[0] > 0)) % 2;
}
"""

_ALLOCATING = re.compile(r"operator new|malloc|posix_memalign|alloc_array|_M_default_append")


def _cxx_calls(exe):
    """(return address, caller, callee) of every direct call, names demangled."""
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", str(exe)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    calls, caller = [], None
    for i, line in enumerate(out):
        head = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if head:
            caller = head.group(1)
        m = re.search(r"\bcall\s+[0-9a-f]+ <(.*)>$", line)
        nxt = re.match(r"^\s+([0-9a-f]+):", out[i + 1]) if i + 1 < len(out) else None
        if m and nxt:  # (a call ending a function returns nowhere)
            calls.append((int(nxt.group(1), 16), caller, m.group(1)))
    return calls


def test_cxx_members_wrappers_and_containers_named(tmp_path):
    """g++ -O2: a std::vector member resized in a member function (the allocation is in
    libstdc++'s out-of-line _M_default_append) is `Mesh::m_pos`; reserve through `this->`,
    make_unique, unique_ptr::reset(new T[n]) name their member; a template wrapper
    returning `static_cast<T *>(p)` (posix_memalign(&p, ...)) and an inlined one
    returning `reinterpret_cast<T *>((p))` pass the block to the member they are assigned
    to; a local hiding a member stays a local; containers of main keep their plain names."""
    exe = _build(tmp_path, "mesh.cpp", CXX_MEMBERS, "g++", ["-g", "-O2"])
    info = symbols.elf_info(str(exe))
    lines = CXX_MEMBERS.splitlines()
    calls = _cxx_calls(exe)
    inner = {callee: next(ra for ra, caller, c in calls if caller == callee and _ALLOCATING.search(c))
             for callee in {c for _, _, c in calls if "alloc_array" in c or "_M_default_append" in c}}

    def stack(text):
        """The allocation stack of the first allocating call the line makes."""
        line = lines.index(text) + 1
        for ra, caller, callee in calls:
            if caller in ("Mesh::allocate(unsigned long)", "main", "double scratch_sum<double>(unsigned long)",
                          "Grid::Grid(unsigned long)") \
                    and _ALLOCATING.search(callee) and any(
                    p.line == line and p.file.endswith("mesh.cpp") for p in info.inline_positions(ra - 1)):
                return [inner[callee], ra] if callee in inner else [ra]
        raise AssertionError(f"no allocating call for line {line} ({text})")

    expected = [
        ("    m_pos.resize(n);", "Mesh::m_pos"),
        ("    this->m_vel.reserve(n);", "Mesh::m_vel"),
        ("    m_mass = std::make_unique<double[]>(n);", "Mesh::m_mass"),
        ("    m_ids.reset(new int[n]);", "Mesh::m_ids"),
        ("    m_charge = alloc_array<double>(n);", "Mesh::m_charge"),
        ("    m_count = raw_array<long>(n);", "Mesh::m_count"),
        ("    std::vector<double> m_shadow(n);", "m_shadow"),
        ("    local.resize(n);", "local"),
        ("    mesh.m_shadow.assign(n, 1.0);", "mesh.m_shadow"),
        ("    std::vector<T> tmp(n, T(1));", "tmp"),
        ("        : m_cells(n),", "Grid::m_cells"),  # member initialisers
        ("          m_raw(new double[n]) {}", "Grid::m_raw"),
    ]
    assert not [c for c in calls if c[2].startswith("long* raw_array")], "raw_array was not inlined"
    stacks = [stack(text) for text, _ in expected]
    path, addrs = _stacks_profile(tmp_path, exe, stacks)
    got = {o.address: (o.name, o.site) for o in analyze(path).objects}
    assert [got[a][0] for a in addrs] == [name for _, name in expected], got
    charge = got[addrs[4]]
    # the wrapper's caller is the site, its name readable (no return type, no soup)
    assert charge[1] == f"Mesh::allocate(unsigned long)@mesh.cpp:{lines.index(expected[4][0]) + 1}", charge
    assert got[addrs[7]][1] == f"main@mesh.cpp:{lines.index(expected[7][0]) + 1}"
    # a function template's site without the return type the mangled name carries
    assert got[addrs[9]][1] == f"scratch_sum<double>(unsigned long)@mesh.cpp:{lines.index(expected[9][0]) + 1}"


C_MEMBERS_MACRO = """\
#include <stdio.h>
#include <stdlib.h>

#define NEW(T, n) ((T *)calloc((size_t)(n), sizeof(T)))

struct grid {
    long n;
    double *energy;
    double *xs;
};

static double *make_table(size_t n)
{
    double *t = (double *)aligned_alloc(64, n * sizeof(double));
    if (!t)
        abort();
    return t;
}

static void grid_alloc(struct grid *g, long n)
{
    g->n = n;
    g->energy = NEW(double, n);
    g->xs = (double *)malloc((size_t)n * 5 * sizeof *g->xs);
    if (!g->energy || !g->xs)
        abort();
}

int main(int argc, char **argv)
{
    long n = (long)argc * 100000;
    struct grid grids[4];
    for (int k = 0; k < 4; k++)
        grid_alloc(&grids[k], n + k);
    double *table = make_table((size_t)n);
    for (long i = 0; i < n; i++)
        table[i] = grids[i % 4].energy[i] + grids[i % 4].xs[i];
    printf("%f %s\\n", table[n / 2], argv[0]);
    return 0;
}
"""


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_c_struct_members_macro_and_inlined_wrapper(tmp_path, opt):
    """gcc -O2/-O3 inline both helpers into main: `g->energy = NEW(double, n)` (calloc
    through a casting macro) and `g->xs = (double *)malloc(...)` keep the struct
    member's name, through the helper's parameter `g` the caller's `&grids[k]`
    (`grids[k].energy`, at that call; the helper returns nothing); `make_table`
    returns its cast aligned_alloc through a variable, so main's `table` names it."""
    exe = _build(tmp_path, "tl.c", C_MEMBERS_MACRO, "gcc", ["-g", opt])
    (energy,) = _return_addresses(exe, ["calloc"])
    (xs,) = _return_addresses(exe, ["malloc"])
    (table,) = _return_addresses(exe, ["aligned_alloc"])
    assert not _calls(exe, "grid_alloc") and not _calls(exe, "make_table"), "helpers not inlined"
    path, addrs = _profile(tmp_path, exe, [(energy, 1 << 20), (xs, 1 << 20), (table, 1 << 20)])
    got = {o.address: (o.name, o.site) for o in analyze(path).objects}
    lines = C_MEMBERS_MACRO.splitlines()

    def at(text):
        return lines.index(text) + 1

    call = f"main@tl.c:{at('        grid_alloc(&grids[k], n + k);')}"
    assert got[addrs[0]] == ("grids[k].energy", call), got
    assert got[addrs[1]] == ("grids[k].xs", call), got
    assert got[addrs[2]] == ("table", f"main@tl.c:{at('    double *table = make_table((size_t)n);')}"), got


C_ASSIGNING_MACROS = """\
#include <stdio.h>
#include <stdlib.h>

#define ALLOC(p, n) do { \\
        (p) = malloc((size_t)(n) * sizeof *(p)); \\
        if (!(p)) \\
            abort(); \\
    } while (0)
#define ALLOC_ZERO(p, n) ((p) = calloc((size_t)(n), sizeof *(p)))
#define ZEROS(p, n) ALLOC_ZERO(p, n)

struct grid {
    double *energy;
    double *xs;
};

int main(int argc, char **argv)
{
    long n = (long)argc * 100000;
    struct grid g;
    double *t;
    ALLOC(g.energy, n);
    ZEROS(g.xs, n + 1);
    ALLOC(t, n + 2);
    printf("%f %f %f %s\\n", g.energy[1], g.xs[2], t[3], argv[0]);
    return 0;
}
"""


def test_c_macros_that_assign_the_allocation(tmp_path):
    """gcc gives code expanded from a macro the line and column of the macro's use:
    `ALLOC(g.energy, n);` is named by expanding the macro defined in the file (multi-line,
    parenthesised parameters, a macro calling another one)."""
    exe = _build(tmp_path, "mac.c", C_ASSIGNING_MACROS, "gcc", ["-g", "-O2"])
    ras = _return_addresses(exe, ["malloc", "calloc"])
    assert len(ras) == 3
    path, addrs = _profile(tmp_path, exe, [(ra, 1 << 20) for ra in ras])
    lines = C_ASSIGNING_MACROS.splitlines()
    got = sorted((o.site, o.name) for o in analyze(path).objects)
    assert got == sorted([(f"main@mac.c:{lines.index(text) + 1}", name) for text, name in (
        ("    ALLOC(g.energy, n);", "g.energy"), ("    ZEROS(g.xs, n + 1);", "g.xs"),
        ("    ALLOC(t, n + 2);", "t"))]), got


def test_each_analysis_reads_its_own_archive(tmp_path):
    """The archive is passed, not parked in a module global: two profiles' copies of the
    same source never stand in for each other."""
    from numaprof.analyzer.archive import Archive

    one, two = tmp_path / "1", tmp_path / "2"
    for d, var in ((one, "x"), (two, "y")):
        d.mkdir()
        (d / "copy").write_text(f"double *{var} = malloc(8);\n")
    a1 = Archive(sources={"/src/app.c": str(one / "copy")})
    a2 = Archive(sources={"/src/app.c": str(two / "copy")})
    got = []
    for a in (a1, a2, a1):
        src = srcnames.find_source("/src/app.c", [], a)
        got.append(srcnames.assigned_name(str(src), 1, lang="c", archive=a))
    assert got == ["x", "y", "x"]
    assert srcnames.find_source("/src/app.c", []) is None  # no archive: the disk, absent


def test_returned_part_of_a_grid_built_row_by_row(tmp_path):
    """A wrapper filling the rows of what it returns names them after its caller's
    variable, with their subscripts."""
    src = tmp_path / "g.c"
    src.write_text(
        "double ***grid(int n) { double ***g = malloc(n * sizeof *g);\n"
        "  for (int i = 0; i < n; i++) { g[i] = malloc(n * sizeof *g[i]);\n"
        "    for (int j = 0; j < n; j++) g[i][j] = calloc(n, sizeof(double)); }\n"
        "  return g; }\n"
        "void keep(int n) { double **h = malloc(8); h[0] = malloc(n); store(h); }\n"
    )
    assert srcnames.assigned_name(str(src), 3) == "g[i][j]"
    assert srcnames.returned_part(str(src), 3, "g[i][j]") == "[][]"
    assert srcnames.returned_part(str(src), 2, "g[i]") == "[]"
    assert srcnames.returned_part(str(src), 1, "g") == ""
    assert srcnames.returned_part(str(src), 5, "h[0]") is None


def test_any_method_of_an_object_names_what_the_library_kept(tmp_path):
    """C++: a block allocated inside a method of an object (a library's container or
    matrix: `A.setFromTriplets(...)` of an Eigen matrix) is the object's storage; but an
    assignment or a declaration on the line names it first, and `this` names nothing."""
    src = tmp_path / "m.cpp"
    src.write_text(
        "void Poisson::assemble(int n) {\n"
        "  A.setFromTriplets(t.begin(), t.end());\n"
        "  x = A.solve(b);\n"
        "  Eigen::VectorXd r = A.diagonal();\n"
        "  this->grow(n);\n"
        "  s->mesh.refine(2);\n"
        "  std::stable_sort(v.begin(), v.end());\n"
        "  keep.reset();\n"
        "}\n"
    )
    assert srcnames.assigned_name(str(src), 2) == "A"
    assert srcnames.assigned_name(str(src), 3) == "x"
    assert srcnames.assigned_name(str(src), 4) == "r"
    assert srcnames.assigned_name(str(src), 5) is None
    assert srcnames.assigned_name(str(src), 6) == "s->mesh"
    assert srcnames.assigned_name(str(src), 7) is None  # the sort's buffer is not v's
    assert srcnames.assigned_name(str(src), 8) is None


C_STATIC = """
double table[4096];
int main(void) { for (int i = 0; i < 4096; i++) table[i] = i; return (int)table[7]; }
"""


@pytest.mark.parametrize("how", ["debuglink", "build-id"])
def test_stripped_file_takes_its_symbols_from_its_debug_file(tmp_path, monkeypatch, how):
    """A stripped binary's statics are named from its separate debug file, found as gdb
    and perf find it: by build ID under the debug root, or by `.gnu_debuglink` beside it."""
    from helpers import build_program

    from numaprof.analyzer import debuginfo

    exe = build_program(tmp_path, "st.c", C_STATIC, "gcc", ["-O1", "-g", "-Wl,--build-id"],
                        ("objcopy", "strip"))
    dbg = tmp_path / "st.debug"
    subprocess.run(["objcopy", "--only-keep-debug", str(exe), str(dbg)], check=True)
    subprocess.run(["strip", "--strip-all", str(exe)], check=True)
    assert not any(o.name == "table" for o in symbols.elf_info(str(exe)).objects)
    root = tmp_path / "debugroot"
    monkeypatch.setattr(debuginfo, "DEBUG_ROOT", str(root))
    symbols._elf_info.cache_clear()
    if how == "debuglink":
        subprocess.run(["objcopy", f"--add-gnu-debuglink={dbg}", str(exe)], check=True)
    else:
        out = subprocess.run(["readelf", "-n", str(exe)], capture_output=True, text=True, check=True).stdout
        bid = re.search(r"Build ID: ([0-9a-f]+)", out).group(1)
        (root / ".build-id" / bid[:2]).mkdir(parents=True)
        shutil.move(str(dbg), root / ".build-id" / bid[:2] / f"{bid[2:]}.debug")
    info = symbols.elf_info(str(exe))
    assert info.debug_file is not None
    assert [(o.name, o.size, o.section) for o in info.objects if o.name == "table"] == [("table", 4096 * 8, ".bss")]
    assert info.function_at(next(a for a, (n, _) in zip(info.func_addr.tolist(), info.func_info, strict=True)
                                 if n == "main")) == "main"


F_DESCRIPTOR = """\
module heat
  implicit none
  double precision, allocatable :: u(:,:)
  double precision :: fixed(64)
end module heat
program p
  use heat
  allocate(u(512,512))
  u = 1.0d0
  fixed = 2.0d0
  print *, sum(u) + sum(fixed)
end program p
"""


def test_fortran_module_descriptor_is_not_the_array(tmp_path):
    """A module's allocatable array is two things: its elements on the heap (named `u`
    at its allocate) and its descriptor, the module symbol (`u (descriptor)`), so that the
    array's name is one object's; a fixed-size module array is the symbol itself."""
    from helpers import build_program

    from numaprof.analyzer import objects
    from numaprof.analyzer.archive import EMPTY

    exe = build_program(tmp_path, "desc.f90", F_DESCRIPTOR, "gfortran", ["-O2", "-g"])
    info = symbols.elf_info(str(exe))
    loads = [(o, v) for o, v, _, _ in info.loads]
    maps = symbols.Mappings({"pid": [7] * len(loads), "start": [0x5555_0000_0000 + (v & ~0xFFF) for _, v in loads],
                             "len": [0x1000] * len(loads), "pgoff": [o & ~0xFFF for o, _ in loads],
                             "path": [str(exe)] * len(loads)})
    objs = []
    objects.static_intervals(maps, objs, EMPTY)
    names = {o.name for o in objs}
    assert {"u (descriptor)", "fixed"} <= names, names
    assert "u" not in names
