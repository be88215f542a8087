"""Source patches (recommender/patch.py): placement calls, parallel first touch, Fortran.

Fixtures are copied into tmp_path so a test can never modify the repository.  The
loop fixtures in tests/data/patch/ mark each loop with the verdict the check must give.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import ROOT, serially_touched_object

from numaprof.recommender.patch import (
    C_PRAGMA,
    F_DIRECTIVE,
    F_END_DIRECTIVE,
    POLICY_CONSTANTS,
    Patch,
    Refusal,
    merge_patches,
    parallelize_first_touch,
    patch_for_object,
    place_after_allocation,
    place_static,
    policy_constant,
)

DATA = ROOT / "tests" / "data" / "patch"
EXAMPLES = ROOT / "examples"
REAL_HEADER = ROOT / "collector" / "include" / "numaprof_place.h"

# Enough of numaprof_place.h to compile against when checking only that a patch is C.
STUB_HEADER = """\
#include <stddef.h>
enum numaprof_policy { NUMAPROF_FIRST_TOUCH, NUMAPROF_BIND_ALL, NUMAPROF_BIND_BLOCK,
  NUMAPROF_CYCLIC, NUMAPROF_CYCLIC_BLOCK, NUMAPROF_SKEW_MAPP, NUMAPROF_PRIME_MAPP,
  NUMAPROF_RANDOM, NUMAPROF_RANDOM_BLOCK, NUMAPROF_WEIGHTED_INTERLEAVE };
