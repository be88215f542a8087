! A 2-D heat stencil written the way many Fortran solvers keep their fields: in a derived
! type with allocatable components, allocated and updated by module procedures that take
! the type as a dummy argument (passed by reference), with OpenMP loop nests over it.
! The conductivity of a point comes from a small lookup table through a permutation of
! the rows (a material map), `g%k(g%perm(i))`.  The two small components (6 and 12 KiB)
! are below the allocation shim's tracking threshold: nothing records their allocation,
! so only the code that reads them can name them (the component's descriptor in the
! derived type, reached through the dummy argument).
!
! Hot arrays and their known answer:
!   t      the temperature: each thread reads a band of columns (schedule(static))
!          and writes the same band back in the copy loop                  regular
!   tnew   the new temperature: written by bands of columns, read back     regular
!   perm   6 KiB read in order once per column: a thread sweeps it whole every few
!          microseconds, so between two samples it has been all over it    random
!   k      12 KiB gathered through the permutation                         random
!
! numaprof-corpus: run heat_dt
! numaprof-corpus: array t pattern=regular
! numaprof-corpus: array tnew pattern=regular
! numaprof-corpus: array perm pattern=random
! numaprof-corpus: array k pattern=random
!
! usage: heat_dt [steps]
module fields
  implicit none
  type :: grid_t
    integer :: n
    double precision, allocatable :: t(:, :)
    double precision, allocatable :: tnew(:, :)
    double precision, allocatable :: k(:)
    integer, allocatable :: perm(:)
  end type grid_t
contains
  subroutine grid_init(g, n)
    type(grid_t), intent(inout) :: g
    integer, intent(in) :: n
    integer :: i, j, s
    double precision :: r
    g%n = n
    allocate(g%t(n, n), g%tnew(n, n))
    allocate(g%k(n), g%perm(n))
    !$omp parallel do private(i)
    do j = 1, n
      do i = 1, n
        g%t(i, j) = dble(mod(i * j, 17))
        g%tnew(i, j) = 0.0d0
      end do
    end do
    !$omp end parallel do
    do i = 1, n
      g%k(i) = 1.0d0 + dble(mod(i, 5)) * 0.1d0
      g%perm(i) = i
    end do
    do i = n, 2, -1
      call random_number(r)
      j = 1 + int(r * i)
      s = g%perm(i)
      g%perm(i) = g%perm(j)
      g%perm(j) = s
    end do
  end subroutine grid_init

  subroutine relax(g)
    type(grid_t), intent(inout) :: g
    integer :: i, j, n
    n = g%n
    !$omp parallel do private(i)
    do j = 2, n - 1
      do i = 2, n - 1
        g%tnew(i, j) = 0.25d0 * g%k(g%perm(i)) * &
                       (g%t(i - 1, j) + g%t(i + 1, j) + g%t(i, j - 1) + g%t(i, j + 1))
      end do
    end do
    !$omp end parallel do
    !$omp parallel do private(i)
    do j = 2, n - 1
      do i = 2, n - 1
        g%t(i, j) = g%tnew(i, j)
      end do
    end do
    !$omp end parallel do
  end subroutine relax
end module fields

program heat_dt
  use fields
  implicit none
  type(grid_t) :: g
  integer :: step, steps
  character(len=32) :: arg
  steps = 900
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) steps
  end if
  call grid_init(g, 1500)
  do step = 1, steps
    call relax(g)
  end do
  print *, sum(g%t(1:g%n:100, 1:g%n:100))
end program heat_dt
