"""Names that come through calls: an out-parameter named after the caller's argument
(C, C++, Fortran dummies, gfortran's misplaced call lines), and a static pointer beside
the array it holds.  Real binaries, as in test_analyzer_naming.py."""

from naming_helpers import BASE, _build, _calls, _profile, _return_addresses, _stacks_profile  # noqa: E402

from numaprof.analyzer import analyze, srcnames, symbols  # noqa: E402

CXX_OUT_PARAMETERS = """\
#include <cstdio>
#include <cstdlib>

struct Vector { int n; double *values; };
struct Grid { double *cells; };

static void InitializeVector(Vector &v, int n)
{
    v.n = n;
    v.values = new double[n];
}

__attribute__((noinline)) static void init_grid(Grid *g, int n)
{
    g->cells = static_cast<double *>(calloc(n, sizeof(double)));
}

__attribute__((noinline)) static void make(double **out, int n)
{
    *out = static_cast<double *>(malloc(n * sizeof(double)));
}

__attribute__((noinline)) static void setup(Vector &x, Grid &h, int n)
{
    init_grid(&h, n);  /* first: a call last would be a jump */
    InitializeVector(x, n);
}

int main(int argc, char **argv)
{
    int n = argc * 1000;
    Vector b, x;
    Grid g, h;
    double *a;
    InitializeVector(b, n);
    init_grid(&g, n);
    make(&a, n);
    setup(x, h, n + 1);
    std::printf("%p %p %p %p %p %p\\n", (void *)b.values, (void *)x.values, (void *)g.cells,
                (void *)h.cells, (void *)a, (void *)&n);
    return 0;
}
"""


def test_out_parameters_take_the_callers_argument(tmp_path):
    """A function that allocates into its parameter (HPCG's `InitializeVector(Vector &v,
    n)`: `v.values = new double[n]`; `g->cells = calloc(...)` with `Grid *g`; `*out =
    malloc(...)`) names the array after what its caller passes (`b.values`, `g.cells`,
    `a`), through two such functions (`setup(x, h)` -> `x.values`, `h.cells`), inlined
    or not; the site is the call that gives the name (a patch writes the name there)."""
    exe = _build(tmp_path, "outp.cpp", CXX_OUT_PARAMETERS, "g++", ["-g", "-O2"])
    new_main, new_setup = _calls(exe, "_Znam")  # InitializeVector inlined into main and setup
    (in_calloc,) = _calls(exe, "calloc")
    (in_malloc,) = _calls(exe, "malloc")
    grid_calls = _calls(exe, r"_ZL9init_gridP4Gridi")
    (main_make,) = _calls(exe, r"_ZL4makePPdi")
    (main_setup,) = _calls(exe, r"_ZL5setupR6VectorR4Gridi")
    assert len(grid_calls) == 2, grid_calls
    setup_grid, main_grid = sorted(grid_calls, key=lambda a: abs(a - new_setup))
    stacks = [[new_main], [in_calloc, main_grid], [in_malloc, main_make], [new_setup, main_setup],
              [in_calloc, setup_grid, main_setup]]
    path, addrs = _stacks_profile(tmp_path, exe, stacks)
    got = {o.address: (o.name, o.site) for o in analyze(path).objects}
    lines = CXX_OUT_PARAMETERS.splitlines()

    def at(func, text):
        return f"{func}@outp.cpp:{lines.index(text) + 1}"

    assert got[addrs[0]] == ("b.values", at("main", "    InitializeVector(b, n);")), got
    assert got[addrs[1]] == ("g.cells", at("main", "    init_grid(&g, n);")), got
    assert got[addrs[2]] == ("a", at("main", "    make(&a, n);")), got
    assert got[addrs[3]] == ("x.values", at("setup", "    InitializeVector(x, n);")), got
    assert got[addrs[4]] == ("h.cells", at("setup", "    init_grid(&h, n);  /* first: a call last would be a jump */")), got