static inline int numaprof_place(void *p, size_t n, enum numaprof_policy policy)
{ (void)p; (void)n; (void)policy; return 0; }
"""


def copy(tmp_path: Path, src: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copyfile(src, dst)
    return dst


def stub_dir(tmp_path: Path) -> Path:
    d = tmp_path / "stub"
    d.mkdir(exist_ok=True)
    (d / "numaprof_place.h").write_text(STUB_HEADER)
    return d


def lines(text: str) -> list[str]:
    return text.splitlines()


def added(patch: Patch) -> list[str]:
    return [ln[1:] for ln in patch.diff.splitlines()
            if ln.startswith("+") and not ln.startswith("+++")]


def refusal(result, *words: str) -> str:
    assert isinstance(result, Refusal), f"expected a refusal, got the patch:\n{result.diff}"
    for w in words:
        assert w in result.reason, result.reason
    return result.reason


def loop_line(text: str, marker: str, offset: int = 1) -> int:
    """1-based line `offset` lines below the comment containing `marker`."""
    for i, ln in enumerate(text.splitlines(), start=1):
        if marker in ln:
            return i + offset
    raise AssertionError(f"marker {marker!r} not in fixture")


# ------------------------------------------------------------------ serial_init.c

def test_serial_init_loop_gets_the_pragma_right_above_it(tmp_path):
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    old = src.read_text()
    line = lines(old).index("        a[j] = 0.0;") + 1  # the first-touch store
    p = parallelize_first_touch(src, line, root=tmp_path)
    assert isinstance(p, Patch), p
    new = lines(p.new_text)
    i = new.index("    for (size_t j = 0; j < n; j++) {")
    assert new[i - 1] == f"    {C_PRAGMA}"
    assert len(new) == len(lines(old)) + 1
    assert added(p) == [f"    {C_PRAGMA}"]
    assert p.diff.startswith("--- a/serial_init.c\n+++ b/serial_init.c\n")
    assert src.read_text() == old  # making a patch writes nothing


def test_serial_init_already_parallel_loop_is_refused(tmp_path):
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    line = lines(src.read_text()).index("            a[j] = b[j] + c[j] * (double)it;") + 1
    refusal(parallelize_first_touch(src, line), "already runs under", "#pragma omp")


def test_line_outside_any_loop_is_refused(tmp_path):
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    line = lines(src.read_text()).index("    free(a);") + 1
    refusal(parallelize_first_touch(src, line), "not inside a `for` loop")


def serial_init_all_patches(src: Path, root: Path) -> list[Patch]:
    text = lines(src.read_text())
    patches = [place_after_allocation(src, text.index(f"    double *{v} = malloc(n * "
                                                      "sizeof(double));") + 1, v, pol,
                                      root=root)
               for v, pol in (("a", "cyclic"), ("b", "NUMAPROF_SKEW_MAPP"),
                              ("c", "prime_mapp"))]
    patches.append(parallelize_first_touch(src, text.index("        c[j] = 2.0;") + 1,
                                           root=root))
    assert all(isinstance(p, Patch) for p in patches), patches
    return patches


def test_placement_after_malloc_and_one_include(tmp_path):
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    (merged,) = merge_patches(serial_init_all_patches(src, tmp_path), tmp_path)
    new = lines(merged.new_text)
    assert new.count('#include "numaprof_place.h"') == 1
    assert new[new.index("#include <stdlib.h>") + 1] == '#include "numaprof_place.h"'
    for v, const in (("a", "NUMAPROF_CYCLIC"), ("b", "NUMAPROF_SKEW_MAPP"),
                     ("c", "NUMAPROF_PRIME_MAPP")):
        i = new.index(f"    double *{v} = malloc(n * sizeof(double));")
        assert new[i + 1] == f"    numaprof_place({v}, n * sizeof(double), {const});"
    assert new[new.index("    for (size_t j = 0; j < n; j++) {") - 1] == f"    {C_PRAGMA}"
    assert len(new) == len(lines(src.read_text())) + 5


def test_patched_serial_init_compiles_and_computes_the_same(tmp_path):
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    (merged,) = merge_patches(serial_init_all_patches(src, tmp_path), tmp_path)
    patched = tmp_path / "patched.c"
    patched.write_text(merged.new_text)
    include = REAL_HEADER.parent if REAL_HEADER.exists() else stub_dir(tmp_path)
    cc = ["gcc", "-O1", "-fopenmp", "-Wall", "-Wextra", "-Werror", f"-I{include}"]
    subprocess.run([*cc, "-o", tmp_path / "patched", patched], check=True)
    subprocess.run([*cc, "-o", tmp_path / "orig", src], check=True)
    env = {"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"}
    run = [subprocess.run([tmp_path / exe, "1", "2"], capture_output=True, text=True,
                          env=env, check=True).stdout for exe in ("orig", "patched")]
    assert run[0].startswith("checksum") and run[0] == run[1]


def test_diff_applies_with_patch_and_git(tmp_path):
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    (merged,) = merge_patches(serial_init_all_patches(src, tmp_path), tmp_path)
    (tmp_path / "p.diff").write_text(merged.diff)
    subprocess.run(["patch", "-p1", "-s", "-i", "p.diff"], cwd=tmp_path, check=True)
    assert src.read_text() == merged.new_text
    subprocess.run(["git", "apply", "-R", "-p1", "p.diff"], cwd=tmp_path, check=True)
    assert src.read_bytes() == (EXAMPLES / "serial_init.c").read_bytes()


# ------------------------------------------------------------ C loop safety rules

C_CASES = [
    ("UNSAFE: prefix sum", 1, ["`a[k]`", "`a[k - 1]`", "depend"]),
    ("UNSAFE: calls printf", 3, ["calls `printf`"]),
    ("UNSAFE: leaves early", 4, ["`break`"]),
    ("UNSAFE: scalar accumulation", 2, ["scalar `sum` declared outside"]),
    ("UNSAFE: writes a[k + 1]", 2, ["`a[k + 1]`", "not exactly `a[k]`"]),
    ("UNSAFE: counter declared outside", 2, ["counter `i`", "after it"]),
    ("UNSAFE: writes a struct member", 2, ["member `s.total`"]),
    ("UNSAFE: bound is changed", 3, ["scalar `n`"]),
    ("UNSAFE: steps by two", 2, ["step `k` by one"]),
    ("UNSAFE: goto", 3, ["goto"]),
    ("UNSAFE: writes through a pointer local", 3, ["`row[1]`", "pointer"]),
    ("UNSAFE: a macro that writes", 2, ["macro `TOTAL`"]),
]


@pytest.mark.parametrize("marker,offset,words", C_CASES, ids=[c[0] for c in C_CASES])
def test_unsafe_c_loops_are_refused_with_the_reason(tmp_path, marker, offset, words):
    src = copy(tmp_path, DATA / "loops.c")
    r = parallelize_first_touch(src, loop_line(src.read_text(), marker, offset))
    refusal(r, *words)
    assert r.fallback == "bind_block"


def test_safe_c_loop_with_pure_math_and_locals(tmp_path):
    src = copy(tmp_path, DATA / "loops.c")
    text = src.read_text()
    p = parallelize_first_touch(src, loop_line(text, "SAFE: element-wise", 3))
    assert isinstance(p, Patch), p
    new = lines(p.new_text)
    assert new[new.index("    for (size_t k = 0; k < n; ++k) {") - 1] == f"    {C_PRAGMA}"


def test_constant_macro_bound_is_accepted(tmp_path):
    src = copy(tmp_path, DATA / "loops.c")
    p = parallelize_first_touch(src, loop_line(src.read_text(), "SAFE: a constant macro", 2))
    assert isinstance(p, Patch), p


def test_local_array_writes_are_private(tmp_path):
    src = copy(tmp_path, DATA / "loops.c")
    p = parallelize_first_touch(src, loop_line(src.read_text(), "SAFE: a local array", 3))
    assert isinstance(p, Patch), p
    assert added(p) == [f"    {C_PRAGMA}"]


def test_nested_outer_loop_is_chosen_when_it_is_safe(tmp_path):
    src = copy(tmp_path, DATA / "loops.c")
    p = parallelize_first_touch(src, loop_line(src.read_text(), "NESTED: the outer", 4))
    assert isinstance(p, Patch), p
    new = lines(p.new_text)
    assert new[new.index("    for (size_t r = 0; r < n; r++) {") - 1] == f"    {C_PRAGMA}"
    assert new.count(f"    {C_PRAGMA}") == 1


def test_nested_inner_loop_is_chosen_under_a_time_loop(tmp_path):
    src = copy(tmp_path, DATA / "loops.c")
    p = parallelize_first_touch(src, loop_line(src.read_text(), "NESTED: outer loop is a "
                                                                "time loop", 3))
    assert isinstance(p, Patch), p
    new = lines(p.new_text)
    i = new.index("        for (size_t j = 0; j < n; j++)")
    assert new[i - 1] == f"        {C_PRAGMA}"
    assert new[i - 2] == "    for (int it = 0; it < 3; it++) {"


def test_all_loops_fixture_patches_compile(tmp_path):
    src = copy(tmp_path, DATA / "loops.c")
    text = src.read_text()
    patches = [parallelize_first_touch(src, loop_line(text, m, o), root=tmp_path)
               for m, o in (("SAFE: element-wise", 3), ("NESTED: the outer", 4),
                            ("NESTED: outer loop is a time loop", 3))]
    main_lines = lines(text)
    patches += [
        place_after_allocation(src, main_lines.index("    double *b = calloc(N, sizeof *b);")
                               + 1, "b", "random", root=tmp_path),
        place_after_allocation(src, main_lines.index("    x = (double *)malloc(sizeof(double)"
                                                     " * N);") + 1, "x", "bind_all",
                               root=tmp_path),
        place_static(src, "grid", "cyclic_block", root=tmp_path),
        place_static(src, "table", "weighted_interleave",
                     before_line=main_lines.index("        table[k] = 2.0;") + 1,
                     root=tmp_path),
    ]
    assert all(isinstance(p, Patch) for p in patches), patches
    (merged,) = merge_patches(patches, tmp_path)
    out = tmp_path / "out.c"
    out.write_text(merged.new_text)
    subprocess.run(["gcc", "-fopenmp", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                    f"-I{stub_dir(tmp_path)}", out], check=True)
    new = lines(merged.new_text)
    assert new.count(f"    {C_PRAGMA}") == 2 and new.count(f"        {C_PRAGMA}") == 1
    assert "    numaprof_place(b, N * sizeof *b, NUMAPROF_RANDOM);" in new
    assert "    numaprof_place(x, sizeof(double) * N, NUMAPROF_BIND_ALL);" in new


# ----------------------------------------------------------------- placement calls

def test_calloc_bytes_are_the_product_and_cast_assignment_is_found(tmp_path):
    src = copy(tmp_path, DATA / "loops.c")
    text = lines(src.read_text())
    p = place_after_allocation(src, text.index("    double *b = calloc(N, sizeof *b);") + 1,
                               "b", "cyclic")
    assert "    numaprof_place(b, N * sizeof *b, NUMAPROF_CYCLIC);" in added(p)


def test_var_none_takes_the_only_allocation_on_the_line(tmp_path):
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    line = lines(src.read_text()).index("    double *b = malloc(n * sizeof(double));") + 1
    p = place_after_allocation(src, line, None, "cyclic_block")
    assert "    numaprof_place(b, n * sizeof(double), NUMAPROF_CYCLIC_BLOCK);" in added(p)


def test_allocation_refusals(tmp_path):
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    text = lines(src.read_text())
    line = text.index("    double *b = malloc(n * sizeof(double));") + 1
    refusal(place_after_allocation(src, line, "a", "cyclic"), "no allocation assigned to `a`")
    refusal(place_after_allocation(src, 1, "a", "cyclic"), "no malloc")
    with pytest.raises(ValueError, match="no placement constant"):
        place_after_allocation(src, line, "b", "parallel_init")


def test_size_with_side_effects_and_unbraced_body_are_refused(tmp_path):
    src = tmp_path / "odd.c"
    src.write_text("#include <stdlib.h>\n"
                   "double *p;\n"
                   "void f(size_t n, int c)\n{\n"
                   "    p = malloc(n++ * sizeof(double));\n"
                   "    double *q = NULL;\n"
                   "    if (c)\n"
                   "        q = malloc(n);\n"
                   "    free(q);\n}\n")
    refusal(place_after_allocation(src, 5, "p", "cyclic"), "side effects")
    refusal(place_after_allocation(src, 8, "q", "cyclic"), "body of an `if` without braces")
    p = place_after_allocation(src, 5, "p", "cyclic", size_expr="n * sizeof(double)")
    assert "    numaprof_place(p, n * sizeof(double), NUMAPROF_CYCLIC);" in added(p)


def test_posix_memalign_and_code_sharing_the_line(tmp_path):
    src = tmp_path / "m.c"
    src.write_text('#include <stdlib.h>\n#include "numaprof_place.h"\n'
                   "void g(size_t n)\n{\n"
                   "    double *p;\n"
                   "    if (1) { p = malloc(n); }\n"
                   "    if (posix_memalign((void **)&p, 64, n * 8) != 0)\n"
                   "        return;\n"
                   "    free(p);\n}\n")
    p = place_after_allocation(src, 6, "p", "random")
    # The call stays inside the braces that share the allocation's line.
    assert "    if (1) { p = malloc(n); numaprof_place(p, n, NUMAPROF_RANDOM); }" in \
        lines(p.new_text)
    assert lines(p.new_text).count('#include "numaprof_place.h"') == 1  # already there
    p = place_after_allocation(src, 7, "p", "random")
    new = lines(p.new_text)
    assert new[new.index("        return;") + 1] == \
        "    numaprof_place(p, n * 8, NUMAPROF_RANDOM);"


def test_allocation_inside_a_wrapper_is_refused(tmp_path):
    src = tmp_path / "wrap.c"
    src.write_text("#include <stdlib.h>\n"
                   "void *xmalloc(size_t n)\n{\n"
                   "    void *p = malloc(n);\n"
                   "    if (!p)\n        abort();\n"
                   "    return (p);\n}\n")
    refusal(place_after_allocation(src, 4, "p", "cyclic"), "`xmalloc`, which returns it")


def test_place_static_before_the_pragma_of_its_first_touch_loop(tmp_path):
    src = copy(tmp_path, EXAMPLES / "spmv.c")
    text = lines(src.read_text())
    touch = text.index("            values[r * NNZ_PER_ROW + k] = 0.5;") + 1
    p = place_static(src, "values", "cyclic", before_line=touch)
    new = lines(p.new_text)
    i = new.index("    numaprof_place(values, sizeof(values), NUMAPROF_CYCLIC);")
    assert new[i + 1] == "#pragma omp parallel for schedule(static)"
    assert new[i + 2].startswith("    for (uint32_t r = 0; r < NROWS; r++)")
    out = tmp_path / "out.c"
    out.write_text(p.new_text)
    subprocess.run(["gcc", "-fopenmp", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                    f"-I{stub_dir(tmp_path)}", out], check=True)


def test_place_static_at_start_of_main_after_declarations(tmp_path):
    src = copy(tmp_path, EXAMPLES / "spmv.c")
    p = place_static(src, "x", "bind_block")
    new = lines(p.new_text)
    i = new.index("    numaprof_place(x, sizeof(x), NUMAPROF_BIND_BLOCK);")
    assert new[i - 2] == "    int iters = argc > 1 ? atoi(argv[1]) : 40;" and new[i - 1] == ""
    assert new[i + 1] == "#pragma omp parallel for schedule(static)"
    refusal(place_static(src, "iters", "cyclic"), "not an array defined at file scope")
    refusal(place_static(src, "nosuch", "cyclic"), "not an array")


def test_policy_constants_cover_every_placement_policy():
    assert policy_constant("cyclic") == "NUMAPROF_CYCLIC"
    assert policy_constant("NUMAPROF_RANDOM_BLOCK") == "NUMAPROF_RANDOM_BLOCK"
    assert len(POLICY_CONSTANTS) == 10
    if REAL_HEADER.exists():
        header = REAL_HEADER.read_text()
        for const in POLICY_CONSTANTS.values():
            assert const in header


def test_crlf_files_keep_crlf(tmp_path):
    src = tmp_path / "w.c"
    src.write_bytes(b"#include <stdlib.h>\r\nint main(void)\r\n{\r\n"
                    b"    double *a = malloc(8);\r\n    free(a);\r\n    return 0;\r\n}\r\n")
    p = place_after_allocation(src, 4, "a", "cyclic")
    assert "#include \"numaprof_place.h\"\r\n" in p.new_text
    assert "    numaprof_place(a, 8, NUMAPROF_CYCLIC);\r\n" in p.new_text
    assert "\n" not in p.new_text.replace("\r\n", "")


def test_unparsable_or_foreign_files_are_refused(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { for (int i = 0; i < ; i++ { }\n")
    refusal(parallelize_first_touch(bad, 1), "does not parse")
    other = tmp_path / "x.py"
    other.write_text("print(1)\n")
    refusal(parallelize_first_touch(other, 1), "neither C, C++ nor")
    refusal(place_after_allocation(DATA / "loops.f90", 3, "w", "cyclic"), "only", "C")
    refusal(parallelize_first_touch(tmp_path / "missing.c", 3), "cannot read")


# --------------------------------------------------------------------------- Fortran

F_CASES = [
    ("UNSAFE: prefix sum", 2, ["`z(i)`", "`z(i - 1)`"]),
    ("UNSAFE: scalar accumulation", 3, ["scalar `s`"]),
    ("UNSAFE: calls a subroutine", 2, ["subroutine `touch`"]),
    ("UNSAFE: leaves early", 2, ["`exit`"]),
    ("UNSAFE: steps by two", 2, ["by 2"]),
]


@pytest.mark.parametrize("marker,offset,words", F_CASES, ids=[c[0] for c in F_CASES])
def test_unsafe_fortran_loops_are_refused(tmp_path, marker, offset, words):
    src = copy(tmp_path, DATA / "loops.f90")
    refusal(parallelize_first_touch(src, loop_line(src.read_text(), marker, offset)), *words)


def test_fortran_safe_loop_gets_parallel_do_pair(tmp_path):
    src = copy(tmp_path, DATA / "loops.f90")
    p = parallelize_first_touch(src, loop_line(src.read_text(), "SAFE: element-wise", 2),
                                root=tmp_path)
    assert isinstance(p, Patch), p
    new = lines(p.new_text)
    i = new.index("  do i = 1, n")
    assert new[i - 1] == f"  {F_DIRECTIVE}"
    assert new[i + 3] == "  end do" and new[i + 4] == f"  {F_END_DIRECTIVE}"
    assert p.diff.startswith("--- a/loops.f90\n+++ b/loops.f90\n")


def test_fortran_inner_loop_under_time_loop_and_compiles(tmp_path):
    src = copy(tmp_path, DATA / "loops.f90")
    text = src.read_text()
    patches = [parallelize_first_touch(src, loop_line(text, "NESTED", 3), root=tmp_path),
               parallelize_first_touch(src, loop_line(text, "SAFE: element-wise", 3),
                                       root=tmp_path)]
    assert all(isinstance(p, Patch) for p in patches), patches
    (merged,) = merge_patches(patches, tmp_path)
    new = lines(merged.new_text)
    i = new.index("    do i = 1, nm")
    assert new[i - 1] == f"    {F_DIRECTIVE}" and new[i + 3] == f"    {F_END_DIRECTIVE}"
    out = tmp_path / "out.f90"
    out.write_text(merged.new_text)
    subprocess.run(["gfortran", "-fopenmp", "-Wall", "-Werror", "-fsyntax-only", out],
                   cwd=tmp_path, check=True)


def test_fortran_example_reconstructed_exactly(tmp_path):
    """Strip the directives of fortran_arrays.f90's first loop; the patch puts them back."""
    original = (EXAMPLES / "fortran_arrays.f90").read_text()
    ls = original.splitlines(keepends=True)
    first = ls.index("  !$omp parallel do schedule(static)\n")
    end = ls.index("  !$omp end parallel do\n", first)
    stripped = ls[:first] + ls[first + 1:end] + ls[end + 1:]
    src = tmp_path / "fortran_arrays.f90"
    src.write_text("".join(stripped))
    touch = stripped.index("    u(i) = dble(mod(i, 7))\n") + 1
    p = parallelize_first_touch(src, touch)
    assert isinstance(p, Patch), p
    assert p.new_text == original
    # The example's other loops already have directives.
    refusal(parallelize_first_touch(EXAMPLES / "fortran_arrays.f90", touch + 1),
            "already runs under", "!$omp parallel do")


