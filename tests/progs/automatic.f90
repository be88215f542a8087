! A transport-sweep-like kernel written the way Fortran codes are: the cell update
! works in automatic arrays (psi, pc, den on one line; hv, fxhv on the next), local
! arrays whose size is known at run time only, which gfortran allocates with malloc on
! every call (without -fstack-arrays).  Every OpenMP thread sweeps its own groups; the
! first thread reaches the kernel through another line of the driver than the others.
module sweep_mod
  implicit none
contains
  subroutine cell_sweep(nang, ncell, q, w, flux, i0)
    integer, intent(in) :: nang, ncell, i0
    real(8), intent(in) :: q(nang, ncell), w(nang)
    real(8), intent(inout) :: flux(ncell)
    real(8), dimension(nang) :: psi, pc, den
    real(8), dimension(nang, 4) :: hv, fxhv
    integer :: i, l
    real(8) :: sum_hv
      do i = i0, min(i0 + 7, ncell)
        psi = q(:, i)
        do l = 1, 4
          psi = psi + 0.25d0 * w * q(:, mod(i + l, ncell) + 1)
        end do
        pc = psi * w + 1.0d0
        den = 1.0d0 / (pc + 2.0d0)
        hv = 1.0d0
        sum_hv = sum(hv)
        do l = 1, 4
          fxhv(:, l) = 2.0d0 * pc - psi * den
          where (fxhv(:, l) < 0.0d0) hv(:, l) = 0.0d0
        end do
        if (sum_hv /= sum(hv)) pc = pc * den
        where (den < 0.3d0)
          pc = 0.5d0 * pc
          den = den + 0.1d0
        end where
        flux(i) = flux(i) + sum(w * pc) + sum(hv(:, 1) * fxhv(:, 2))
      end do
  end subroutine cell_sweep
end module sweep_mod

program automatic
  use sweep_mod
  use omp_lib
  implicit none
  integer :: nang, ncell, ngroup, reps, g, i, r
  real(8), allocatable :: q(:, :), w(:), flux(:, :)
  character(len=32) :: arg
  nang = 48; ncell = 400; ngroup = 8; reps = 100
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) reps
  end if
  allocate (q(nang, ncell), w(nang), flux(ncell, ngroup))
  do i = 1, ncell
    q(:, i) = 1.0d0 / i
  end do
  w = 0.5d0
  flux = 0.0d0
  !$omp parallel do schedule(static, 1) private(g)
  do g = 1, ngroup
    do r = 1, reps
      do i = 1, ncell, 8
        if (omp_get_thread_num() == 0) then
          call cell_sweep(nang, ncell, q, w, flux(:, g), i)
        else
          call cell_sweep(nang, ncell, q, w, flux(:, g), i + 0)
        end if
      end do
    end do
  end do
  !$omp end parallel do
  print '(a, es12.4)', 'flux ', sum(flux)
end program automatic
