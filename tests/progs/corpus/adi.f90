! 2-D heat equation with a source, solved by alternating-direction implicit (ADI) steps,
! as a small Fortran solver is written: the fields are allocatable arrays of a module,
! allocated together by one `allocate(u(n, n), v(n, n), w(n, n))` in a module
! procedure; each half step solves one tridiagonal system per grid line (the Thomas
! algorithm) in two work arrays `cp`, `dp` that are locals of the sweep subroutine,
! made private to each thread of its `!$omp parallel do` (so on that thread's stack).
!
! sweep_x: implicit along the first (contiguous) index, one system per column j; the
! threads share the columns out with schedule(static): each thread owns a band of
! columns of u (read), w (read) and v (written).  sweep_y: implicit along the second
! index, one system per row i, strided through every column; each thread owns a band of
! rows, i.e. a slice of every column, of v (read) and u (written).
!
! Hot arrays and their known answer:
!   u   the solution: a band of columns per thread in sweep_x, a band of rows in
!       sweep_y -- each thread's part changes between the two phases       irregular
!   v   the half-step solution: the same two decompositions                irregular
!   w   the source term, read in sweep_x only, by columns                  regular
!   cp  Thomas coefficients, n doubles per thread on its stack, swept forward and back
!       for every line (~20 us), so a thread has been all over its copy between two
!       samples                                                    random, thread-private
!   dp  the same                                                   random, thread-private
!
! numaprof-corpus: run adi
! numaprof-corpus: array u pattern=irregular
! numaprof-corpus: array v pattern=irregular
! numaprof-corpus: array w pattern=regular
! numaprof-corpus: array cp pattern=random private=yes
! numaprof-corpus: array dp pattern=random private=yes
!
! usage: adi [n] [steps]
module heat
  implicit none
  integer :: n
  double precision :: r
  double precision, allocatable :: u(:, :), v(:, :), w(:, :)
contains
  subroutine setup(nn, rr)
    integer, intent(in) :: nn
    double precision, intent(in) :: rr
    integer :: i, j
    double precision :: x, y
    n = nn
    r = rr
    allocate(u(n, n), v(n, n), w(n, n))
    !$omp parallel do schedule(static) private(i, x, y)
    do j = 1, n
      do i = 1, n
        x = dble(i) / n - 0.5d0
        y = dble(j) / n - 0.5d0
        u(i, j) = 0.0d0
        v(i, j) = 0.0d0
        w(i, j) = merge(100.0d0, 0.0d0, x * x + y * y < 0.01d0)
      end do
    end do
    !$omp end parallel do
  end subroutine setup

  ! (1 - r d2/dx2) v = (1 + r d2/dy2) u + dt w, one tridiagonal system per column j
  subroutine sweep_x(dt)
    double precision, intent(in) :: dt
    double precision :: cp(n), dp(n)
    double precision :: rhs, m
    integer :: i, j
    !$omp parallel do schedule(static) private(i, rhs, m, cp, dp)
    do j = 2, n - 1
      cp(1) = 0.0d0
      dp(1) = 0.0d0
      do i = 2, n - 1
        rhs = u(i, j) + r * (u(i, j - 1) - 2.0d0 * u(i, j) + u(i, j + 1)) + dt * w(i, j)
        m = 1.0d0 + 2.0d0 * r + r * cp(i - 1)
        cp(i) = -r / m
        dp(i) = (rhs + r * dp(i - 1)) / m
      end do
      v(n, j) = 0.0d0
      do i = n - 1, 2, -1
        v(i, j) = dp(i) - cp(i) * v(i + 1, j)
      end do
      v(1, j) = 0.0d0
    end do
    !$omp end parallel do
  end subroutine sweep_x

  ! (1 - r d2/dy2) u = (1 + r d2/dx2) v, one tridiagonal system per row i
  subroutine sweep_y()
    double precision :: cp(n), dp(n)
    double precision :: rhs, m
    integer :: i, j
    !$omp parallel do schedule(static) private(j, rhs, m, cp, dp)
    do i = 2, n - 1
      cp(1) = 0.0d0
      dp(1) = 0.0d0
      do j = 2, n - 1
        rhs = v(i, j) + r * (v(i - 1, j) - 2.0d0 * v(i, j) + v(i + 1, j))
        m = 1.0d0 + 2.0d0 * r + r * cp(j - 1)
        cp(j) = -r / m
        dp(j) = (rhs + r * dp(j - 1)) / m
      end do
      u(i, n) = 0.0d0
      do j = n - 1, 2, -1
        u(i, j) = dp(j) - cp(j) * u(i, j + 1)
      end do
      u(i, 1) = 0.0d0
    end do
    !$omp end parallel do
  end subroutine sweep_y
end module heat

program adi
  use heat
  implicit none
  integer :: nn, steps, s
  character(len=32) :: arg
  double precision :: dt

  nn = 2048
  steps = 30
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) nn
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) steps
  end if
  if (nn < 4 .or. steps < 1) then
    write (0, '(a)') 'usage: adi [n >= 4] [steps >= 1]'
    stop 2
  end if
  dt = 1.0d-4
  call setup(nn, dt * (nn - 1) ** 2)
  do s = 1, steps
    call sweep_x(dt)
    call sweep_y()
  end do
  print '(a, i0, a, i0, a, es14.6)', 'adi: n=', n, ' steps=', steps, ' centre ', u(n / 2, n / 2)
end program adi
