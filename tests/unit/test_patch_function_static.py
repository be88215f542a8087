"""Placement of an array declared `static` inside a function (tests/progs/static_locals.c;
the NAS Parallel Benchmarks' FT keeps its grids so): after main's declarations, where
nothing can have touched it yet; a static of another function is refused, since the call
would run at every call of it."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers import PROGS, ROOT
from helpers import serially_touched_object as obj

from numaprof.recommender.patch import AlreadyPlaced, Patch, Refusal, patch_for_object
from numaprof.recommender.patch.place_static import place_function_static

HEADER_DIR = ROOT / "collector" / "include"  # numaprof_place.h


def lines(text: str) -> list[str]:
    return text.splitlines()


def added(patch: Patch) -> list[str]:
    return [ln[1:] for ln in patch.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


def refusal(result, *words: str) -> None:
    assert isinstance(result, Refusal), f"expected a refusal, got {result}"
    for w in words:
        assert w in result.reason, result.reason


def _copy(tmp_path):
    dst = tmp_path / "static_locals.c"
    shutil.copyfile(PROGS / "static_locals.c", dst)
    return dst


def test_mains_static_is_placed_after_mains_declarations(tmp_path):
    src = _copy(tmp_path)
    p = place_function_static(src, "u1", "main", "bind_block", recorded_size=8 << 21)
    assert isinstance(p, Patch), p
    new = lines(p.new_text)
    i = new.index("    numaprof_place(u1, sizeof(u1), NUMAPROF_BIND_BLOCK);")
    # after every declaration of main (C89 stays C89), before the first statement
    assert new[i - 1] == "    const double *c = coefficients();", new[i - 3:i + 2]
    assert new[i + 1] == "#pragma omp parallel for schedule(static)", new[i:i + 2]
    assert p.info.size_bytes == 8 << 21 and p.info.kind == "place_static"
    out = tmp_path / "out.c"
    out.write_text(p.new_text)
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    subprocess.run(["gcc", "-fopenmp", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                    f"-I{HEADER_DIR}", str(out)], check=True)
    # applied once, it is there: no second call
    out.write_text(p.new_text)
    assert isinstance(place_function_static(out, "u1", "main", "bind_block"), AlreadyPlaced)


def test_other_functions_statics_and_wrong_sizes_are_refused(tmp_path):
    src = _copy(tmp_path)
    refusal(place_function_static(src, "coef", "coefficients", "cyclic"), "static of coefficients()",
            "every call")
    refusal(place_function_static(src, "grid", "main", "cyclic"), "not a static array at the top of main()")
    refusal(place_function_static(src, "u1", "main", "cyclic", recorded_size=1 << 20),
            "16777216 bytes", "recorded 1048576")


def test_the_object_of_a_function_static_is_patched_where_the_function_declares_it(tmp_path):
    src = _copy(tmp_path)
    other = tmp_path / "other.c"
    other.write_text("static double u1[16];\ndouble peek(void) { return u1[3]; }\n")
    u1 = obj("u1", "in main .bss@static_locals", "static", [], size=8 << 21)
    p = patch_for_object(u1, "cyclic", [str(other), str(src)])
    assert isinstance(p, Patch), p
    assert p.path == str(src) and "    numaprof_place(u1, sizeof(u1), NUMAPROF_CYCLIC);" in added(p)
    # a file-scope array of that name elsewhere is another object
    g = obj("u1", ".bss@static_locals", "static", [], size=16 * 8)
    assert not isinstance(patch_for_object(g, "cyclic", [str(src)]), Patch)
    missing = obj("u1", "in solve .bss@static_locals", "static", [], size=8 << 21)
    refusal(patch_for_object(missing, "cyclic", [str(src)]), "declares the static array `u1` in solve()")
