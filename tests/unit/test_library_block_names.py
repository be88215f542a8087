"""Blocks a library allocates for one object of the user's are told apart by the
library's own names: a sparse-matrix class in a header the analyzer takes for a system
one (an `include/c++/` tree, as Eigen's /usr/include/eigen3 is), inlined into the
user's code at -O2, as Eigen's is.  Real binaries, as in test_analyzer_naming.py."""

from naming_helpers import _build, _calls, _stacks_profile

from numaprof.analyzer import analyze
from numaprof.analyzer.hot_objects import _is_constructor

MINI_SPARSE = """\
#pragma once
namespace mini {
template <typename T> struct holder {
    T *m_ptr;
    explicit holder(long n) { m_ptr = new T[n]; }
    T *release() { T *p = m_ptr; m_ptr = nullptr; return p; }
};
struct sparse {
    double *m_values = nullptr;
    int *m_indices = nullptr;
    int *m_outer = nullptr;
    void reserve(long nnz)
    {
        holder<double> newValues(nnz);
        holder<int> newIndices(nnz);
        m_values = newValues.release();
        m_indices = newIndices.release();
    }
    void resize(long rows) { m_outer = new int[rows + 1]; }
};
struct vec {
    double *m_data = nullptr;
    void resize(long n) { m_data = new double[n]; }
};
}  // namespace mini
"""

USER = """\
#include <cstdio>
#include <minisparse.h>

struct Problem {
    mini::sparse A;
    mini::vec x, y;
    void build(long n)
    {
        A.resize(n);
        A.reserve(5 * n);
        x.resize(n);
        y.resize(n);
    }
};

int main(int argc, char **argv)
{
    Problem p;
    p.build(argc * 1000L);
    std::printf("%p %p %p %p\\n", (void *)p.A.m_values, (void *)p.A.m_indices, (void *)p.A.m_outer,
                (void *)p.x.m_data);
    return 0;
}
"""


def test_a_librarys_blocks_of_one_object_get_the_librarys_names(tmp_path):
    inc = tmp_path / "include" / "c++"
    inc.mkdir(parents=True)
    (inc / "minisparse.h").write_text(MINI_SPARSE)
    exe = _build(tmp_path, "user.cpp", USER, "g++", ["-g", "-O2", "-I", str(inc)])
    news = _calls(exe, "_Znam")  # every new[]: the header's code inlined into Problem::build
    assert len(news) == 5, news
    path, addrs = _stacks_profile(tmp_path, exe, [[ra] for ra in news])
    got = sorted(o.name for o in analyze(path).objects if o.kind == "heap")
    # each of A's three blocks by the header's name for it; x and y are told apart by the
    # user's names already (vec's m_data stays out of them)
    assert got == sorted(["Problem::A (m_outer)", "Problem::A (newValues)", "Problem::A (newIndices)",
                          "Problem::x", "Problem::y"]), got


def test_constructors_are_told_from_other_members():
    assert _is_constructor("Eigen::internal::scoped_array<double>::scoped_array(long)")
    assert _is_constructor("Eigen::DenseStorage<int, -1, -1, 1, 0>::DenseStorage(long, long, long)")
    assert _is_constructor("std::vector<int, std::allocator<int> >::vector(unsigned long)")
    assert not _is_constructor("Eigen::SparseMatrix<double, 1, int>::resize(long, long)")
    assert not _is_constructor("mini::holder<double>::~holder()")
    assert not _is_constructor("main")
