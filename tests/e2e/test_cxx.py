"""C++ objects: demangled names, allocations through libstdc++'s operator new named after
the user's line (tree-sitter-cpp), inlined std:: frames skipped; and end to end on the
recorded examples/cxx_arrays.cpp, whose right answers are known by construction (its
header comment)."""

from __future__ import annotations

import json
import re

import pytest
from helpers import EXAMPLES, run_numaprof

from numaprof.analyzer import cxxnames, srcnames, symbols

SRC = EXAMPLES / "cxx_arrays.cpp"


# ------------------------------------------------------------------------- demangling

@pytest.mark.parametrize("mangled, plain", [
    ("_ZN4grid5fieldE", "grid::field"),
    ("_ZN6MatrixC2Em", "Matrix::Matrix(unsigned long)"),
    ("_ZNSt6vectorIdSaIdEE17_M_default_appendEm",
     "std::vector<double, std::allocator<double> >::_M_default_append(unsigned long)"),
    ("_Znam", "operator new[](unsigned long)"),
    ("_Znwm@@GLIBCXX_3.4", "operator new(unsigned long)@@GLIBCXX_3.4"),  # versioned symbol
    ("_ZTV6Matrix", "vtable for Matrix"),
])
def test_demangle(mangled, plain):
    assert cxxnames.demangle(mangled) == plain


@pytest.mark.parametrize("full, short", [
    ("std::vector<double, std::allocator<double> >::_M_default_append(unsigned long)",
     "std::vector<double>::_M_default_append(unsigned long)"),
    ("double* alloc_array<double>(unsigned long)", "alloc_array<double>(unsigned long)"),
    ("void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>("
     "__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&)",
     "std::vector<int>::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int>>, "
     "int const&)"),
    ("std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_create(unsigned long&, "
     "unsigned long)", "std::string::_M_create(unsigned long&, unsigned long)"),
    ("std::unique_ptr<double [], std::default_delete<double []> >::reset(double*)",
     "std::unique_ptr<double []>::reset(double*)"),
    ("std::map<int, double, std::less<int>, std::allocator<std::pair<int const, double> > >::at(int const&)",
     "std::map<int, double>::at(int const&)"),
    ("std::vector<double, Pool<double> >::reserve(unsigned long)",  # not the default: kept
     "std::vector<double, Pool<double>>::reserve(unsigned long)"),
    ("unsigned long (anonymous namespace)::count<int>(int)", "(anonymous namespace)::count<int>(int)"),
    ("Mesh::allocate(unsigned long, int)", "Mesh::allocate(unsigned long, int)"),
    ("bool operator< <int>(X<int> const&, X<int> const&)", "bool operator< <int>(X<int> const&, X<int> const&)"),
    ("main._omp_fn.0", "main._omp_fn.0"),
    ("vtable for Foo<int>", "vtable for Foo<int>"),
])
def test_readable(full, short):
    assert cxxnames.readable(full) == short


@pytest.mark.parametrize("name", ["main", "field_", "__fields_MOD_w", "_Zz_not_mangled", "_Z", ""])
def test_demangle_leaves_other_names(name):
    assert cxxnames.demangle(name) == name


# ------------------------------------------------------------- naming from the source line

CXX_SNIPPET = """\
#include <memory>
#include <vector>
struct M { double *data_; double *b_; M(int n); };
M::M(int n) : b_(new double[n]) {
    data_ = new double[n];
}
int main() {
    int n = 10;
    double *a = new double[n];
    std::vector<double> v(n);
    std::vector<int> w{1, 2, 3};
    auto p = std::make_unique<double[]>(n);
    double *c = static_cast<double *>(malloc(n * 8));
    M m(n);
    v.resize(20);
    this->grid.push_back(1.0);
    std::unique_ptr<double[]> q(new double[n]);
    std::unique_ptr<double[]> r{new double[n]};
    u = std::unique_ptr<double[]>(new double[n]);
    s->owner.reset(new double[n]);
    std::vector<double> copy = v;
    other = v;
    use(new double[n]);
    keep.reset();
    this_is_no_declaration(n);
    return 0;
}
template <typename T> T *a1(size_t n) {
    void *p = nullptr; posix_memalign(&p, 64, n);  // a1
    return static_cast<T *>(p);
}
template <typename T> T *a2(size_t n) {
    void *p = malloc(n);  // a2
    return reinterpret_cast<T *>((p));
}
std::unique_ptr<double[]> a3(size_t n) {
    std::unique_ptr<double[]> p(new double[n]);  // a3
    return std::move(p);
}
double *a4(size_t n) {
    void *p = malloc(n);  // a4
    return (double *)p;
}
double *a5(size_t n) {
    void *p = malloc(n);  // a5
    keep(p);
    return static_cast<double *>(q);
}
"""