# ---------------------------------------------- from analyzer results to patches

obj = serially_touched_object


def test_patch_for_object_parallel_init_and_heap_placement(tmp_path):
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    other = tmp_path / "other" / "serial_init.c"  # same basename, no main()
    other.parent.mkdir()
    other.write_text("int helper(void) { return 1; }\n")
    text = lines(src.read_text())
    store = text.index("        a[j] = 0.0;") + 1
    alloc = text.index("    double *a = malloc(n * sizeof(double));") + 1
    a = obj("a", f"main@serial_init.c:{alloc}", "heap", [f"main@serial_init.c:{store}"])
    paths = [str(other), str(src)]
    p = patch_for_object(a, "parallel_init", paths, root=tmp_path)
    assert isinstance(p, Patch) and added(p) == [f"    {C_PRAGMA}"] and p.path == str(src)
    p = patch_for_object(a, "cyclic", paths, root=tmp_path)
    assert "    numaprof_place(a, n * sizeof(double), NUMAPROF_CYCLIC);" in added(p)
    assert patch_for_object(a, "first_touch", paths) is None
    # a file of that name is recorded, but it is not the one: the reason says so
    refusal(patch_for_object(a, "cyclic", [str(other)]), "recorded serial_init.c has no "
            "definition of `main`")
    nameless = obj(f"main@serial_init.c:{alloc}", f"main@serial_init.c:{alloc}", "heap", [])
    assert isinstance(patch_for_object(nameless, "random", paths), Patch)
    # one of several arrays carved out of that allocation: its bounds are estimates, so
    # the whole block is not placed for it
    part = replace(a, name="a (x)", attribution="carved")
    refusal(patch_for_object(part, "cyclic", paths, root=tmp_path),
            f"`a (x)` is one of the arrays carved out of the allocation at main@serial_init.c:{alloc}")


