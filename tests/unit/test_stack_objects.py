"""Stack arrays named from DWARF locals (analyzer/frames.py, analyzer/varattr.py) in real
binaries built with gcc and gfortran at -O2 and -O3.

The C programs take their own samples: at a point of an OpenMP parallel region a few
instructions of inline assembly read the instruction address and the stack and frame
pointers, and the program writes them with the address it then accesses and its
/proc/self/maps.  The profile built from those values holds exactly what the collector
records (docs/profile-format.md), so the frame the analyzer computes from DWARF and the
call-frame information is checked against the running program's own registers.
"""

import shutil
import subprocess

import numpy as np
import profgen  # noqa: E402
import pytest
from helpers import build_program

from numaprof.analyzer import analyze, frames, symbols  # noqa: E402

PROBES = 300
NCELLS = 4096
SIZES = [f"-DNC={NCELLS}", f"-DNP={PROBES}"]

C_PRIVATE = r"""
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct probe { uint64_t ip, sp, bp, addr; int thread; };
static struct probe probes[2][NP];

__attribute__((noinline)) static void clear(unsigned *h, size_t n) { memset(h, 0, n); }

int main(void)
{
    unsigned long long check = 0;
#pragma omp parallel num_threads(2) reduction(+:check)
    {
        unsigned hist[NC];
        int t = omp_get_thread_num();
        clear(hist, sizeof hist);
        for (int k = 0; k < NP; k++) {
            unsigned c = (unsigned)((k + 1) * 2654435761u) % NC;
            uint64_t ip, sp, bp;
            __asm__ volatile("lea 1f(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2\n1:"
                             : "=r"(ip), "=r"(sp), "=r"(bp));
            hist[c] += (unsigned)k;
            probes[t][k] = (struct probe){ip, sp, bp, (uint64_t)(uintptr_t)&hist[c], t};
        }
        for (int i = 0; i < NC; i++)
            check += hist[i];
    }
    FILE *m = fopen("/proc/self/maps", "r");
    char line[4096];
    while (m && fgets(line, sizeof line, m))
        printf("map %s", line);
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < NP; k++)
            printf("probe %d %llx %llx %llx %llx\n", t, (unsigned long long)probes[t][k].ip,
                   (unsigned long long)probes[t][k].sp, (unsigned long long)probes[t][k].bp,
                   (unsigned long long)probes[t][k].addr);
    printf("check %llu\n", check);
    return 0;
}
"""


def _run(exe):
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                         env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"}).stdout
    maps, probes = [], []
    for line in out.splitlines():
        if line.startswith("map "):
            f = line[4:].split(maxsplit=5)
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            maps.append((lo, hi - lo, int(f[2], 16), f[5] if len(f) > 5 else "", f[1]))
        elif line.startswith("probe "):
            t, ip, sp, bp, addr = line.split()[1:]
            probes.append((int(t), int(ip, 16), int(sp, 16), int(bp, 16), int(addr, 16)))
    return maps, probes


def _bp_sp(sp: int, bp: int) -> int:
    """The collector's samples.bp_sp: rbp - rsp, -2^31 where it does not fit."""
    d = bp - sp
    return d if -(2**31) < d < 2**31 else -(2**31)


