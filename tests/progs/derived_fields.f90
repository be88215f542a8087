! A small Fortran solver written the way such codes are: a derived type with allocatable
! components allocated in a procedure of module mesh_mod and initialised by whole-array
! assignments (which gfortran -O2 compiles to memset), OpenMP loops over its fields, and a
! thread-private work array in a parallel subroutine (tests/e2e/test_fortran_fields.py).
module mesh_mod
  implicit none
  type :: field_t
     real(8), allocatable :: u(:,:), unew(:,:), rhs(:,:)
     integer, allocatable :: owner(:)
  end type field_t
contains
  subroutine field_alloc(f, n)
    type(field_t), intent(inout) :: f
    integer, intent(in) :: n
    allocate(f%u(n,n), f%unew(n,n), f%rhs(n,n))
    allocate(f%owner(n))
    f%u = 0.0d0
    f%unew = 0.0d0
    f%rhs = 1.0d0
    f%owner = 0
  end subroutine field_alloc

  subroutine sweep(f, n)
    type(field_t), intent(inout) :: f
    integer, intent(in) :: n
    integer :: i, j
    real(8) :: work(n)
    !$omp parallel do private(i, work) schedule(static)
    do j = 2, n - 1
       do i = 2, n - 1
          work(i) = 0.25d0 * (f%u(i-1,j) + f%u(i+1,j) + f%u(i,j-1) + f%u(i,j+1))
       end do
       do i = 2, n - 1
          f%unew(i,j) = work(i) + 0.01d0 * f%rhs(i,j)
       end do
    end do
    !$omp end parallel do
    !$omp parallel do private(i) schedule(static)
    do j = 2, n - 1
       do i = 2, n - 1
          f%u(i,j) = f%unew(i,j)
       end do
    end do
    !$omp end parallel do
  end subroutine sweep
end module mesh_mod

program dt
  use mesh_mod
  implicit none
  type(field_t) :: f
  integer :: n, it, steps
  character(len=32) :: arg
  n = 1400
  steps = 120
  if (command_argument_count() >= 1) then
     call get_command_argument(1, arg)
     read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
     call get_command_argument(2, arg)
     read(arg, *) steps
  end if
  call field_alloc(f, n)
  do it = 1, steps
     call sweep(f, n)
  end do
  print *, 'u(n/2,n/2) =', f%u(n/2, n/2)
end program dt
