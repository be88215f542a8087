"""Source patches for C++ (recommender/patch.py with tree-sitter-cpp): placement after
``new T[n]`` and after a ``std::vector`` construction, namespaced statics, the parallel
first-touch check with C++'s overloadable operators, and `suggest --apply` / `--revert`
end to end on a recorded copy of examples/cxx_arrays.cpp.

Snippets are written into tmp_path so a test never modifies the repository.  Every patch
that is made is compiled (``g++ -fopenmp -Wall -Wextra -Werror``) against the real
numaprof_place.h.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import EXAMPLES, ROOT, run_numaprof

from numaprof.recommender.patch import (
    C_PRAGMA,
    Patch,
    Refusal,
    merge_patches,
    parallelize_first_touch,
    patch_for_object,
    place_after_allocation,
    place_static,
    resolve_source,
    site_function,
)

INCLUDE = ROOT / "collector" / "include"
CXX = ["g++", "-std=c++17", "-fopenmp", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}"]

SNIPPET = """\
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <vector>

namespace grid {
constexpr std::size_t N = 4096;
double field[N];
}  // namespace grid

struct Cell {
    double x;
};

class Matrix {
public:
    explicit Matrix(std::size_t n);
    ~Matrix() { delete[] data_; delete[] init_; }
    Matrix(const Matrix &) = delete;
    Matrix &operator=(const Matrix &) = delete;
    double *data_;
    double *init_;
    std::size_t n_;
};

Matrix::Matrix(std::size_t n) : init_(new double[n]()), n_(n)
{
    data_ = new double[n];
    // SAFE: a member array of the class being constructed
    for (std::size_t i = 0; i < n; i++)
        data_[i] = 0.0;
}

static double work(std::size_t n)
{
    double *a = new double[n];
    double *z = new double[n]();
    std::vector<double> v(n);
    std::vector<bool> flags(n);
    std::map<std::size_t, double> m;
    Matrix mat(n);
    double *c = static_cast<double *>(std::malloc(n * sizeof(double)));
    Cell *one = new Cell;
    double s = 0.0;
    // SAFE: casts, std::sqrt, a namespaced static and plain locals
    for (std::size_t i = 0; i < n; i++) {
        double t = std::sqrt(static_cast<double>(i));
        a[i] = t;
        grid::field[i] = 2.0 * t;
    }
    // SAFE: vector elements and a member read through `.`
    for (std::size_t i = 0; i < n; i++)
        v[i] = a[i] + mat.data_[i];
    // UNSAFE: std::map's operator[] inserts
    for (std::size_t i = 0; i < n; i++)
        m[i] = a[i];
    // UNSAFE: a reference local
    for (std::size_t i = 0; i < n; i++) {
        double &r = a[n - 1 - i];
        r = 1.0;
    }
    // UNSAFE: a local of class type
    for (std::size_t i = 0; i < n; i++) {
        Cell cell;
        cell.x = a[i];
        z[i] = cell.x;
    }
    // UNSAFE: std::vector<bool> packs bits
    for (std::size_t i = 0; i < n; i++)
        flags[i] = a[i] > 0.5;
    // UNSAFE: a range-based for
    for (double &x : v)
        x = 0;
    // UNSAFE: a write through a member
    for (std::size_t i = 0; i < n; i++)
        mat.data_[i] = 1.0;
    // UNSAFE: a member function call
    for (std::size_t i = 0; i < n; i++)
        v.push_back(a[i]);
    // UNSAFE: inside a lambda
    auto fill = [&]() {
        for (std::size_t i = 0; i < n; i++)
            c[i] = 0.0;
    };
    fill();
    // UNSAFE: auto local
    for (std::size_t i = 0; i < n; i++) {
        auto t = a[i];
        c[i] = t;
    }
    for (std::size_t i = 0; i < n; i++)
        s += v[i] + z[i] + c[i] + grid::field[i] + (flags[i] ? 1.0 : 0.0) + m[i];
    s += one->x = 1.0;
    delete one;
    std::free(c);
    delete[] a;
    delete[] z;
    return s;
}

