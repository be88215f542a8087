! Loops for the Fortran parallel-first-touch safety check (tests/test_patch.py).
module grid
  implicit none
  integer, parameter :: nm = 1000
  double precision :: w(nm)
end module grid

program loops
  use grid
  implicit none
  integer, parameter :: n = 1000
  double precision :: u(n), v(n)
  double precision, dimension(n) :: z
  integer :: i, j
  double precision :: s

  ! SAFE: element-wise with intrinsics
  do i = 1, n
    u(i) = dble(mod(i, 7))
    v(i) = sqrt(u(i))
  end do

  ! UNSAFE: prefix sum
  do i = 2, n
    z(i) = z(i - 1) + u(i)
  end do

  ! UNSAFE: scalar accumulation
  s = 0.0d0
  do i = 1, n
    s = s + u(i)
  end do

  ! UNSAFE: calls a subroutine
  do i = 1, n
    call touch(u, i)
  end do

  ! UNSAFE: leaves early
  do i = 1, n
    if (u(i) < 0.0d0) exit
    w(i) = 1.0d0
  end do

  ! NESTED: the time loop is not parallel, the inner loop is
  do j = 1, 3
    do i = 1, nm
      w(i) = dble(j)
    end do
  end do

  ! UNSAFE: steps by two
  do i = 1, n, 2
    v(i) = 0.0d0
  end do

  print *, s, u(1), v(2), w(3), z(4)

contains

  subroutine touch(a, k)
    double precision, intent(inout) :: a(:)
    integer, intent(in) :: k
    a(k) = 1.0d0
  end subroutine touch

end program loops
