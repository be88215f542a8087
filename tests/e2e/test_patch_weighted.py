"""weighted_interleave as an applied patch: the suggestion's node ids and weights are
written into a ``numaprof_place_weighted`` block after the allocation (C, C++ new[],
std::vector, static arrays), the patched sources build with -Wall -Wextra -Werror in C
and C++ and run, and `suggest --apply` / `--revert` round-trip byte for byte on recorded
examples evaluated for a target whose nodes differ in bandwidth (tests/data's hwloc XML
with Bandwidth memattrs 30000 / 10000 MiB/s: weights 3:1).

This machine has one NUMA node: the patched programs run their placement on node 0
only (their pages' nodes are checked in test_place_header.py); the 2-node weights come
from the target, as `--target` does for any suggestion.
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

from numaprof.recommender import emit
from numaprof.recommender.apply import apply, revert
from numaprof.recommender.fixes import attach_patches
from numaprof.recommender.model import ObjectSuggestion, Prediction, Suggestions
from numaprof.recommender.patch import (
    Patch,
    Refusal,
    merge_patches,
    patch_for_object,
    place_after_allocation,
    place_static,
)
from numaprof.recommender.sources import sha256_file

INCLUDE = ROOT / "collector" / "include"
BANDWIDTH_XML = ROOT / "tests" / "data" / "hwloc-2n-bandwidth.xml"
STRICT = ["-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}"]

C_SRC = """\
#include <stdio.h>
#include <stdlib.h>

static double table[8192];

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    double *x = malloc(n * sizeof *x);
    double *y = calloc(n, sizeof *y);
    if (!x || !y)
        return 1;
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)(i % 13);
        y[i] = 2.0 * x[i];
    }
    for (size_t k = 0; k < 8192; k++)
        table[k] = (double)k;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * y[i] + table[i % 8192];
    printf("%.1f\\n", s);
    free(x);
    free(y);
    return 0;
}
"""

CXX_SRC = """\
#include <cstddef>
#include <cstdio>
#include <vector>

namespace grid {
double field[4096];
}