def test_patch_for_object_static_and_refused_parallel_init(tmp_path):
    src = copy(tmp_path, EXAMPLES / "gather.c")
    text = lines(src.read_text())
    idx_store = text.index("        idx[i] = (uint32_t)(x % n);") + 1
    idx = obj("idx", "main@gather.c:19", "heap", [f"main@gather.c:{idx_store}"])
    r = patch_for_object(idx, "parallel_init", [str(src)])
    refusal(r, "scalar `x` declared outside")
    assert r.fallback == "bind_block"
    spmv = copy(tmp_path, EXAMPLES / "spmv.c")
    y_store = lines(spmv.read_text()).index("        y[r] = 0.0;") + 1
    y = obj("y", ".bss@spmv", "static", [f"main@spmv.c:{y_store}"], size=8 << 20)
    p = patch_for_object(y, "bind_block", [str(src), str(spmv)])
    assert "    numaprof_place(y, sizeof(y), NUMAPROF_BIND_BLOCK);" in added(p)
    assert p.info.size_bytes == 8 << 20 and p.info.kind == "place_static"
    # a symbol of another size is not this array: no patch, and the reason says so
    other = obj("y", ".bss@spmv", "static", [f"main@spmv.c:{y_store}"], size=1 << 20)
    refusal(patch_for_object(other, "bind_block", [str(spmv)]), "8388608 bytes",
            "recorded 1048576")