def test_through_parameter_forms(tmp_path):
    """Which names reach the caller through a parameter, and what the caller's argument
    makes of them."""
    src = tmp_path / "p.cpp"
    src.write_text(
        "void f(Vector &v, int n) { v.values = new double[n]; }\n"
        "void g(grid *q, int n) { q->cells = new double[n]; }\n"
        "void h(double **out, int n) { *out = new double[n]; }\n"
        "void r(double *&p, int n) { p = new double[n]; }\n"
        "void own(double *p, int n) { p = new double[n]; }\n"
        "void hide(Vector &v, int n) { Vector v; v.values = new double[n]; }\n"
        "void rows(double **m, int n) { for (int i = 0; i < n; i++) m[i] = new double[n]; }\n"
        "int main() { f(b, 1); f(*pb, 2); g(&gr, 3); g(pg, 4); h(&a, 5); h(pp, 6); r(c, 7); rows(mat, 8);\n"
        "  f(make(), 9); }\n"
    )
    S = str(src)
    via = {line: srcnames.through_parameter(S, line, name) for line, name in
           [(1, "v.values"), (2, "q->cells"), (3, "*out"), (4, "p"), (5, "p"), (6, "v.values"), (7, "m[i]")]}
    assert via == {1: (0, "", ".values"), 2: (0, "", "->cells"), 3: (0, "*", ""), 4: (0, "", ""),
                   5: None, 6: None, 7: (0, "", "[i]")}
    col = {k: 1 + open(S).read().splitlines()[7].index(k) for k in ("f(b", "f(*pb", "g(&gr", "g(pg", "h(&a",
                                                                     "h(pp", "r(c", "rows(")}
    arg = {k: srcnames.through_argument(S, 8, c, k.split("(")[0], via[{"f": 1, "g": 2, "h": 3, "r": 4,
                                                                      "rows": 7}[k.split("(")[0]]])
           for k, c in col.items()}
    assert arg == {"f(b": "b.values", "f(*pb": "pb->values", "g(&gr": "gr.cells", "g(pg": "pg->cells",
                   "h(&a": "a", "h(pp": "*pp", "r(c": "c", "rows(": "mat[i]"}
    assert srcnames.through_argument(S, 9, 0, "f", via[1]) is None  # not a variable
    assert srcnames.plain_function("ns::Grid::init<double>(int)") == "init"


def test_fortran_dummy_arguments_take_the_actual_argument(tmp_path):
    """Fortran passes by reference: an array allocated through a dummy argument
    (`allocate(a(n))`, `allocate(g%u(n))`) is the caller's actual argument (`x`,
    `lv(2)%u`); a local of the subroutine is not."""
    src = tmp_path / "d.f90"
    src.write_text(
        "module m\n"
        "contains\n"
        "  subroutine alloc_field(a, n)\n"
        "    real(8), allocatable, intent(out) :: a(:)\n"
        "    integer :: n\n"
        "    real(8), allocatable :: t(:)\n"
        "    allocate(a(n), t(n))\n"
        "  end subroutine\n"
        "  subroutine init(g, n)\n"
        "    type(grid) :: g\n"
        "    integer :: n\n"
        "    allocate(g%u(n))\n"
        "  end subroutine\n"
        "end module\n"
        "program p\n"
        "  use m\n"
        "  call alloc_field(x, 10)\n"
        "  call init(lv(2), 5)\n"
        "  call alloc_field(1.0 * y, 3)\n"
        "end program\n"
    )
    S = str(src)
    assert srcnames.through_parameter(S, 7, "a") == (0, "", "")
    assert srcnames.through_parameter(S, 7, "t") is None
    assert srcnames.through_parameter(S, 12, "g%u") == (0, "", "%u")
    assert srcnames.through_argument(S, 17, 0, "__m_MOD_alloc_field", (0, "", "")) == "x"
    assert srcnames.through_argument(S, 18, 0, "__m_MOD_init", (0, "", "%u")) == "lv(2)%u"
    assert srcnames.through_argument(S, 19, 0, "__m_MOD_alloc_field", (0, "", "")) is None
    assert srcnames.through_argument(S, 18, 0, "__m_MOD_alloc_field", (0, "", "")) is None
    # the line table put the call on `end program`: the rank of the call among the
    # procedure's calls to the callee picks it, when their count agrees
    assert srcnames.through_argument(S, 20, 0, "__m_MOD_alloc_field", (0, "", ""), call=(0, 2)) == "x"
    assert srcnames.through_argument(S, 20, 0, "__m_MOD_alloc_field", (0, "", ""), call=(1, 2)) is None
    assert srcnames.through_argument(S, 20, 0, "__m_MOD_alloc_field", (0, "", ""), call=(0, 3)) is None


