"""Scope-correct patches (recommender/patch/scope.py, place_static.py, place_cxx.py): the
names and sizes a patch writes denote, where it is inserted, the object the profile saw.

Every patch that is made is compiled against the real numaprof_place.h, most with the
probe statement the compile check uses, so gcc itself confirms the size at that point.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import ROOT

from numaprof.recommender.patch import (
    AlreadyPlaced,
    Patch,
    Refusal,
    parallelize_first_touch,
    patch_for_object,
    place_after_allocation,
    place_static,
    scope,
)
from numaprof.recommender.patch.edits import apply_edits
from numaprof.recommender.patch.source import load

INCLUDE = ROOT / "collector" / "include"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def line_of(text: str, needle: str) -> int:
    return text.splitlines().index(needle) + 1


def added(p: Patch) -> list[str]:
    return [ln[1:] for ln in p.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


def compiles(p: Patch, tmp_path: Path, *flags: str, probe: bool = True) -> subprocess.CompletedProcess:
    """Compile the patched file (with the size probe when it has one) with -Werror."""
    edits = list(p.edits) + ([p.info.probe] if probe and p.info.probe is not None else [])
    text = apply_edits(Path(p.path).read_bytes(), edits)
    out = tmp_path / ("check" + Path(p.path).suffix)
    out.write_text(text)
    cc = ["g++", "-std=c++17"] if out.suffix == ".cpp" else ["gcc", "-std=c11"]
    return subprocess.run([*cc, "-fsyntax-only", "-fopenmp", "-Wall", "-Werror", f"-I{INCLUDE}",
                           *flags, str(out)], capture_output=True, text=True)


def refusal(result, *words: str) -> Refusal:
    assert isinstance(result, Refusal), f"expected a refusal, got {result}"
    for w in words:
        assert w in result.reason, result.reason
    return result


# ------------------------------------------------------------------ static arrays

PARAMS = """\
#include <stdio.h>
#define N 2000
static int idx[N];
static unsigned perm[N];

static void fill(int idx[], int n)
{
    for (int i = 0; i < n; i++)
        idx[i] = (i * 7) % n;
}

static void shuffle(unsigned *perm, int n)
{
    for (int i = 0; i < n; i++)
        perm[i] = (unsigned)(n - i);
}