def _profile(path, maps, samples, *, old_bp: bool = False):
    """A soft-backend profile: the program's mappings and the given samples (thread,
    ip, sp, bp, addr, base_reg, base_off); rbp as the collector writes it (bp_sp), or
    with ``old_bp`` as profiles before that did (bp)."""
    w = profgen.ProfileWriter(path)
    w.manifest(cwd=str(path.parent))
    w.topology([[0, 1]])
    n = len(maps)
    w.table("mappings", time=[0] * n, pid=[7] * n, start=[m[0] for m in maps], len=[m[1] for m in maps],
            pgoff=[m[2] for m in maps], prot=[(4 if "r" in m[4] else 0) | (2 if "w" in m[4] else 0)
                                              | (1 if "x" in m[4] else 0) for m in maps],
            flags=[2] * n, path=[m[3] for m in maps])
    k = len(samples)
    w.table("threads", pid=[7, 7], tid=[7, 8], comm=["prog", "prog"])
    w.table("samples", time=list(range(1000, 1000 + 10 * k, 10)), pid=[7] * k,
            tid=[7 + s[0] for s in samples], cpu=[s[0] for s in samples], ip=[s[1] for s in samples],
            addr=[s[4] for s in samples], access=[3] * k, size=[4] * k, rule=[1] * k,
            sp=[s[2] for s in samples], insn_off=[0] * k,
            base_reg=[s[5] if len(s) > 5 else 0 for s in samples],
            index_reg=[0] * k, base_off=[s[6] if len(s) > 6 else -(2**31) for s in samples],
            **({"bp": [s[3] for s in samples]} if old_bp else {"bp_sp": [_bp_sp(s[2], s[3]) for s in samples]}))
    return path


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_private_local_of_a_parallel_region(tmp_path, opt):
    """`hist`, a local of the outlined parallel region on each thread's stack: one object
    named by the variable, with one instance per thread, thread-private, attributed by
    frame; its accesses' offsets are within one 16 KiB instance."""
    exe = build_program(tmp_path, "priv.c", C_PRIVATE, "gcc", ["-g", opt, "-fopenmp", *SIZES])
    maps, probes = _run(exe)
    assert len(probes) == 2 * PROBES
    a = analyze(_profile(tmp_path / "p", maps, probes))
    hist = [o for o in a.objects if o.name == "hist"]
    assert len(hist) == 1, [(o.name, o.kind, o.samples) for o in a.objects]
    h = hist[0]
    assert (h.kind, h.attribution, h.thread_private, h.count) == ("stack", "frame", True, 2)
    assert h.samples == 2 * PROBES and h.threads == 2
    assert h.size == NCELLS * 4
    decl = C_PRIVATE.splitlines().index("        unsigned hist[NC];") + 1
    assert h.site == f"main._omp_fn.0@priv.c:{decl}"
    assert h.access.page.min() >= 0 and h.access.page.max() <= NCELLS * 4 // 4096
    assert not any(o.kind == "stack" and o.name != "hist" and o.samples for o in a.objects)


def test_caller_frame_seen_at_other_samples(tmp_path):
    """A sample in code without DWARF (libc's memset clearing the caller's array) is
    placed in the local of the frame the other samples of that thread show."""
    exe = build_program(tmp_path, "priv.c", C_PRIVATE, "gcc", ["-g", "-O2", "-fopenmp", *SIZES])
    maps, probes = _run(exe)
    libc = next(m for m in maps if "libc.so" in m[3] and "x" in m[4])
    worker = [p for p in probes if p[0] == 1]
    # inside the worker's hist, from libc, with the stack pointer of a callee below
    t, _, sp, bp, addr = worker[0]
    inside = (t, libc[0] + 0x100, sp - 512, bp, addr - (addr % 4096))
    a = analyze(_profile(tmp_path / "p", maps, [*probes, inside]))
    h = next(o for o in a.objects if o.name == "hist")
    assert h.samples == 2 * PROBES + 1
    assert h.thread_private


