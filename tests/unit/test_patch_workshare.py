"""Fortran's idiomatic initialisation is a whole-array assignment (``f%rhs = 1.0d0``),
which gfortran compiles to a loop or to a call of memset.  Parallel first touch there is
``!$omp parallel workshare`` around the statement (recommender/patch/loops_fortran.py);
a first touch inside memset, which names no line of the program, is traced to the first
statement that uses the array after its allocation."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from numaprof.recommender.patch import Patch, Refusal, parallelize_first_touch
from numaprof.recommender.patch.loops_fortran import (
    F_END_WORKSHARE,
    F_WORKSHARE,
    first_whole_assignment,
)
from numaprof.recommender.patch.source import load

SRC = """module mesh_mod
  implicit none
  type :: field_t
     real(8), allocatable :: u(:,:), rhs(:,:)
     integer, allocatable :: owner(:)
  end type field_t
  real(8), allocatable :: g(:)
contains
  subroutine field_alloc(f, n)
    type(field_t), intent(inout) :: f
    integer, intent(in) :: n
    real(8), allocatable :: w(:)
    allocate(f%u(n,n), f%rhs(n,n))
    allocate(f%owner(n))
    f%u = 0.0d0
    f%rhs(1, 1) = 2.0d0
    f%rhs = 1.0d0
    allocate(g(n), w(n))
    call fill(g)
    w = sqrt(2.0d0) * 3
    g = helper(n)
  end subroutine field_alloc

  subroutine fill(a)
    real(8), intent(out) :: a(:)
    a = 0
  end subroutine fill

  function helper(n) result(r)
    integer, intent(in) :: n
    real(8) :: r(n)
    r = 1
  end function helper
end module mesh_mod
"""


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "mesh.f90"
    p.write_text(SRC)
    return p


def test_whole_array_assignment_gets_a_workshare_pair_and_compiles(src, tmp_path):
    for needle, stmt in (("    f%u = 0.0d0", "f%u = 0.0d0"), ("    w = sqrt", "w = sqrt(2.0d0) * 3")):
        p = parallelize_first_touch(str(src), _line(SRC, needle), root=str(tmp_path))
        assert isinstance(p, Patch), p
        new = p.new_text.splitlines()
        i = new.index(f"    {stmt}")
        assert new[i - 1] == f"    {F_WORKSHARE}" and new[i + 1] == f"    {F_END_WORKSHARE}"
        out = tmp_path / "out.f90"
        out.write_text(p.new_text)
        if shutil.which("gfortran"):
            subprocess.run(["gfortran", "-fopenmp", "-Wall", "-Werror", "-fsyntax-only", str(out)],
                           cwd=tmp_path, check=True)


def test_what_workshare_would_not_parallelise_is_refused(src):
    # an element, not the whole array: no workshare (and no loop around it)
    r = parallelize_first_touch(str(src), _line(SRC, "f%rhs(1, 1) = 2.0d0"))
    assert isinstance(r, Refusal) and "whole-array assignment" in r.reason, r
    # a user function on the right: WORKSHARE would run it on one thread
    r = parallelize_first_touch(str(src), _line(SRC, "g = helper(n)"))
    assert isinstance(r, Refusal) and "`helper`" in r.reason, r


def test_first_use_after_the_allocation(src):
    s = load(str(src))
    alloc = _line(SRC, "allocate(f%u(n,n), f%rhs(n,n))")
    # the allocation of another component between: not a use of f%u
    assert first_whole_assignment(s, alloc, "f%u") == _line(SRC, "    f%u = 0.0d0")
    # f%rhs is first used by one element: its first touch is not a whole-array statement
    assert first_whole_assignment(s, alloc, "f%rhs") is None
    # g is first passed to a procedure, which may touch it anywhere
    assert first_whole_assignment(s, _line(SRC, "allocate(g(n), w(n))"), "g") is None
    assert first_whole_assignment(s, _line(SRC, "allocate(g(n), w(n))"), "w") == \
        _line(SRC, "    w = sqrt")


LEVELS = """module levels_mod
  implicit none
  type :: field_t
     real(8), allocatable :: t(:,:), k(:,:)
     integer :: n
  end type field_t
  type(field_t), allocatable :: level(:)
contains
  subroutine build(nl, n0)
    integer, intent(in) :: nl, n0
    integer :: l, n
    allocate(level(nl))
    n = n0
    do l = 1, nl
       level(l)%n = n
       allocate(level(l)%t(n, n), level(l)%k(n, n))
       level(l)%t = 0d0
       call fill(level(l)%k)
       n = n / 2
    end do
  end subroutine build

  subroutine fill(a)
    real(8), intent(out) :: a(:,:)
    a = 1
  end subroutine fill
end module levels_mod
"""


def test_an_elements_component_allocated_in_a_loop(tmp_path):
    """One array per level (`level(l)%t`, allocated in a loop over the levels, named so
    by the analyzer): its first use after the allocation is in the loop body, the
    allocation's own block, and the whole-array assignment is wrapped in WORKSHARE --
    not the loop over the levels around it, which would hand whole levels to threads."""
    p = tmp_path / "levels.f90"
    p.write_text(LEVELS)
    s = load(str(p))
    alloc = _line(LEVELS, "allocate(level(l)%t(n, n)")
    assert first_whole_assignment(s, alloc, "level(l)%t") == _line(LEVELS, "level(l)%t = 0d0")
    # passed to a procedure first: no statement to parallelise
    assert first_whole_assignment(s, alloc, "level(l)%k") is None
    patch = parallelize_first_touch(str(p), _line(LEVELS, "level(l)%t = 0d0"), root=str(tmp_path))
    assert isinstance(patch, Patch), patch
    new = patch.new_text.splitlines()
    i = new.index("       level(l)%t = 0d0")
    assert new[i - 1] == f"       {F_WORKSHARE}" and new[i + 1] == f"       {F_END_WORKSHARE}"
    assert "!$omp parallel do" not in patch.new_text
    if shutil.which("gfortran"):
        out = tmp_path / "out.f90"
        out.write_text(patch.new_text)
        subprocess.run(["gfortran", "-fopenmp", "-Wall", "-Werror", "-fsyntax-only", str(out)],
                       cwd=tmp_path, check=True)