def test_parse_errors_elsewhere_do_not_stop_a_patch_here(tmp_path):
    src = tmp_path / "macro.c"
    src.write_text("#include <stdlib.h>\n"
                   "void odd(double *x)\n{\n"
                   "    for (int i = 0; i < 4; i++)\n"
                   "        x[i] = @@ 1;\n"
                   "}\n"
                   "int main(void)\n{\n"
                   "    double *a = malloc(8 * sizeof(double));\n"
                   "    for (int i = 0; i < 8; i++)\n"
                   "        a[i] = 0.0;\n"
                   "    free(a);\n"
                   "    return 0;\n}\n")
    refusal(parallelize_first_touch(src, 5), "does not parse cleanly around line 5")
    assert isinstance(parallelize_first_touch(src, 11), Patch)
    assert isinstance(place_after_allocation(src, 9, "a", "cyclic"), Patch)


def test_an_array_of_pointers_beside_the_allocation_does_not_stop_its_patch(tmp_path):
    """`new double*[n]` (HPCCG's matrix rows) is an ERROR for tree-sitter-cpp 0.23: it
    stopped every patch in the function; now only one on that line."""
    src = tmp_path / "rows.cpp"
    src.write_text("void build(int n, double ***rows, double **vals, double **x)\n{\n"
                   "  *rows = new double*[n];\n"
                   "  *x = new double[n];\n"
                   "  *vals = new double[n * 27];\n"
                   "  double *t = new double[n];\n"
                   "  for (int i = 0; i < n; i++)\n"
                   "    t[i] = 1.0;\n"
                   "  (*x)[0] = t[0];\n"
                   "  delete[] t;\n"
                   "}\n")
    for line, var in ((4, "*x"), (5, "*vals")):
        patch = place_after_allocation(src, line, var, "bind_block")
        assert isinstance(patch, Patch), patch
    new = lines(place_after_allocation(src, 5, "*vals", "bind_block").new_text)
    assert new[new.index("  *vals = new double[n * 27];") + 1] == \
        "  numaprof_place(*vals, (n * 27) * sizeof(**vals), NUMAPROF_BIND_BLOCK);"
    assert "  *rows = new double*[n];" in new  # the file's own text is kept
    assert isinstance(parallelize_first_touch(src, 7), Patch)
    refusal(place_after_allocation(src, 3, "*rows", "bind_block"), "array of pointers")


