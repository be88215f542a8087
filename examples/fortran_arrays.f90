! Fortran OpenMP program with a COMMON block and module arrays (known answers):
!   COMMON /grid/ u, v : u regular and read, v regular and written (static schedule)
!   module fields: w random (gathered through idx), idx regular
! usage: fortran_arrays [iterations]
module fields
  implicit none
  integer, parameter :: nm = 2097152
  double precision :: w(nm)
  integer :: idx(nm)
end module fields

program fortran_arrays
  use fields
  implicit none
  integer, parameter :: n = 4194304
  double precision :: u(n), v(n)
  common /grid/ u, v
  integer :: i, it, iters, nargs
  character(len=32) :: arg
  double precision :: s

  iters = 30
  nargs = command_argument_count()
  if (nargs >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) iters
  end if

  !$omp parallel do schedule(static)
  do i = 1, n
    u(i) = dble(mod(i, 7))
    v(i) = 0.0d0
  end do
  !$omp end parallel do

  !$omp parallel do schedule(static)
  do i = 1, nm
    w(i) = dble(i)
    idx(i) = 1 + mod(int(mod(int(i, 8) * 2654435761_8, int(nm, 8))), nm)
  end do
  !$omp end parallel do

  s = 0.0d0
  do it = 1, iters
    !$omp parallel do schedule(static)
    do i = 1, n
      v(i) = 2.0d0 * u(i) + dble(it)
    end do
    !$omp end parallel do
    !$omp parallel do schedule(static) reduction(+:s)
    do i = 1, nm
      s = s + w(idx(i))
    end do
    !$omp end parallel do
  end do
  print '(a, f20.1, f12.1)', 'checksum ', s, v(n / 2)
end program fortran_arrays