F_PRIVATE = """\
module work
  implicit none
  integer :: n
  double precision, allocatable :: u(:, :)
contains
  subroutine sweep(alpha)
    double precision, intent(in) :: alpha
    double precision :: cp(n)
    integer :: i, j
    !$omp parallel do private(i, cp)
    do j = 1, n
      cp(1) = u(1, j)
      do i = 2, n
        cp(i) = alpha * cp(i - 1) + u(i, j)
      end do
      do i = n - 1, 1, -1
        u(i, j) = cp(i) - 0.25d0 * u(i + 1, j)
      end do
    end do
    !$omp end parallel do
  end subroutine sweep
end module work

program main
  use work
  implicit none
  integer :: s
  n = 200
  allocate(u(n, n))
  u = 1.0d0
  do s = 1, 3
    call sweep(0.5d0 + s)
  end do
  print *, sum(u)
end program main
"""


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_fortran_automatic_array_in_a_register(tmp_path, opt):
    """gfortran keeps the thread's private copy of an automatic array in a register
    (a location list of DW_OP_regN): an access through that register, anywhere on a
    thread stack, is `cp`'s, attributed by register; its instance starts at the
    register's value (addr - base_off).  `sweep` is inlined into the main program (called
    in a loop, as adi's sweeps are): its outlined region is a DIE nested in sweep's
    abstract one, which has no code."""
    exe = build_program(tmp_path, "adi.f90", F_PRIVATE, "gfortran", ["-g", opt, "-fopenmp"])
    info = symbols.elf_info(str(exe))
    fi = frames.frame_index(info)
    held = None
    for addr in sorted(int(x) for x in info.func_addr):
        name = info.function_at(addr) or ""
        if "_omp_fn" not in name:
            continue
        for pc in range(addr, addr + 0x400):
            fr = fi.frame_at(pc, pc)
            h = next((h for h in fr.held if h.var.name == "cp"), None) if fr else None
            if h is not None and h.reg not in (frames.DW_SP, frames.DW_BP):
                held, where, fn = h, pc, fr.function
                break
        if held:
            break
    assert held is not None, "no register location for cp in the outlined region"
    assert "sweep._omp_fn" in fn and held.var.type.pointer
    assert fi.types.element(held.var.type).size == 8
    bias = 0x555555554000
    maps = [(bias + (v & ~0xFFF), ((m + v + 0xFFF) & ~0xFFF) - (v & ~0xFFF), o & ~0xFFF, str(exe), "r-xp")
            for o, v, _, m in info.loads]
    stack = 0x7F0000000000
    maps.append((stack, 8 << 20, 0, "", "rw-p"))  # a thread stack: 8 MiB, anonymous
    private = stack + (6 << 20)
    # the private copy lies between the thread's stack pointer and its frame (rbp)
    samples = [(0, bias + where, stack + (5 << 20), stack + (7 << 20), private + 8 * i, held.reg + 1, 8 * i)
               for i in range(0, 200, 3)]
    a = analyze(_profile(tmp_path / "p", maps, samples))
    cp = [o for o in a.objects if o.name == "cp"]
    assert len(cp) == 1, [(o.name, o.kind) for o in a.objects]
    assert (cp[0].kind, cp[0].attribution, cp[0].count) == ("stack", "register", 1)
    assert cp[0].address == private and cp[0].samples == len(samples)
    assert cp[0].thread_private
    # another thread, whose own frame is elsewhere, reaching it: no longer private (its
    # stack pointer in the same mapping: a mapping of two threads' stacks is no one's)
    other = (1, bias + where, stack + (1 << 20), stack + (2 << 20), private + 64, held.reg + 1, 64)
    b = analyze(_profile(tmp_path / "q", maps, [*samples, other]))
    cp = next(o for o in b.objects if o.name == "cp")
    assert cp.threads == 2 and not cp.thread_private
    # ... nor when its stack pointer is on a stack mapping of its own
    own = 0x7E0000000000
    far = (1, bias + where, own + (1 << 20), own + (2 << 20), private + 64, held.reg + 1, 64)
    c = analyze(_profile(tmp_path / "r", [*maps, (own, 8 << 20, 0, "", "rw-p")], [*samples, far]))
    cp = next(o for o in c.objects if o.name == "cp")
    assert cp.threads == 2 and not cp.thread_private


def test_profiles_without_registers_are_unchanged(tmp_path):
    """A profile without the register columns (a hardware backend, an older collector)
    keeps the stack mappings as objects."""
    exe = build_program(tmp_path, "priv.c", C_PRIVATE, "gcc", ["-g", "-O2", "-fopenmp", *SIZES])
    maps, probes = _run(exe)
    path = _profile(tmp_path / "p", maps, probes)
    for col in ("sp", "bp_sp", "insn_off", "base_reg", "index_reg", "base_off"):
        (path / f"samples.{col}.col").unlink()
    a = analyze(path)
    assert not any(o.name == "hist" for o in a.objects)
    assert sum(o.samples for o in a.objects if o.kind == "stack") == 2 * PROBES
    assert np.all([o.attribution == "address" for o in a.objects])


def test_thread_private_objects_are_not_placed_and_listed_apart(tmp_path):
    """A thread-private array is always local to its thread: `suggest` places the shared
    objects only and says why it left it out; the text report lists it after the shared
    ones, marked."""
    from numaprof.cli.render import text_report
    from numaprof.recommender import suggest
    from numaprof.recommender.targets import preset_topology

    exe = build_program(tmp_path, "priv.c", C_PRIVATE, "gcc", ["-g", "-O2", "-fopenmp", *SIZES])
    maps, probes = _run(exe)
    # a shared heap array beside it: the thread-private one must not hide it
    heap = 0x7E0000000000
    maps.append((heap, 1 << 22, 0, "", "rw-p"))
    shared = [(k % 2, probes[0][1], probes[k % 2][2], probes[k % 2][3], heap + 4096 * (k % 1024))
              for k in range(100)]
    path = _profile(tmp_path / "p", maps, probes + shared)
    a = analyze(path)
    s = suggest(a, preset_topology("2s"))
    placed = {o.name for o in s.objects}
    assert "hist" not in placed and placed, placed
    assert any("thread-private" in n and "hist" in n for n in s.notes), s.notes
    out = tmp_path / "report.txt"
    text_report.render(a, out=out)
    text = out.read_text()
    assert "hist x2 (private)" in text
    assert text.index("hist x2 (private)") > text.index(f"anon@{heap:#x}")