int main()
{
    std::printf("%.1f\\n", work(grid::N));
    return 0;
}
"""


@pytest.fixture()
def snip(tmp_path):
    path = tmp_path / "snip.cpp"
    path.write_text(SNIPPET)
    return path


def line_of(text: str, needle: str, offset: int = 0) -> int:
    found = [i + 1 for i, ln in enumerate(text.splitlines()) if needle in ln]
    assert len(found) == 1, (needle, found)
    return found[0] + offset


def added(p: Patch) -> list[str]:
    return [ln[1:] for ln in p.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


def refusal(result, *words: str) -> str:
    assert isinstance(result, Refusal), f"expected a refusal, got the patch:\n{result.diff}"
    for w in words:
        assert w in result.reason, result.reason
    return result.reason


def compile_ok(path: Path, *, run: bool = False) -> str:
    exe = path.with_suffix("")
    args = [*CXX, "-O1", "-o", str(exe), str(path)] if run else [*CXX, "-fsyntax-only", str(path)]
    proc = subprocess.run(args, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    if not run:
        return ""
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr
    return out.stdout


# ---------------------------------------------------------------- parallel first touch

SAFE = ["SAFE: a member array", "SAFE: casts, std::sqrt", "SAFE: vector elements"]


@pytest.mark.parametrize("marker", SAFE)
def test_safe_cxx_loops_get_the_pragma(snip, marker):
    text = snip.read_text()
    line = line_of(text, marker, 2)  # the first statement of the loop's body
    p = parallelize_first_touch(snip, line, root=snip.parent)
    assert isinstance(p, Patch), p.reason
    loop = line_of(text, marker, 1)
    new = p.new_text.splitlines()
    assert new[loop - 1].strip() == C_PRAGMA
    assert new[loop].strip().startswith("for (std::size_t i = 0; i < n; i++)")
    assert added(p) == [new[loop - 1]]


@pytest.mark.parametrize("marker, words", [
    ("UNSAFE: std::map", ["`m`", "std::map<std::size_t, double>", "operators"]),
    ("UNSAFE: a reference local", ["reference `r`"]),
    ("UNSAFE: a local of class type", ["declares `cell` of type `Cell`", "constructor"]),
    ("UNSAFE: std::vector<bool>", ["`flags`", "std::vector<bool>"]),
    ("UNSAFE: a range-based for", ["range-based `for`"]),
    ("UNSAFE: a write through a member", ["`mat.data_[i]`", "through `mat.data_`"]),
    ("UNSAFE: a member function call", ["calls `v.push_back`"]),
    ("UNSAFE: inside a lambda", ["inside a lambda"]),
    ("UNSAFE: auto local", ["`t`", "`auto`"]),
])
def test_unsafe_cxx_loops_are_refused_with_the_reason(snip, marker, words):
    offset = 3 if marker == "UNSAFE: inside a lambda" else 2
    line = line_of(snip.read_text(), marker, offset)
    refusal(parallelize_first_touch(snip, line), *words)


def test_cxx_patches_compile_and_compute_the_same(snip, tmp_path):
    """All safe pragmas and every placement below, merged into one file: it compiles
    with -Wall -Wextra -Werror and prints what the original prints."""
    text = snip.read_text()
    before = compile_ok(snip, run=True)
    patches = [parallelize_first_touch(snip, line_of(text, m, 2), root=tmp_path) for m in SAFE]
    patches += [
        place_after_allocation(snip, line_of(text, "double *a = new double[n];"), "a", "cyclic",
                               root=tmp_path),
        place_after_allocation(snip, line_of(text, "double *z = new double[n]();"), "z",
                               "bind_block", root=tmp_path),
        place_after_allocation(snip, line_of(text, "std::vector<double> v(n);"), "v",
                               "skew_mapp", root=tmp_path),
        place_after_allocation(snip, line_of(text, "data_ = new double[n];"), "data_",
                               "prime_mapp", root=tmp_path),
        place_after_allocation(snip, line_of(text, "static_cast<double *>(std::malloc"), "c",
                               "random", root=tmp_path),
        place_static(snip, "grid::field", "cyclic", root=tmp_path),
    ]
    for p in patches:
        assert isinstance(p, Patch), p.reason
    [merged] = merge_patches(patches, root=tmp_path)
    assert merged.new_text.count('#include "numaprof_place.h"') == 1
    snip.write_text(merged.new_text)
    assert compile_ok(snip, run=True) == before


# -------------------------------------------------------------------- placement calls

def test_new_array_placement_uses_the_length_and_the_element_size(snip):
    text = snip.read_text()
    p = place_after_allocation(snip, line_of(text, "double *a = new double[n];"), "a", "cyclic")
    assert isinstance(p, Patch), p.reason
    assert "    numaprof_place(a, n * sizeof(*a), NUMAPROF_CYCLIC);" in added(p)
    assert "initialises" not in p.description  # default-initialised: no page touched yet


def test_value_initialised_new_is_placed_and_says_it_moves_pages(snip):
    text = snip.read_text()
    p = place_after_allocation(snip, line_of(text, "double *z = new double[n]();"), "z",
                               "cyclic")
    assert isinstance(p, Patch), p.reason
    assert "    numaprof_place(z, n * sizeof(*z), NUMAPROF_CYCLIC);" in added(p)
    assert "moves the pages" in p.description


def test_member_assigned_in_a_constructor_body(snip):
    text = snip.read_text()
    line = line_of(text, "data_ = new double[n];")
    p = place_after_allocation(snip, line, "data_", "skew_mapp")
    assert isinstance(p, Patch), p.reason
    new = p.new_text.splitlines()
    at = new.index("    data_ = new double[n];")
    assert new[at + 1] == "    numaprof_place(data_, n * sizeof(*data_), NUMAPROF_SKEW_MAPP);"
    assert new[new.index('#include <vector>') + 1] == '#include "numaprof_place.h"'


def test_vector_is_placed_after_its_construction_through_data(snip):
    text = snip.read_text()
    line = line_of(text, "std::vector<double> v(n);")
    p = place_after_allocation(snip, line, "v", "bind_block")
    assert isinstance(p, Patch), p.reason
    new = p.new_text.splitlines()
    at = new.index("    std::vector<double> v(n);")
    assert new[at + 1] == ("    numaprof_place(v.data(), v.size() * sizeof(*v.data()), "
                           "NUMAPROF_BIND_BLOCK);")
    assert "moves those pages" in p.description


@pytest.mark.parametrize("needle, var, words", [
    ("std::vector<bool> flags(n);", "flags", ["std::vector<bool>", "no data()"]),
    ("Matrix::Matrix(std::size_t n) : init_(new double[n]())", "n_",
     ["member initialiser of `n_`", "allocates no array", "not a std::vector"]),
    ("Cell *one = new Cell;", "one", ["one object, not an array"]),
    ("std::map<std::size_t, double> m;", "m", ["no new[], std::vector construction"]),
])
def test_cxx_allocation_refusals(snip, needle, var, words):
    line = line_of(snip.read_text(), needle)
    refusal(place_after_allocation(snip, line, var, "cyclic"), *words)


def test_placement_new_is_refused(tmp_path):
    src = tmp_path / "pnew.cpp"
    src.write_text("#include <new>\nvoid f(void *buf, int n) {\n"
                   "    double *p = new (buf) double[n];\n    p[0] = 1;\n}\n")
    refusal(place_after_allocation(src, 3, "p", "cyclic"), "placement new")


def test_namespaced_static_placed_before_its_first_touch(snip):
    text = snip.read_text()
    touch = line_of(text, "grid::field[i] = 2.0 * t;")
    p = place_static(snip, "grid::field", "cyclic", before_line=touch)
    assert isinstance(p, Patch), p.reason
    new = p.new_text.splitlines()
    # above the outermost statement of work() that holds the loop: the loop itself
    at = new.index("    // SAFE: casts, std::sqrt, a namespaced static and plain locals")
    assert new[at + 1] == "    numaprof_place(grid::field, sizeof(grid::field), NUMAPROF_CYCLIC);"
    assert new[at + 2] == "    for (std::size_t i = 0; i < n; i++) {"
    refusal(place_static(snip, "field", "cyclic", before_line=touch), "not an array defined")


# ------------------------------------------------------------- from sites to patches

@pytest.mark.parametrize("site, name", [
    ("main._omp_fn.0", "main"),
    ("Matrix::Matrix(unsigned long)", "Matrix::Matrix"),
    ("work(unsigned long) [clone .cold]", "work"),
    ("double ns::sum<double>(double const*, unsigned long)", "ns::sum"),
    ("f.part.0", "f"),
])
def test_site_function(site, name):
    assert site_function(site) == name


def test_resolve_source_with_cxx_function_names(snip, tmp_path):
    other = tmp_path / "other" / "snip.cpp"
    other.parent.mkdir()
    other.write_text("int unrelated() { return 0; }\n")
    paths = [str(snip), str(other)]
    assert resolve_source("snip.cpp", paths, "Matrix::Matrix(unsigned long)") == str(snip)
    assert resolve_source("snip.cpp", paths, "work(unsigned long)") == str(snip)
    assert resolve_source("snip.cpp", paths, "main._omp_fn.3") == str(snip)
    assert resolve_source("snip.cpp", paths, "unrelated()") == str(other)
    assert resolve_source("snip.cpp", paths, "Other::Matrix(unsigned long)") is None


def obj(name, site, kind, sites):
    return SimpleNamespace(name=name, site=site, kind=kind,
                           first_touch=SimpleNamespace(sites=sites))


def test_parallel_init_of_a_vector_is_refused_because_the_constructor_touches(snip):
    text = snip.read_text()
    line = line_of(text, "std::vector<double> v(n);")
    v = obj("v", f"work(unsigned long)@snip.cpp:{line}", "heap", ["?@libc.so.6"])
    reason = refusal(patch_for_object(v, "parallel_init", [str(snip)]),
                     "std::vector `v`", "writes its elements in its constructor", "serially")
    assert "not among the recorded sources" not in reason
    p = patch_for_object(v, "bind_block", [str(snip)])  # the fallback fixes.py takes
    assert isinstance(p, Patch) and "v.data()" in p.diff


def test_parallel_init_of_a_value_initialised_new_is_refused(snip):
    text = snip.read_text()
    line = line_of(text, "double *z = new double[n]();")
    z = obj("z", f"work(unsigned long)@snip.cpp:{line}", "heap", ["?@libc.so.6"])
    refusal(patch_for_object(z, "parallel_init", [str(snip)]), "`new double[n]()`",
            "initialises the array as it allocates it")


def test_parallel_init_of_new_array_follows_its_first_touch_loop(snip):
    text = snip.read_text()
    alloc = line_of(text, "double *a = new double[n];")
    touch = line_of(text, "a[i] = t;")
    a = obj("a", f"work(unsigned long)@snip.cpp:{alloc}", "heap",
            [f"work(unsigned long)@snip.cpp:{touch}"])
    p = patch_for_object(a, "parallel_init", [str(snip)])
    assert isinstance(p, Patch), p.reason
    assert added(p) == [f"    {C_PRAGMA}"]
    member = obj("data_", f"Matrix::Matrix(unsigned long)@snip.cpp:{line_of(text, 'data_ = new')}",
                 "heap", [])
    p = patch_for_object(member, "cyclic", [str(snip)])
    assert isinstance(p, Patch) and "numaprof_place(data_, n * sizeof(*data_)" in p.diff


def test_a_file_changed_since_recording_is_refused_with_that_reason(snip):
    text = snip.read_text()
    line = line_of(text, "double *a = new double[n];")
    a = obj("a", f"work(unsigned long)@snip.cpp:{line}", "heap", [])
    recorded = {str(snip): _sha(snip)}
    assert isinstance(patch_for_object(a, "cyclic", [str(snip)], hashes=recorded), Patch)
    snip.write_text("// edited\n" + text)  # every line moved down by one
    refusal(patch_for_object(a, "cyclic", [str(snip)], hashes=recorded),
            "snip.cpp changed after the profile was recorded")


def test_a_recorded_file_without_the_function_is_not_called_unrecorded(snip):
    a = obj("a", "nowhere(int)@snip.cpp:3", "heap", [])
    reason = refusal(patch_for_object(a, "cyclic", [str(snip)]), "`nowhere`")
    assert "not among the recorded sources" not in reason
    b = obj("b", "work(unsigned long)@other.cpp:3", "heap", [])
    refusal(patch_for_object(b, "cyclic", [str(snip)]), "other.cpp is not among the recorded")


def test_suggest_falls_back_from_parallel_init_to_placing_the_vector(snip, tmp_path):
    """fixes.attach_patches: parallel_init for a vector is refused with the constructor
    reason and replaced by bind_block through v.data(); the note follows the change."""
    from numaprof.recommender.fixes import attach_patches
    from numaprof.recommender.model import ObjectSuggestion, Prediction, Suggestions

    text = snip.read_text()
    line = line_of(text, "std::vector<double> v(n);")
    v = obj("v", f"work(unsigned long)@snip.cpp:{line}", "heap", ["?@libc.so.6"])
    preds = [Prediction(pol, 0.5, 1.0, 1.0, change="patch")
             for pol in ("parallel_init", "bind_block")]
    sug = ObjectSuggestion("v", "parallel_init", "Serially initialised.", preds[0], preds,
                           change="patch")
    note = "placement changes needing a code change: v (parallel_init)."
    result = Suggestions(target=None, target_name="2s", objects=[sug], notes=[note])
    prof = tmp_path / "prof"
    prof.mkdir()
    (prof / "sources.json").write_text(json.dumps({"schema": "numaprof.sources/1",
                                                   "files": {str(snip): _sha(snip)}}))
    analysis = SimpleNamespace(objects=[v], profile=SimpleNamespace(path=str(prof)))
    [patch] = attach_patches(result, analysis, [str(snip)], str(tmp_path))
    assert sug.policy == "bind_block" and sug.predicted is preds[1]
    assert "writes its elements in its constructor" in sug.reason
    assert "numaprof_place(v.data(), v.size() * sizeof(*v.data()), NUMAPROF_BIND_BLOCK);" \
        in sug.patch
    assert result.notes == ["placement changes needing a code change: v (bind_block)."]
    assert patch.path == str(snip)


# --------------------------------------------------------------------- end to end

def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.e2e
def test_suggest_apply_revert_on_recorded_cxx_arrays(tmp_path):
    """examples/cxx_arrays recorded on this 1-node machine, evaluated for the 2-socket
    preset: `v` (serially value-initialised by std::vector, read at random by every
    thread) gets a placement on v.data(); every patch is made (no wrong "not among the
    recorded sources"); --apply writes them, the result compiles with -Werror and
    computes the same; --revert restores the bytes."""
    src = tmp_path / "cxx_arrays.cpp"
    shutil.copyfile(EXAMPLES / "cxx_arrays.cpp", src)
    exe = tmp_path / "cxx_arrays"
    subprocess.run(["g++", "-O2", "-g", "-fopenmp", "-Wall", "-Wextra", "-o", str(exe), str(src)],
                   check=True)
    env = {"OMP_NUM_THREADS": "2"}
    prof = tmp_path / "cxx.data"
    # 16 passes (0.2 s plain): with 4 (0.06 s) a machine busy with other work ran the two
    # threads one at a time through the whole run often enough (1 in 6 beside two
    # spinning processes) that every array was `serial only` and none got a placement
    run_numaprof("record", "-o", prof, "--freq", "8000", "--", exe, "16", env=env, check=True)
    doc = json.loads(run_numaprof("suggest", prof, "--target", "2s", "--format", "json",
                                  check=True).stdout)
    sugs = {o["name"]: o for o in doc["objects"]}
    for o in doc["objects"]:
        assert "not among the recorded sources" not in o["reason"], o
        if o.get("change") == "patch" and o["policy"] != "first_touch":
            assert o.get("patch"), o
    assert "v" in sugs, {n: (o["policy"], o["reason"][:80]) for n, o in sugs.items()}
    v = sugs["v"]
    assert v["policy"] not in ("first_touch", "parallel_init"), v
    const = "NUMAPROF_" + v["policy"].upper()
    assert f"+    numaprof_place(v.data(), v.size() * sizeof(*v.data()), {const});" in v["patch"]
    if "parallel first-touch loop cannot be added" in v["reason"]:
        assert "writes its elements in its constructor" in v["reason"], v["reason"]

    original = src.read_bytes()
    expected = subprocess.run([str(exe), "2"], capture_output=True, text=True, check=True,
                              env={**os.environ, **env}).stdout
    # run in the source tree: --apply writes only files inside the directory it runs in
    r = run_numaprof("suggest", prof, "--target", "2s", "--apply", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    patched = src.read_text()
    assert patched != original.decode()
    assert '#include "numaprof_place.h"' in patched and "v.data()" in patched
    out = tmp_path / "patched"
    subprocess.run([*CXX, "-O2", "-o", str(out), str(src)], check=True)
    got = subprocess.run([str(out), "2"], capture_output=True, text=True, check=True,
                         env={**os.environ, **env}).stdout
    assert got == expected

    # The file no longer has the recorded content: no patch, and the reason says why.
    doc = json.loads(run_numaprof("suggest", prof, "--target", "2s", "--format", "json",
                                  check=True).stdout)
    v = next(o for o in doc["objects"] if o["name"] == "v")
    assert not v.get("patch") and "changed after the profile was recorded" in v["reason"]
    again = run_numaprof("suggest", prof, "--target", "2s", "--apply", cwd=tmp_path)
    assert again.returncode != 0 and "Traceback" not in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1, again.stderr
    r = run_numaprof("suggest", prof, "--revert")
    assert r.returncode == 0, r.stderr
    assert src.read_bytes() == original
    assert _sha(src) == hashlib.sha256(original).hexdigest()


def test_cxx_header_named_h_and_upper_case_C_are_parsed_as_cxx(tmp_path):
    """`.h` is parsed as C unless only the C++ grammar parses it; `.C` is C++."""
    body = ("#include <vector>\nstruct Grid {\n    std::vector<double> cells;\n"
            "    explicit Grid(unsigned n) {\n        double *w = new double[n];\n"
            "        for (unsigned i = 0; i < n; i++)\n            w[i] = 0.0;\n"
            "        delete[] w;\n    }\n};\n")
    for name in ("grid.h", "grid.C"):
        src = tmp_path / name
        src.write_text(body)
        p = place_after_allocation(src, 5, "w", "cyclic")
        assert isinstance(p, Patch), p.reason
        assert "        numaprof_place(w, n * sizeof(*w), NUMAPROF_CYCLIC);" in added(p)
        p = parallelize_first_touch(src, 7)
        assert isinstance(p, Patch), p.reason
    c_header = tmp_path / "plain.h"
    c_header.write_text("#include <stdlib.h>\nstatic inline double *mk(size_t n) {\n"
                        "    double *p = malloc(n * sizeof *p);\n    return p;\n}\n")
    refusal(place_after_allocation(c_header, 3, "p", "cyclic"), "`mk`, which returns it")