def test_patch_for_object_fortran_static_placement_is_refused_as_c_only(tmp_path):
    src = copy(tmp_path, DATA / "loops.f90")
    line = loop_line(src.read_text(), "SAFE: element-wise", 2)
    u = obj("u", ".bss@loops", "static", [f"loops@loops.f90:{line}"])
    refusal(patch_for_object(u, "cyclic", [str(src)]), "only inserted into C and C++ sources")
    p = patch_for_object(u, "parallel_init", [str(src)])
    assert isinstance(p, Patch) and f"  {F_DIRECTIVE}" in added(p)


def test_site_in_an_outlined_openmp_region_resolves_to_its_function(tmp_path):
    """gcc names the body of a `#pragma omp parallel` `main._omp_fn.N`: the site is in
    main() of the recorded file, so the refusal is the true one (already parallel), not
    "not among the recorded sources"."""
    src = copy(tmp_path, EXAMPLES / "serial_init.c")
    line = lines(src.read_text()).index("            a[j] = b[j] + c[j] * (double)it;") + 1
    a = obj("a", "main@serial_init.c:1", "heap", [f"main._omp_fn.1@serial_init.c:{line}"])
    reason = refusal(patch_for_object(a, "parallel_init", [str(src)]), "already runs under")
    assert "recorded sources" not in reason