C_VLA = r"""
#include <stdint.h>
#include <stdio.h>

struct probe { uint64_t ip, sp, bp, addr; };
static struct probe probes[NP];
static int np;

__attribute__((noinline)) static double smooth(int n, int seed)
{
    double a[n];
    for (int i = 0; i < n; i++)
        a[i] = (double)((i * 7 + seed) % 13);
    double s = 0.0;
    for (int k = 0; k < n; k += 7) {
        uint64_t ip, sp, bp;
        __asm__ volatile("lea 1f(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2\n1:"
                         : "=r"(ip), "=r"(sp), "=r"(bp));
        int i = (k * 31 + seed) % n;
        s += a[i];
        if (np < NP)
            probes[np++] = (struct probe){ip, sp, bp, (uint64_t)(uintptr_t)&a[i]};
    }
    return s;
}

int main(int argc, char **argv)
{
    double s = 0.0;
    for (int r = 0; r < 40; r++)
        s += smooth(500 + argc, r);
    FILE *m = fopen("/proc/self/maps", "r");
    char line[4096];
    while (m && fgets(line, sizeof line, m))
        printf("map %s", line);
    for (int k = 0; k < np; k++)
        printf("probe 0 %llx %llx %llx %llx\n", (unsigned long long)probes[k].ip,
               (unsigned long long)probes[k].sp, (unsigned long long)probes[k].bp,
               (unsigned long long)probes[k].addr);
    printf("check %f\n", s);
    return 0;
}
"""


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_c_variable_length_array(tmp_path, opt):
    """`double a[n]`: gcc places it with a location expression of the stack pointer
    (`((rsp + 7) >> 3) << 3`) and no constant size: named `a`, its extent the frame."""
    exe = build_program(tmp_path, "vla.c", C_VLA, "gcc", ["-g", opt, f"-DNP={PROBES}"])
    maps, probes = _run(exe)
    assert len(probes) == PROBES
    a = analyze(_profile(tmp_path / "p", maps, probes))
    vla = [o for o in a.objects if o.name == "a"]
    assert len(vla) == 1, [(o.name, o.kind, o.samples) for o in a.objects]
    assert (vla[0].kind, vla[0].attribution, vla[0].samples) == ("stack", "frame", PROBES)
    assert vla[0].site.startswith("smooth@vla.c:")


def test_frame_pointer_columns(tmp_path):
    """The VLA's frame is found from rbp (its CFA rule at -O2): the same from the
    collector's 4-byte `bp_sp` as from the 8-byte `bp` of older profiles; where rbp
    was not stored (`bp_sp` -2^31) that frame is not guessed."""
    exe = build_program(tmp_path, "vla.c", C_VLA, "gcc", ["-g", "-O2", f"-DNP={PROBES}"])
    maps, probes = _run(exe)
    found = {}
    for how, rows, old in (("bp_sp", probes, False), ("bp", probes, True),
                           ("unknown", [(t, ip, sp, sp + 2**40, addr) for t, ip, sp, _, addr in probes], False)):
        a = analyze(_profile(tmp_path / how, maps, rows, old_bp=old))
        found[how] = sorted((o.name, o.kind, o.attribution, o.samples) for o in a.objects)
    assert found["bp_sp"] == found["bp"]
    assert ("a", "stack", "frame", PROBES) in found["bp"]
    assert not any(name == "a" for name, *_ in found["unknown"]), found["unknown"]


def test_a_pointer_variables_own_slot_is_not_named_like_its_array():
    """`val`'s stack slot holds the pointer; `val` alone names the heap array it points
    to, so the slot is `val (pointer)` (seen in the CG corpus program: two objects `val`)."""
    from numaprof.analyzer import datatype, frames, varattr

    def var(kind):
        t = datatype.TypeInfo(kind=kind, name="double *" if kind == "pointer" else "double",
                              size=8, offset=1)
        return frames.Variable("val", "main", "cg.c", 96, t)

    assert varattr._slot_name(var("pointer")) == "val (pointer)"
    assert varattr._slot_name(var("base")) == "val"