int main(void)
{
    int n = N;
    fill(idx, n);
    shuffle(perm, n);
    printf("%d %u\\n", idx[3], perm[4]);
    return 0;
}
"""


@pytest.mark.parametrize("name, words", [("idx", "the parameter `int idx[]` of fill()"),
                                         ("perm", "the parameter `unsigned *perm`")])
def test_array_hidden_by_a_parameter_is_placed_where_it_is_in_scope(tmp_path, name, words):
    """The motivating bug: inside fill(int idx[]), sizeof(idx) is a pointer's size
    (gcc warns for `int idx[]`, not even for `unsigned *perm`).  The call goes to the start
    of main, where the name is the file-scope array, and says why."""
    src = write(tmp_path, "params.c", PARAMS)
    touch = line_of(PARAMS, f"        {name}[i] = (i * 7) % n;" if name == "idx"
                    else "        perm[i] = (unsigned)(n - i);")
    p = place_static(src, name, "bind_block", before_line=touch, recorded_size=8000)
    assert isinstance(p, Patch), p
    new = p.new_text.splitlines()
    call = f"    numaprof_place({name}, sizeof({name}), NUMAPROF_BIND_BLOCK);"
    assert new[new.index("    int n = N;") + 1] == call
    assert added(p) == ['#include "numaprof_place.h"', call]
    assert p.info.kind == "place_static" and p.info.size_bytes == 8000
    assert words in p.info.scope and "start of main()" in p.info.scope
    r = compiles(p, tmp_path)
    assert r.returncode == 0, r.stderr


def test_old_patch_inside_the_function_fails_the_size_probe(tmp_path):
    """What the probe catches: the statement the old patcher wrote inside fill()."""
    src = write(tmp_path, "params.c", PARAMS)
    data = src.read_bytes()
    at = data.index(b"    for (int i = 0; i < n; i++)\n        idx[i]")
    from numaprof.recommender.patch.edits import Edit
    from numaprof.recommender.patch.place import size_probe

    text = apply_edits(data, [Edit(at, "    " + size_probe("sizeof(idx)", 8000) + "\n")])
    out = tmp_path / "old.c"
    out.write_text(text)
    r = subprocess.run(["gcc", "-fsyntax-only", str(out)], capture_output=True, text=True)
    assert r.returncode != 0 and "negative" in r.stderr


def test_without_a_place_in_scope_the_line_to_add_by_hand(tmp_path):
    text = PARAMS.replace("int main(void)", "int run(void)")
    src = write(tmp_path, "lib.c", text)
    r = refusal(place_static(src, "idx", "cyclic", before_line=line_of(
        text, "        idx[i] = (i * 7) % n;"), recorded_size=8000),
        "the parameter `int idx[]` of fill()", "not the file-scope array")
    assert r.by_hand.startswith("numaprof_place(idx, sizeof(idx), NUMAPROF_CYCLIC);")
    assert "file-scope array" in r.by_hand


def test_cxx_names_the_hidden_global_with_its_scope(tmp_path):
    src = write(tmp_path, "params.cpp", PARAMS)
    p = place_static(src, "idx", "cyclic", before_line=line_of(
        PARAMS, "        idx[i] = (i * 7) % n;"), recorded_size=8000, at_main=False)
    assert isinstance(p, Patch), p
    assert "    numaprof_place(::idx, sizeof(::idx), NUMAPROF_CYCLIC);" in added(p)
    r = compiles(p, tmp_path)
    assert r.returncode == 0, r.stderr


def test_shadowing_local_macro_and_late_definition_are_refused(tmp_path):
    text = ("#define grid mesh\nstatic double mesh[64];\n"
            "void f(void) {\n    double a[4];\n    for (int i = 0; i < 4; i++) a[i] = i;\n"
            "    for (int i = 0; i < 64; i++) grid[i] = 0;\n}\n"
            "void g(void) {\n    for (int i = 0; i < 8; i++) late[i] = 0;\n}\n"
            "static double late[8];\n"
            "void h(void) {\n    double a2 = 0;\n    { double mesh = 1; a2 += mesh; }\n"
            "    for (int i = 0; i < 64; i++) mesh[i] = a2;\n}\n")
    src = write(tmp_path, "odd.c", text)
    refusal(place_static(src, "grid", "cyclic", before_line=6), "not an array defined")
    refusal(place_static(src, "late", "cyclic", before_line=9), "declared after that point")
    # the inner block's `mesh` is closed before the loop: the file-scope array it is
    p = place_static(src, "mesh", "cyclic", before_line=15, at_main=False)
    assert isinstance(p, Patch) and "    numaprof_place(mesh, sizeof(mesh), NUMAPROF_CYCLIC);" \
        in added(p)
    decl = scope.lookup(load(str(src)), "mesh", len(text.encode()) - 40)
    assert decl.scope == "file"
    macro = scope.lookup(load(str(src)), "grid", 60)
    assert macro.scope == "macro"


def test_typedef_array_macro_sizes_and_a_wrong_recorded_size(tmp_path):
    text = ("#define ROWS 16\n#define COLS (ROWS * 4)\ntypedef float row_t[COLS];\n"
            "static row_t table[ROWS];\ntypedef double vec_t[ROWS];\nstatic vec_t v;\n"
            "int main(void) {\n    table[0][0] = 1;\n    v[0] = 2;\n    return 0;\n}\n")
    src = write(tmp_path, "td.c", text)
    p = place_static(src, "table", "cyclic", recorded_size=16 * 64 * 4)
    assert isinstance(p, Patch) and p.info.size_bytes == 4096
    assert compiles(p, tmp_path).returncode == 0
    p = place_static(src, "v", "cyclic", recorded_size=16 * 8)
    assert isinstance(p, Patch) and p.info.size_bytes == 128
    assert compiles(p, tmp_path).returncode == 0
    refusal(place_static(src, "v", "cyclic", recorded_size=4096), "128 bytes",
            "recorded 4096")


def test_incomplete_extern_declaration_is_refused(tmp_path):
    text = ("extern double ext[];\nvoid init(void) {\n    for (int i = 0; i < 8; i++)\n"
            "        ext[i] = 0;\n}\nint main(void) { init(); return 0; }\n")
    src = write(tmp_path, "ext.c", text)
    refusal(place_static(src, "ext", "cyclic", before_line=4), "without its size")


def test_sizes_in_if_branches_are_left_to_the_compiler(tmp_path):
    text = ("#ifdef BIG\nstatic double buf[1000];\n#else\nstatic double buf[10];\n#endif\n"
            "int main(void) {\n    buf[0] = 1;\n    return (int)buf[0];\n}\n")
    src = write(tmp_path, "cond.c", text)
    p = place_static(src, "buf", "cyclic", recorded_size=8000)
    assert isinstance(p, Patch) and p.info.size_bytes is None and p.info.probe is not None
    assert compiles(p, tmp_path, "-DBIG").returncode == 0
    assert compiles(p, tmp_path).returncode != 0  # without -DBIG it is the 80-byte one


def test_existing_placement_of_a_static_is_already_placed(tmp_path):
    text = ('#include "numaprof_place.h"\nstatic double a[512];\nint main(void) {\n'
            "    numaprof_place(a, sizeof(a), NUMAPROF_CYCLIC);\n"
            "    for (int i = 0; i < 512; i++) a[i] = i;\n    return 0;\n}\n")
    src = write(tmp_path, "placed.c", text)
    got = place_static(src, "a", "bind_block", before_line=5)
    assert isinstance(got, AlreadyPlaced) and got.line == 4
    assert got.constant == "NUMAPROF_CYCLIC" and got.statement.startswith("numaprof_place(a,")


# ------------------------------------------------------------------ heap arrays

def test_statement_that_changes_its_size_name_is_refused(tmp_path):
    text = ("#include <stdlib.h>\nint main(int argc, char **argv) {\n    size_t n = argc * 100u;\n"
            "    double *a;\n    a = malloc(n * sizeof *a), n = 0;\n    (void)argv;\n"
            "    return a == 0;\n}\n")
    src = write(tmp_path, "chg.c", text)
    r = refusal(place_after_allocation(src, 5, "a", "cyclic"), "also changes `n`")
    assert "numaprof_place(a," in r.by_hand


def test_constant_heap_size_is_checked_against_the_recorded_one(tmp_path):
    text = ("#include <stdlib.h>\n#define N (1 << 10)\nint main(void) {\n"
            "    double *v = malloc(N * sizeof *v);\n    return v == 0;\n}\n")
    src = write(tmp_path, "heap.c", text)
    p = place_after_allocation(src, 4, "v", "cyclic", recorded_size=8192)
    assert isinstance(p, Patch) and p.info.size_bytes == 8192 and p.info.probe is not None
    assert compiles(p, tmp_path).returncode == 0
    refusal(place_after_allocation(src, 4, "v", "cyclic", recorded_size=100),
            "8192 bytes", "recorded 100")


def test_existing_call_after_the_allocation_is_already_placed(tmp_path):
    text = ("#include <stdlib.h>\n#include \"numaprof_place.h\"\nint main(void) {\n"
            "    double *v = malloc(4096 * sizeof *v);\n"
            "    numaprof_place((void *)&v[0], 4096 * sizeof *v, NUMAPROF_BIND_BLOCK);\n"
            "    return v == 0;\n}\n")
    src = write(tmp_path, "heap2.c", text)
    got = place_after_allocation(src, 4, "v", "cyclic")
    assert isinstance(got, AlreadyPlaced) and got.constant == "NUMAPROF_BIND_BLOCK"


def test_wrapper_named_after_the_callers_variable_gives_the_call_by_hand(tmp_path):
    text = ("#include <stdlib.h>\nstatic double *make(size_t n) {\n"
            "    double *p = malloc(n * sizeof *p);\n    return p;\n}\n"
            "int main(void) {\n    double *grid = make(512);\n    return grid == 0;\n}\n")
    src = write(tmp_path, "wrap.c", text)
    r = refusal(place_after_allocation(src, 3, "grid", "cyclic", recorded_size=4096),
                "`make`, which returns it")
    assert r.by_hand.startswith("numaprof_place(grid, 4096, NUMAPROF_CYCLIC);")


WRAPPED = """\
#include <stdlib.h>
typedef struct { int nx, ny; double *u, *rhs; } grid_t;
static double *alloc_field(int nx, int ny)
{
    double *p = malloc(sizeof(double) * (size_t)nx * ny);
    if (!p)
        exit(1);
    return p;
}
static double *scratch(size_t n) { return calloc(n, sizeof(double)); }
static double *odd(size_t n) { size_t bytes = n * 8; return malloc(bytes); }
static void grid_init(grid_t *g, int nx, int ny)
{
    g->u = alloc_field(nx + 2, ny);
    g->rhs = alloc_field(nx, ny);
    double *tmp = scratch(g->nx * 4);
    double *w = odd(64);
    free(tmp);
    free(w);
}
"""


def test_call_of_a_wrapper_is_placed_with_its_size_in_the_callers_names(tmp_path):
    """`g->u = alloc_field(nx + 2, ny);` (the array is named after the caller's variable):
    the placement goes after the call with the wrapper's byte count written in the call's
    arguments, and gcc evaluates it to what the wrapper allocates."""
    src = write(tmp_path, "wrapped.c", WRAPPED)
    p = place_after_allocation(src, line_of(WRAPPED, "    g->u = alloc_field(nx + 2, ny);"),
                               "g->u", "bind_block")
    assert isinstance(p, Patch), p
    assert added(p)[-1].strip() == ("numaprof_place(g->u, sizeof(double) * (size_t)(nx + 2) * (ny), "
                                    "NUMAPROF_BIND_BLOCK);")
    assert compiles(p, tmp_path).returncode == 0
    c = place_after_allocation(src, line_of(WRAPPED, "    double *tmp = scratch(g->nx * 4);"),
                               "tmp", "cyclic")
    assert isinstance(c, Patch), c
    assert added(c)[-1].strip() == "numaprof_place(tmp, (g->nx * 4) * sizeof(double), NUMAPROF_CYCLIC);"
    assert compiles(c, tmp_path).returncode == 0


def test_wrapper_whose_size_is_its_own_local_is_refused_with_the_line_by_hand(tmp_path):
    src = write(tmp_path, "wrapped.c", WRAPPED)
    r = refusal(place_after_allocation(src, line_of(WRAPPED, "    double *w = odd(64);"), "w",
                                       "cyclic", recorded_size=512),
                "cannot be written with the call's arguments")
    assert r.by_hand.startswith("numaprof_place(w, 512, NUMAPROF_CYCLIC);")


def test_a_wrapper_defined_in_an_included_header_is_followed(tmp_path):
    """CoMD allocates every atom array through `comdMalloc`, a static function of its
    memUtils.h: `atoms->f = (real3*) comdMalloc(maxTotalAtoms*sizeof(real3));`.  The
    header beside the file is read for the wrapper's definition; one that does not return
    its allocation's block is not a wrapper."""
    (tmp_path / "mem.h").write_text(
        "#include <stdlib.h>\n"
        "static void *xMalloc(size_t iSize)\n{\n    return malloc(iSize);\n}\n"
        "static void *offset(size_t n)\n{\n    char *p = malloc(n + 16);\n    return p + 16;\n}\n")
    text = ("#include \"mem.h\"\n"
            "typedef struct { double *f, *g; } atoms_t;\n"
            "void init(atoms_t *atoms, int n)\n{\n"
            "    atoms->f = (double *) xMalloc(n * sizeof(double));\n"
            "    atoms->g = (double *) offset(n * sizeof(double));\n"
            "}\n")
    src = write(tmp_path, "atoms.c", text)
    p = place_after_allocation(src, 5, "atoms->f", "cyclic")
    assert isinstance(p, Patch), p
    assert added(p)[-1].strip() == "numaprof_place(atoms->f, (n * sizeof(double)), NUMAPROF_CYCLIC);"
    assert compiles(p, tmp_path).returncode == 0
    refusal(place_after_allocation(src, 6, "atoms->g", "cyclic"), "no malloc")


# ------------------------------------------------------------------ C++ members

HEADER = """\
#include <deque>
#include <vector>
class Grid {
public:
    explicit Grid(std::size_t n, std::vector<double> w);
    void allocate();
private:
    std::size_t n_;
    std::vector<double> u;
    std::vector<double> w;
    std::deque<double> q;
    std::vector<bool> flags;
    double *raw;
};
"""

BODY = """\
#include "grid.hpp"
Grid::Grid(std::size_t n, std::vector<double> w) : n_(n), u(n), w(w), raw(new double[n])
{
}

void Grid::allocate()
{
    u.resize(n_);
    q.resize(n_);
    flags.resize(n_);
    this->w.reserve(n_);
}
"""


@pytest.fixture
def grid(tmp_path):
    hdr = write(tmp_path, "grid.hpp", HEADER)
    body = write(tmp_path, "grid.cpp", BODY)
    return hdr, body


def test_vector_member_sized_in_a_member_function_defined_elsewhere(grid, tmp_path):
    hdr, body = grid
    line = line_of(BODY, "    u.resize(n_);")
    p = place_after_allocation(body, line, None, "bind_block", sources=[str(hdr), str(body)])
    assert isinstance(p, Patch), p
    assert p.info.kind == "place_vector"
    assert "    numaprof_place(u.data(), u.capacity() * sizeof(*u.data()), " \
           "NUMAPROF_BIND_BLOCK);" in added(p)
    assert "grid.hpp" in p.info.scope  # the member, found in the recorded header
    assert compiles(p, tmp_path, f"-I{tmp_path}").returncode == 0
    # without the header among the recorded sources the type is unknown: no guess
    refusal(place_after_allocation(body, line, None, "bind_block", sources=[str(body)]),
            "not declared in the recorded sources")
    p = place_after_allocation(body, line_of(BODY, "    this->w.reserve(n_);"), None, "cyclic",
                               sources=[str(hdr)])
    assert "    numaprof_place(this->w.data(), this->w.capacity() * sizeof(*this->w.data()), " \
           "NUMAPROF_CYCLIC);" in added(p)


@pytest.mark.parametrize("needle, words", [
    ("    q.resize(n_);", ["std::deque<double>", "not a std::vector"]),
    ("    flags.resize(n_);", ["std::vector<bool>", "no data()"]),
])
def test_containers_without_contiguous_data_are_refused(grid, needle, words):
    hdr, body = grid
    refusal(place_after_allocation(body, line_of(BODY, needle), None, "cyclic",
                                   sources=[str(hdr)]), *words)


def test_member_initialisers_are_placed_in_the_constructor_body(grid, tmp_path):
    """`: u(n)` and `: raw(new double[n])` get their call at the start of the body; the
    parameter `w` hides the member `w` there, so that one is `this->w`."""
    hdr, body = grid
    line = line_of(BODY, "Grid::Grid(std::size_t n, std::vector<double> w) : n_(n), u(n), "
                         "w(w), raw(new double[n])")
    got = {}
    for var in ("u", "w", "raw"):
        p = place_after_allocation(body, line, var, "bind_block", sources=[str(hdr)])
        assert isinstance(p, Patch), (var, p)
        assert p.info.kind == "place_in_constructor"
        got[var] = p
        assert compiles(p, tmp_path, f"-I{tmp_path}").returncode == 0, var
    assert "    numaprof_place(u.data(), u.size() * sizeof(*u.data()), NUMAPROF_BIND_BLOCK);" \
        in added(got["u"])
    assert "    numaprof_place(this->w.data(), this->w.size() * sizeof(*this->w.data()), " \
           "NUMAPROF_BIND_BLOCK);" in added(got["w"])
    assert "    numaprof_place(raw, n * sizeof(*raw), NUMAPROF_BIND_BLOCK);" in added(got["raw"])
    refusal(place_after_allocation(body, line, "n_", "cyclic", sources=[str(hdr)]),
            "allocates no array")


def test_vector_first_touched_in_the_standard_library_falls_back_to_data(grid, tmp_path):
    """parallel_init for a vector whose pages libstdc++ wrote (the first-touch site is in
    stl_algobase.h) is refused with that reason, and bind_block through data() is the
    patch — not "stl_algobase.h is not among the recorded sources" and nothing."""
    from numaprof.recommender.fixes import attach_patches
    from numaprof.recommender.model import ObjectSuggestion, Prediction, Suggestions

    hdr, body = grid
    line = line_of(BODY, "    this->w.reserve(n_);")
    obj = SimpleNamespace(name=f"Grid::allocate()@grid.cpp:{line}", kind="heap", size=800,
                          count=1, site=f"Grid::allocate()@grid.cpp:{line}",
                          first_touch=SimpleNamespace(sites=[
                              "void std::__fill_a1<double*, double>(double*, double*, double "
                              "const&)@stl_algobase.h:921"]))
    preds = [Prediction(pol, 0.5, 1.0, 1.0, change="patch") for pol in ("parallel_init",
                                                                         "bind_block")]
    sug = ObjectSuggestion(obj.name, "parallel_init", "Serially initialised.", preds[0], preds,
                           change="patch")
    result = Suggestions(target=None, target_name="2s", objects=[sug], notes=[])
    analysis = SimpleNamespace(objects=[obj], profile=SimpleNamespace(path=None, command=[]))
    [patch] = attach_patches(result, analysis, [str(hdr), str(body)], str(tmp_path))
    assert sug.policy == "bind_block" and sug.alternatives[0].policy == "bind_block"
    assert "first touched inside the C++ standard library" in sug.reason
    assert "not among the recorded sources" not in sug.reason
    assert sug.fix.kind == "place_vector" and "this->w.data()" in sug.patch
    assert patch.path == str(body)


# ------------------------------------------------------------------ Fortran units

FORTRAN = """\
module tables
  implicit none
  real(8) :: lut(100)
end module tables

subroutine other()
  implicit none
  real(8) :: b(100)
  b = 0
end subroutine other

subroutine uses_module(n)
  use tables
  implicit none
  integer, intent(in) :: n
  integer :: i
  do i = 1, n
    lut(i) = 1.0d0
  end do
end subroutine uses_module

subroutine calls_b(n)
  implicit none
  integer, intent(in) :: n
  real(8), external :: b
  real(8) :: c(100)
  integer :: i
  do i = 1, n
    c(i) = b(i)
  end do
end subroutine calls_b

program host
  implicit none
  real(8) :: h(100)
  call inner(100)
  print *, h(1)
contains
  subroutine inner(n)
    integer, intent(in) :: n
    integer :: k
    do k = 1, n
      h(k) = 2.0d0
    end do
  end subroutine inner
end program host
"""


def test_fortran_arrays_are_known_by_unit_module_and_host(tmp_path):
    src = write(tmp_path, "units.f90", FORTRAN)
    for needle in ("    lut(i) = 1.0d0", "      h(k) = 2.0d0"):
        p = parallelize_first_touch(src, line_of(FORTRAN, needle))
        assert isinstance(p, Patch), (needle, p)
        assert p.info.kind == "parallel_first_touch"
    # `b` is an array in other(), a function here: calling it may have side effects
    refusal(parallelize_first_touch(src, line_of(FORTRAN, "    c(i) = b(i)")), "calls `b`")


# ------------------------------------------------------------------ from objects

def test_patch_for_object_reports_an_existing_placement_in_any_recorded_file(tmp_path):
    main = write(tmp_path, "main.c", '#include "numaprof_place.h"\nextern double g[64];\n'
                 "void touch(void);\nint main(void) {\n"
                 "    numaprof_place(g, 64 * sizeof(double), NUMAPROF_CYCLIC);\n"
                 "    touch();\n    return 0;\n}\n")
    lib = write(tmp_path, "lib.c", "double g[64];\nvoid touch(void) {\n"
                "    for (int i = 0; i < 64; i++)\n        g[i] = i;\n}\n")
    obj = SimpleNamespace(name="g", kind="static", size=512, count=1, site=".bss@app",
                          first_touch=SimpleNamespace(sites=["touch@lib.c:4"]))
    got = patch_for_object(obj, "cyclic", [str(main), str(lib)])
    assert isinstance(got, AlreadyPlaced) and got.path == str(main) and got.line == 5


# ------------------------------------------------------------------ placement in effect

def _heap_suggestion(tmp_path, pages_policy, mixed):
    from numaprof.recommender.fixes import attach_patches
    from numaprof.recommender.model import ObjectSuggestion, Prediction, Suggestions

    text = ("#include <stdlib.h>\nint main(void) {\n    double *v = malloc(65536 * sizeof *v);\n"
            "    for (int i = 0; i < 65536; i++) v[i] = i;\n    free(v);\n    return 0;\n}\n")
    src = write(tmp_path, "heap.c", text)
    obj = SimpleNamespace(name="v", kind="heap", size=65536 * 8, count=1, site="main@heap.c:3",
                          first_touch=SimpleNamespace(sites=["main@heap.c:4"]),
                          pages_policy=pages_policy, pages_policy_mixed=mixed,
                          pages_source="move_pages_at_free")
    pred = Prediction("bind_block", 0.9, 1.0, 1.0, change="patch")
    sug = ObjectSuggestion(obj.name, "bind_block", "Serially initialised.", pred, [pred],
                           change="patch")
    result = Suggestions(target=None, target_name="2s", objects=[sug], notes=[])
    analysis = SimpleNamespace(objects=[obj], profile=SimpleNamespace(path=None, command=[]))
    return attach_patches(result, analysis, [str(src)], str(tmp_path)), sug


def test_placement_the_kernel_reports_in_effect_is_already_placed(tmp_path):
    """Re-recorded after --apply, the pages of v are preferred per block (what
    numaprof_place's bind_block does): suggest must not propose the same call again, even
    when the call is not in the recorded source (a library, a build that placed it)."""
    patches, sug = _heap_suggestion(tmp_path, "preferred", True)
    assert patches == [] and sug.patch in ("", None)
    assert sug.fix.status == "already placed" and not sug.fix.statement
    assert "kernel reports a preferred" in sug.fix.checks[0]
    assert "move_pages at free" in sug.fix.checks[0]


def test_a_different_policy_in_effect_is_replaced_and_said(tmp_path):
    """numactl --interleave is not bind_block: the patch is offered and says it replaces
    the interleave the pages have now."""
    patches, sug = _heap_suggestion(tmp_path, "interleave", False)
    assert len(patches) == 1 and sug.fix.status == "offered"
    assert "interleave memory policy now" in sug.reason and "replaces it" in sug.reason