def test_a_member_named_class_member_is_its_member_inside_the_class_functions():
    """The analyzer names a data member of `this` Class::member; the patch writes it as
    the source does at the allocation site: unqualified, inside that class's functions."""
    from numaprof.recommender.patch.sites import source_variable

    assert source_variable("Field::m_u", "Field::Field(unsigned long)") == "m_u"
    assert source_variable("Field::m_w", "Field::allocate()") == "m_w"
    assert source_variable("ns::Field::m_w", "ns::Field::allocate()") == "m_w"
    assert source_variable("Field::m_w", "Other::allocate()") is None
    assert source_variable("Field::m_w", "main") is None
    assert source_variable("field", "main") == "field"
    assert source_variable("g->energy", "grid_alloc") is None
    assert source_variable("main@a.c:3", "main") is None


def test_a_mapping_with_no_allocation_is_refused_with_the_reason():
    """Memory numaprof saw mapped but not allocated (an anonymous mapping, the allocator's
    own arenas) has no statement to patch: a refusal that says so, not nothing (which left
    a suggestion 'patch' without a patch)."""
    anon = obj("anon@0x55e42553b000", "anonymous mapping", "mapping", [])
    r = patch_for_object(anon, "cyclic", [])
    refusal(r, "mapped, not allocated")
    assert r.fallback == "numactl"
