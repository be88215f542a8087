! Fortran module and COMMON arrays first touched through dummy arguments: `u` is an
! allocatable array of module `grids`, `v` a COMMON array; both are filled serially by
! subroutines that see them as dummy arguments (explicit-shape `x(n)` and assumed-shape
! `y(:)`), then streamed by every thread's static block.  The patch makes each fill loop
! `!$omp parallel do schedule(static)` in the subroutine that received the array.
!
! numaprof-patch: u kind=parallel_first_touch in=fill_explicit
! numaprof-patch: blk_ kind=parallel_first_touch in=fill_assumed
! (the profile names the COMMON block /blk/, whose only member is v, by its symbol)
!
! usage: modcommon [iterations]
module grids
  implicit none
  integer, parameter :: n = 2097152
  real(8), allocatable :: u(:)
contains
  subroutine fill_assumed(y)
    real(8), intent(out) :: y(:)
    integer :: j
    do j = 1, size(y)
      y(j) = dble(mod(j, 31)) * 0.25d0
    end do
  end subroutine fill_assumed
end module grids

subroutine fill_explicit(x, m)
  implicit none
  integer, intent(in) :: m
  real(8), intent(out) :: x(m)
  integer :: i
  do i = 1, m
    x(i) = dble(mod(i, 17)) * 0.5d0
  end do
end subroutine fill_explicit

program modcommon
  use grids
  implicit none
  real(8) :: v(n)
  common /blk/ v
  integer :: it, k, iters
  character(len=16) :: arg
  real(8) :: total
  interface
    subroutine fill_explicit(x, m)
      integer, intent(in) :: m
      real(8), intent(out) :: x(m)
    end subroutine fill_explicit
  end interface
  iters = 60
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    read (arg, *) iters
  end if
  allocate (u(n))
  call fill_explicit(u, n)
  call fill_assumed(v)
  total = 0.0d0
  do it = 1, iters
    !$omp parallel do schedule(static) reduction(+:total)
    do k = 1, n
      total = total + u(k) * 1.0001d0
    end do
    !$omp end parallel do
    !$omp parallel do schedule(static) reduction(+:total)
    do k = 1, n
      total = total + v(k) * 0.9999d0
    end do
    !$omp end parallel do
  end do
  print '(a, f0.3)', 'checksum ', total
end program modcommon