@pytest.fixture()
def snippet(tmp_path):
    path = tmp_path / "alloc.cpp"
    path.write_text(CXX_SNIPPET)
    lines = CXX_SNIPPET.splitlines()

    def line_of(text):
        return next(i + 1 for i, ln in enumerate(lines) if text in ln)

    return path, line_of


@pytest.mark.parametrize("text, name", [
    ("double *a = new double[n];", "a"),
    ("std::vector<double> v(n);", "v"),  # C++'s most vexing parse: a construction here
    ("std::vector<int> w{1, 2, 3};", "w"),
    ("auto p = std::make_unique", "p"),
    ("static_cast<double *>(malloc", "c"),
    ("data_ = new double[n];", "data_"),
    ("M::M(int n) : b_(new double[n])", "b_"),  # member initialiser
    ("M m(n);", "m"),
    ("v.resize(20);", "v"),  # the vector grows its own storage
    ("this->grid.push_back(1.0);", "this->grid"),
    ("std::unique_ptr<double[]> q(new double[n]);", "q"),
    ("std::unique_ptr<double[]> r{new double[n]};", "r"),
    ("u = std::unique_ptr<double[]>(new double[n]);", "u"),
    ("s->owner.reset(new double[n]);", "s->owner"),
    ("std::vector<double> copy = v;", "copy"),  # the copy constructor allocates
    ("other = v;", "other"),  # operator= allocates
])
def test_cxx_assigned_name(snippet, text, name):
    path, line_of = snippet
    assert srcnames.assigned_name(str(path), line_of(text)) == name


@pytest.mark.parametrize("text", ["this_is_no_declaration(n);", "return 0;", "use(new double[n]);",
                                  "keep.reset();"])
def test_cxx_no_name_without_assignment(snippet, text):
    path, line_of = snippet
    assert srcnames.assigned_name(str(path), line_of(text)) is None


@pytest.mark.parametrize("text, var, wrapper", [
    ("// a1", "p", True),  # return static_cast<T *>(p)
    ("// a2", "p", True),  # return reinterpret_cast<T *>((p))
    ("// a3", "p", True),  # return std::move(p)
    ("// a4", "p", True),  # return (double *)p
    ("// a5", "p", False),  # returns another pointer
])
def test_cxx_wrappers_seen_through_casts(snippet, text, var, wrapper):
    path, line_of = snippet
    assert srcnames.assigned_name(str(path), line_of(text)) == var
    assert srcnames.returns_allocation(str(path), line_of(text), var) is wrapper


def test_language_from_the_dwarf_name_for_archived_copies(snippet, tmp_path):
    """An archived source has no extension: the caller passes the language of the name
    DWARF gives; parsed as C, ``new`` is no call and nothing is named."""
    path, line_of = snippet
    copy = tmp_path / "608b566527fbee0f"
    copy.write_bytes(path.read_bytes())
    row = line_of("double *a = new double[n];")
    assert srcnames.assigned_name(str(copy), row, lang=symbols.source_language(str(path))) == "a"
    assert srcnames.assigned_name(str(copy), row) is None


@pytest.mark.parametrize("path, lang", [
    ("x.cpp", "cpp"), ("x.cc", "cpp"), ("x.cxx", "cpp"), ("x.C", "cpp"), ("x.hpp", "cpp"),
    ("x.c", "c"), ("x.h", "c"), ("x.f90", "fortran"), ("x.F", "fortran"),
])
def test_source_language(path, lang):
    assert symbols.source_language(path) == lang


@pytest.mark.parametrize("path, system", [
    ("/usr/include/c++/12/bits/new_allocator.h", True),
    ("/usr/lib/gcc/x86_64-linux-gnu/12/include/omp.h", True),
    ("/opt/gcc-14/include/c++/14/bits/stl_vector.h", True),
    ("/work/main/examples/cxx_arrays.cpp", False),
    ("/home/u/include/grid.hpp", False),
])
def test_system_headers(path, system):
    assert symbols.is_system_source(path) is system


# ---------------------------------------------------------------- the compiled example

def _line_of(text: str) -> int:
    lines = SRC.read_text().splitlines()
    found = [i + 1 for i, ln in enumerate(lines) if text in ln]
    assert len(found) == 1, (text, found)
    return found[0]