HANDLES = """\
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>
struct Own { double *a; double *b; };
int main(int argc, char **argv)
{
    std::vector<double> v(1000 * argc);
    std::unique_ptr<double[]> u(new double[argc]);
    std::string s(argv[0]);
    std::array<double, 4> a{};
    Own o{v.data(), u.get()};
    std::vector<bool> bits(argc);
    a[0] = v[0] + u[0] + s.size() + bits.size() + o.a[0];
    std::printf("%f\\n", a[0]);
    return 0;
}
"""


def test_a_vectors_own_slot_is_named_like_a_pointers(tmp_path):
    """A std::vector local is three pointers on the stack; `pressure` names its elements
    (the heap array), so a sample on the vector itself (its construction's stores) is
    `pressure (pointer)`, not a second `pressure` (seen in the mesh corpus program: a
    24-byte stack `pressure` beside the 16 MiB heap one).  A library record holding
    anything but pointers (a std::string's local buffer, a std::array's elements, a
    std::vector<bool>'s bit offsets) and a user's record are their own storage."""
    from elftools.elf.elffile import ELFFile

    from numaprof.analyzer import datatype, varattr

    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    (tmp_path / "h.cpp").write_text(HANDLES)
    exe = tmp_path / "h"
    subprocess.run(["g++", "-O0", "-g", "-o", str(exe), str(tmp_path / "h.cpp")], check=True)
    types, got = datatype.Types(), {}
    with open(exe, "rb") as fh:
        for cu in ELFFile(fh).get_dwarf_info().iter_CUs():
            for die in cu.iter_DIEs():
                name = die.attributes.get("DW_AT_name")
                if die.tag == "DW_TAG_variable" and name is not None and name.value.decode() in "v u s a o bits".split():
                    t = types.of(die)
                    var = frames.Variable(name.value.decode(), "main", str(tmp_path / "h.cpp"), 1, t,
                                          handle=types.handle(t))
                    got[var.name] = varattr._slot_name(var)
    assert got == {"v": "v (pointer)", "u": "u (pointer)", "s": "s", "a": "a", "o": "o", "bits": "bits"}, got


def test_a_system_headers_scalar_is_named_by_the_value_its_slot_holds():
    """`__x`, the parameter of std::sqrt(float) inlined from <cmath>, has a frame slot
    of its own in Rodinia cfd's compute_flux: its samples are named after the value the
    slot holds (an array's temporary, a user variable's value) where the stores say,
    as a spill is, and keep the DWARF's name where they do not (two arrays' values on
    two ways) or where the value is another header variable's."""
    from numaprof.analyzer import datatype, varattr

    flt = datatype.TypeInfo("base", "float", 4, 0x40)
    x = frames.Variable("std::sqrt(float)", "std::sqrt(float)", "/usr/include/c++/12/cmath", 463, flt)
    user = frames.Variable("speed", "compute_flux", "/src/euler3d.cpp", 160, flt)
    assert varattr._header_scalar(x) and not varattr._header_scalar(user)
    assert not varattr._header_scalar(frames.Variable("a", "f", "/usr/include/c++/12/array", 9,
                                                      datatype.TypeInfo("array", "float[3]", 12, 0x50)))
    temp = frames.Copy("normals", ("var", "main", "normals", "/src/euler3d.cpp", 427), "compute_flux", 4,
                       computed=True)
    other = frames.Variable("__y", "std::pow", "/usr/include/c++/12/cmath", 400, flt)

    class Slots:  # slot (from the CFA) -> what FrameIndex.slot_value says it holds
        values = {-464: None, -456: temp, -448: user, -440: other}

        def slot_value(self, pc, slot):
            return self.values[slot]

    cfa = np.full(8, 1000, dtype=np.int64)
    addr = cfa + np.array([-464, -464, -456, -456, -448, -440, -456, -456])
    members = np.arange(6)
    hit = np.array([True] * 5 + [True])
    found = varattr._Found()
    taken = varattr._header_value(found, members, hit, Slots(), 0x3f1a, addr, cfa, np.ones(8, dtype=bool),
                                  np.full(8, 7))
    assert taken.tolist() == [False, False, True, True, True, False]
    assert sorted(o.name for o in found.objects) == ["normals (temp)", "speed"]
    # only the samples hit: those outside the slot's bytes are another variable's
    found = varattr._Found()
    taken = varattr._header_value(found, members, np.array([False, False, True, False, False, False]), Slots(),
                                  0x3f1a, addr, cfa, np.ones(8, dtype=bool), np.full(8, 7))
    assert taken.tolist() == [False, False, True, False, False, False]
