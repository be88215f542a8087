! A Fortran heat solver on a hierarchy of grids, written the way such codes are: an
! allocatable array of a derived type whose allocatable components are allocated one
! level at a time in a loop and initialised by whole-array assignments (memset at -O2),
! pointer aliases to them in the OpenMP sweeps (tests/e2e/test_fortran_fields.py).
!
!   level_fields N STEPS
module grids
  implicit none
  type :: field
     real(8), allocatable :: t(:,:), tnew(:,:), k(:,:)
     integer :: n
  end type field
  type(field), allocatable, target :: level(:)
contains
  subroutine build(nl, n0)
    integer, intent(in) :: nl, n0
    integer :: l, n
    allocate(level(nl))
    n = n0
    do l = 1, nl
       level(l)%n = n
       allocate(level(l)%t(0:n+1, 0:n+1), level(l)%tnew(0:n+1, 0:n+1), level(l)%k(n, n))
       level(l)%t = 0d0
       level(l)%tnew = 0d0
       level(l)%k = 1d0
       n = n / 2
    end do
  end subroutine build

  subroutine relax(f, steps)
    type(field), intent(inout), target :: f
    integer, intent(in) :: steps
    integer :: i, j, s, n
    real(8), pointer :: t(:,:), tn(:,:)
    n = f%n
    t => f%t
    tn => f%tnew
    do s = 1, steps
!$omp parallel do private(i)
       do j = 1, n
          do i = 1, n
             tn(i, j) = t(i, j) + 0.2d0 * f%k(i, j) * (t(i-1, j) + t(i+1, j) + t(i, j-1) + t(i, j+1) &
                  - 4d0 * t(i, j))
          end do
       end do
!$omp end parallel do
!$omp parallel do private(i)
       do j = 1, n
          do i = 1, n
             t(i, j) = tn(i, j) + 1d-3
          end do
       end do
!$omp end parallel do
    end do
  end subroutine relax
end module grids

program level_fields
  use grids
  implicit none
  integer :: l, it, n, steps
  character(len=16) :: arg
  real(8) :: total
  n = 512
  steps = 20
  if (command_argument_count() >= 2) then
     call get_command_argument(1, arg)
     read (arg, *) n
     call get_command_argument(2, arg)
     read (arg, *) steps
  end if
  call build(3, n)
  do it = 1, steps
     do l = 1, size(level)
        call relax(level(l), 4)
     end do
  end do
  total = 0d0
  do l = 1, size(level)
     total = total + sum(level(l)%t)
  end do
  print '(f0.3)', total
end program level_fields