int main()
{
    const std::size_t n = 50000;
    double *a = new double[n];
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; i++) {
        a[i] = static_cast<double>(i % 5);
        v[i] = a[i] + 1.0;
    }
    for (std::size_t k = 0; k < 4096; k++)
        grid::field[k] = 0.5;
    double s = 0.0;
    for (std::size_t i = 0; i < n; i++)
        s += a[i] * v[i] + grid::field[i % 4096];
    std::printf("%.1f\\n", s);
    delete[] a;
    return 0;
}
"""

NODES, WEIGHTS = [0, 1], [3, 1]


def line_of(text: str, needle: str) -> int:
    found = [i + 1 for i, ln in enumerate(text.splitlines()) if needle in ln]
    assert len(found) == 1, (needle, found)
    return found[0]


def build_and_run(compiler: list[str], src: Path, *args: str) -> str:
    exe = src.with_suffix("")
    proc = subprocess.run([*compiler, *STRICT, "-O1", "-o", str(exe), str(src)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def weighted_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "numaprof_place_weighted(" in ln]


@pytest.mark.parametrize("std", ["c99", "c11", "gnu11"])
def test_c_patches_build_strictly_run_and_revert(tmp_path, std):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    src = tmp_path / "app.c"
    src.write_text(C_SRC)
    original = src.read_bytes()
    expected = build_and_run(["gcc", f"-std={std}"], src)
    text = C_SRC
    w = (NODES, WEIGHTS)
    patches = [
        place_after_allocation(src, line_of(text, "double *x = malloc"), "x",
                               "weighted_interleave", root=tmp_path, weighted=w),
        place_after_allocation(src, line_of(text, "double *y = calloc"), "y",
                               "weighted_interleave", root=tmp_path, weighted=([1, 0], [2, 5])),
        place_static(src, "table", "weighted_interleave",
                     before_line=line_of(text, "table[k] = (double)k;"), root=tmp_path,
                     weighted=w),
    ]
    assert all(isinstance(p, Patch) for p in patches), patches
    assert "weights 3:1 for nodes 0, 1" in patches[0].description
    (merged,) = merge_patches(patches, tmp_path)
    got = weighted_lines(merged.new_text)
    assert got == [
        "    " + emit.weighted_place_statement("x", "n * sizeof *x", NODES, WEIGHTS),
        "    " + emit.weighted_place_statement("y", "n * sizeof *y", [1, 0], [2, 5]),
        "    " + emit.weighted_place_statement("table", "sizeof(table)", NODES, WEIGHTS),
    ]
    assert "{0, 1}" in got[0] and "{3u, 1u}" in got[0] and "{2u, 5u}" in got[1]
    r = apply([merged], tmp_path, {str(src): sha256_file(src)})
    assert r.applied and src.read_text() == merged.new_text
    # the 2-node weights on this 1-node machine: mbind to node 1 fails (EINVAL), the
    # call returns -1 and the program goes on unchanged
    assert build_and_run(["gcc", f"-std={std}"], src) == expected
    revert(tmp_path)
    assert src.read_bytes() == original


def test_cxx_patches_build_strictly_run_and_revert(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    src = tmp_path / "app.cpp"
    src.write_text(CXX_SRC)
    original = src.read_bytes()
    cxx = ["g++", "-std=c++17"]
    expected = build_and_run(cxx, src)
    w = ([0], [1])  # this machine's one node: the placement succeeds
    patches = [
        place_after_allocation(src, line_of(CXX_SRC, "double *a = new double[n];"), "a",
                               "weighted_interleave", root=tmp_path, weighted=w),
        place_after_allocation(src, line_of(CXX_SRC, "std::vector<double> v(n);"), "v",
                               "weighted_interleave", root=tmp_path, weighted=w),
        place_static(src, "grid::field", "weighted_interleave",
                     before_line=line_of(CXX_SRC, "grid::field[k] = 0.5;"), root=tmp_path,
                     weighted=w),
    ]
    assert all(isinstance(p, Patch) for p in patches), patches
    (merged,) = merge_patches(patches, tmp_path)
    assert weighted_lines(merged.new_text) == [
        "    " + emit.weighted_place_statement("a", "n * sizeof(*a)", [0], [1]),
        "    " + emit.weighted_place_statement("v.data()", "v.size() * sizeof(*v.data())",
                                               [0], [1]),
        "    " + emit.weighted_place_statement("grid::field", "sizeof(grid::field)", [0], [1]),
    ]
    apply([merged], tmp_path, {str(src): sha256_file(src)})
    assert build_and_run(cxx, src) == expected
    revert(tmp_path)
    assert src.read_bytes() == original


def test_weighted_without_weights_is_refused_not_written_as_cyclic(tmp_path):
    src = tmp_path / "app.c"
    src.write_text(C_SRC)
    x = SimpleNamespace(name="x", kind="heap", site=f"main@app.c:{line_of(C_SRC, 'double *x')}",
                        first_touch=SimpleNamespace(sites=[]))
    r = patch_for_object(x, "weighted_interleave", [str(src)], root=str(tmp_path))
    assert isinstance(r, Refusal) and "no per-node weights" in r.reason
    p = patch_for_object(x, "weighted_interleave", [str(src)], root=str(tmp_path),
                         weighted=(NODES, WEIGHTS))
    assert isinstance(p, Patch) and "{3u, 1u}" in p.diff


def _suggestion(name: str, size: int) -> ObjectSuggestion:
    pred = Prediction("weighted_interleave", 0.5, 1.0, 1.0, change="patch")
    return ObjectSuggestion(name, "weighted_interleave", "Gathered at random.", pred, [pred],
                            change="patch", size=size, weighted_nodes=list(NODES),
                            weights=list(WEIGHTS))


def test_attach_patches_writes_the_suggestions_weights_or_gives_the_call_by_hand(tmp_path):
    """fixes.attach_patches passes the suggestion's weights to the patcher; where no patch
    can be made the change becomes `code` and the note gives the call to add by hand."""
    from numaprof.recommender.choose import weighted_note

    src = tmp_path / "app.c"
    src.write_text(C_SRC.replace("    double *y = calloc(n, sizeof *y);\n",
                                 "    double *y;\n    if (n) y = calloc(n, sizeof *y); "
                                 "else y = NULL;\n"))
    text = src.read_text()
    x = SimpleNamespace(name="x", kind="heap", site=f"main@app.c:{line_of(text, 'double *x')}",
                        first_touch=SimpleNamespace(sites=[]))
    y = SimpleNamespace(name="y", kind="heap", site=f"main@app.c:{line_of(text, 'y = calloc')}",
                        first_touch=SimpleNamespace(sites=[]))
    sx, sy = _suggestion("x", 800000), _suggestion("y", 800000)
    command = ["./app"]
    notes = [weighted_note(sx, command, x), weighted_note(sy, command, y)]
    assert all("suggest --apply" in n and "by hand" not in n for n in notes)
    result = Suggestions(target=None, target_name="t", objects=[sx, sy], notes=list(notes))
    prof = tmp_path / "prof"
    prof.mkdir()
    analysis = SimpleNamespace(objects=[x, y], profile=SimpleNamespace(path=str(prof),
                                                                       command=command))
    [patch] = attach_patches(result, analysis, [str(src)], str(tmp_path))
    assert sx.change == "patch" and "nmp_weights[] = {3u, 1u}" in sx.patch
    assert sy.change == "code" and sy.patch is None and "No source patch" in sy.reason
    assert result.notes[0] == notes[0]
    hand = result.notes[1]
    assert "by hand" in hand and emit.weighted_place_call("y", 800000, NODES, WEIGHTS) in hand
    assert "numactl --weighted-interleave=0,1 ./app" in hand


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.e2e
@pytest.mark.parametrize("example, compiler, args", [
    ("gather.c", ["gcc", "-std=c11"], ["16", "4"]),
    ("cxx_arrays.cpp", ["g++", "-std=c++17"], ["4"]),
])
def test_suggest_apply_revert_weighted_on_recorded_examples(tmp_path, example, compiler, args):
    """An example recorded here, evaluated for the 2-node target whose nodes differ in
    bandwidth: its randomly read arrays get weighted_interleave with weights 3:1 in the
    JSON and in the patch; --apply writes the blocks, the result builds with -Werror and
    the flags of `numaprof config --cflags` and prints the same; --revert restores the
    bytes."""
    src = tmp_path / example
    shutil.copyfile(EXAMPLES / example, src)
    exe = tmp_path / "orig"
    subprocess.run([*compiler, "-O2", "-g", "-fopenmp", "-o", str(exe), str(src)], check=True)
    env = {"OMP_NUM_THREADS": "2"}
    prof = tmp_path / "p.data"
    run_numaprof("record", "-o", prof, "--freq", "8000", "--", exe, *args, env=env, check=True)
    target = ["--target", str(BANDWIDTH_XML)]
    doc = json.loads(run_numaprof("suggest", prof, *target, "--format", "json",
                                  check=True).stdout)
    weighted = [o for o in doc["objects"] if o["policy"] == "weighted_interleave"]
    # gather's lookup is read-only after its initialisation: where the recording saw that
    # (an initialising write sampled), a copy per node beats every placement and it is
    # replicated; among the placements the weighted one still comes first
    replicated = [o for o in doc["objects"] if o["policy"] == "replicate"]
    for o in replicated:
        placements = [a["policy"] for a in o["alternatives"] if a["policy"] != "replicate"]
        assert placements[0] == "weighted_interleave", (o["name"], o["alternatives"])
    assert weighted or replicated, [(o["name"], o["policy"]) for o in doc["objects"]]
    patched_objects = [o for o in weighted if o["change"] == "patch"]
    assert patched_objects or replicated, weighted
    for o in weighted:
        assert o["weights"] == [{"node": 0, "weight": 3}, {"node": 1, "weight": 1}], o
        if o["change"] == "patch":
            assert "static const unsigned nmp_weights[] = {3u, 1u};" in o["patch"], o["patch"]
        else:  # e.g. cxx_arrays' tiles[t], allocated in a loop: the call is to add by hand
            assert o["change"] == "code" and o["patch"] is None, o
            assert "No source patch" in o["reason"], o["reason"]
            assert any(n.startswith(f"{o['name']}: weighted_interleave needs a call")
                       and "by hand" in n for n in doc["notes"]), doc["notes"]
    for o in doc["objects"]:
        if o["policy"] != "weighted_interleave":
            assert o["weights"] is None, o
    assert not any("does not patch" in n for n in doc["notes"]), doc["notes"]

    original = src.read_bytes()
    expected = subprocess.run([str(exe), *args], capture_output=True, text=True, check=True,
                              env={**os.environ, **env}).stdout
    # run in the source tree: --apply writes only files inside the directory it runs in
    r = run_numaprof("suggest", prof, *target, "--apply", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    patched = src.read_text()
    assert len(weighted_lines(patched)) == len(patched_objects)
    cflags = run_numaprof("config", "--cflags", check=True).stdout.split()
    out = tmp_path / "patched"
    subprocess.run([*compiler, "-O2", "-fopenmp", "-Wall", "-Wextra", "-Werror", *cflags,
                    "-o", str(out), str(src)], check=True)
    got = subprocess.run([str(out), *args], capture_output=True, text=True, check=True,
                         env={**os.environ, **env}).stdout
    assert got == expected
    r = run_numaprof("suggest", prof, "--revert")
    assert r.returncode == 0, r.stderr
    assert src.read_bytes() == original and _sha(src) == hashlib.sha256(original).hexdigest()