F_DUMMY = """\
module fields
  implicit none
contains
  subroutine alloc_field(a, n)
    real(8), allocatable, intent(out) :: a(:)
    integer, intent(in) :: n
    allocate(a(n))
  end subroutine
end module

program dummy
  use fields
  implicit none
  real(8), allocatable :: x(:), y(:)
  integer :: n
  n = 4000
  call alloc_field(x, n)
  call alloc_field(y, n + 1)
  x = 1.0d0
  y = 2.0d0
  print *, sum(x) + sum(y)
end program
"""


def test_fortran_intent_out_dummies_named_at_o2(tmp_path):
    """gfortran -O2 puts the calls passing an intent(out) allocatable on the line of
    `end program` (it frees the actual argument there first); the arrays are still the
    caller's `x` and `y`, by the rank of each call."""
    exe = _build(tmp_path, "dummy.f90", F_DUMMY, "gfortran", ["-g", "-O2"])
    (in_alloc,) = _calls(exe, "malloc")
    first, second = _calls(exe, "__fields_MOD_alloc_field")
    stacks = [[in_alloc, first], [in_alloc, second]]
    path, addrs = _stacks_profile(tmp_path, exe, stacks)
    got = {o.address: o.name for o in analyze(path).objects}
    assert [got[a] for a in addrs] == ["x", "y"], got


C_GLOBAL_POINTER = """\
#include <stdio.h>
#include <stdlib.h>

double *field; /* a global: kept in memory */

int main(int argc, char **argv)
{
    size_t n = (size_t)argc * 100000;
    field = malloc(n * sizeof *field);
    for (size_t i = 0; i < n; i++)
        field[i] = (double)i;
    printf("%f\\n", field[n / 2]);
    return 0;
}
"""


def test_a_static_pointer_and_its_array_do_not_share_a_name(tmp_path):
    """`field = malloc(...)` names the heap array `field`; the static pointer's own eight
    bytes, sampled too (the loop loads it), are `field (pointer)`: one name, one object
    (a suggestion for `field` once took the pointer's static placement)."""
    exe = _build(tmp_path, "gp.c", C_GLOBAL_POINTER, "gcc", ["-g", "-O1"])
    (ra,) = _return_addresses(exe, ["malloc"])
    slot = next(o for o in symbols.elf_info(str(exe)).objects if o.name == "field")
    path, addrs = _profile(tmp_path, exe, [(ra, 1 << 20)], extra_samples=[BASE + slot.address] * 3)
    names = sorted((o.name, o.kind) for o in analyze(path).objects)
    assert names == [("field", "heap"), ("field (pointer)", "static")], names


MATH_CALLS = """\
#include <math.h>
#include <stdio.h>

__attribute__((noinline)) static double f(double x, double y)
{
    return sqrt(x) + exp(y) * pow(x, y);
}

int main(int argc, char **argv)
{
    printf("%f\\n", f(argc, argc + 1.0));
    return 0;
}
"""


def test_a_calls_callee_from_its_dwarf_call_site(tmp_path):
    """callee_name: the function a call calls, by the declaration its DW_TAG_call_site's
    origin names (`sqrt`, the linkage name, not gcc's `__builtin_sqrt`): what the value
    tracking reads a math function's result by (analyzer/frames.py)."""
    import subprocess

    (tmp_path / "m.c").write_text(MATH_CALLS)
    exe = tmp_path / "m"
    subprocess.run(["gcc", "-O2", "-g", "-o", str(exe), str(tmp_path / "m.c"), "-lm"], check=True)
    info = symbols.elf_info(str(exe))
    for callee in ("sqrt", "exp", "pow", "printf"):
        rets = _calls(exe, callee)
        assert rets, callee
        assert {info.callee_name(r) for r in rets} == {callee}, (callee, [info.callee_name(r) for r in rets])
        assert info.callee_name(rets[0] - 1) is None  # no call returns there