def test_static_symbols_demangled(examples_built):
    info = symbols.elf_info(str(examples_built / "cxx_arrays"))
    assert info is not None
    field = [o for o in info.objects if o.name == "grid::field"]
    assert len(field) == 1 and field[0].size == 2097152 * 8 and field[0].writable
    assert not [o.name for o in info.objects if o.name.startswith("_Z")]


def test_inlined_vector_allocation_resolves_to_the_users_line(examples_built):
    """Code inlined from std::vector's headers, walked out through the inlined calls
    (DW_TAG_inlined_subroutine) to the declaration in the user's file."""
    info = symbols.elf_info(str(examples_built / "cxx_arrays"))
    info.line_at(0)  # reads the line table
    addrs, files, _, _, _, names = info._lines
    header = [i for i, n in enumerate(names) if n.endswith("/new_allocator.h")]
    assert header, "no std::allocator code inlined into the example"
    cands = sorted({int(a) for a, f in zip(addrs.tolist(), files.tolist(), strict=True) if f in header})
    users = []
    for a in cands:
        pos = info.inline_positions(a)
        if not pos or not symbols.is_system_source(pos[0].file):
            continue  # another row at the same address decides its line
        user = next((p for p in pos if not symbols.is_system_source(p.file)), None)
        if user is not None:
            users.append((user.function, user.file.rsplit("/", 1)[-1], user.line))
    assert ("main", "cxx_arrays.cpp", _line_of("std::vector<double> v(n);")) in users, users


# ------------------------------------------------------------------------ end to end

@pytest.fixture(scope="module")
def cxx_report(examples_built, tmp_path_factory):
    out = tmp_path_factory.mktemp("cxx") / "cxx_arrays.data"
    # 8000 samples/s per thread: a short run that still gives every array enough samples
    run_numaprof("record", "-o", out, "--freq", "8000", "--", examples_built / "cxx_arrays", "20",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    doc = json.loads(run_numaprof("report", out, "--format", "json", check=True).stdout)
    return doc


def _obj(doc, name):
    found = [o for o in doc["objects"] if o["name"] == name]
    assert found, f"{name!r} not in the report; objects: {[o['name'] for o in doc['objects']]}"
    return found[0]


@pytest.mark.e2e
def test_cxx_objects_named_and_classified(cxx_report):
    doc = cxx_report
    a = _obj(doc, "a")
    v = _obj(doc, "v")
    data = _obj(doc, "Matrix::data_")  # a member of the object the constructor builds
    field = _obj(doc, "grid::field")
    tiles = _obj(doc, "tiles[]")  # the blocks of every tiles[t]
    # where: the user's lines, not operator new in libstdc++ nor std::vector's headers
    assert a["site"] == f"main@cxx_arrays.cpp:{_line_of('double *a = new double[n];')}"
    assert v["site"] == f"main@cxx_arrays.cpp:{_line_of('std::vector<double> v(n);')}"
    assert data["site"] == f"Matrix::Matrix(unsigned long)@cxx_arrays.cpp:{_line_of('data_ = new double[n];')}"
    assert field["site"] == ".bss@cxx_arrays"
    for o in (a, v, data, tiles):
        assert o["kind"] == "heap", o
    assert field["kind"] == "static"
    for o in (a, v, data, field):
        assert o["size"] == 2097152 * 8, (o["name"], o["size"])
    # grouping: four allocations from the same call stack are one object
    assert tiles["count"] == 4 and tiles["size"] == 2097152 // 4 * 8, tiles
    assert a["count"] == v["count"] == data["count"] == 1
    # patterns (the header comment's known answers)
    for o, want in ((a, "regular"), (field, "regular"), (tiles, "regular"), (v, "random"), (data, "random")):
        assert o["pattern"] == want, (o["name"], o["pattern"], o["samples"], o["features"])
    assert a["writes"] > 0.5 and tiles["writes"] > 0.5
    assert field["writes"] < 0.5 and v["writes"] < 0.5
    # the vector's value-initialisation fills it in the master thread, inside libstdc++
    assert v["first_touch"]["master_fraction"] >= 0.9


@pytest.mark.e2e
def test_no_mangled_names_shown(cxx_report):
    shown = [o["name"] for o in cxx_report["objects"]] + [o["site"] for o in cxx_report["objects"]]
    shown += [s for o in cxx_report["objects"] for s in o["first_touch"]["sites"]]
    assert not [s for s in shown if re.search(r"(^|[^\w])_Z[A-Za-z0-9_]+", s)], shown
