"""Padding falsely shared per-thread slots (recommender/patch/pad.py): a line per element,
every use an element, refused with the reason otherwise; the patched file compiles and
computes what the original did."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from numaprof.recommender.patch.edits import Patch, Refusal
from numaprof.recommender.patch.pad import pad_slots

SLOTS = """#include <stdio.h>
#ifdef _OPENMP
#include <omp.h>
#endif
static double slot[8];
static double total(int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += slot[i];
    return s;
}
int main(void)
{
#pragma omp parallel num_threads(2)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        for (int i = 0; i < 1000; i++)
            slot[t % 8] += i;
    }
    printf("%g\\n", total(8));
    return 0;
}
"""


def _write(tmp_path, text, name="s.c"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_each_slot_gets_a_line_and_every_use_an_element(tmp_path):
    # each thread adds to its own slot (thread 0 and 1): no race, the same sum every run
    src = SLOTS
    p = _write(tmp_path, src)
    got = pad_slots(str(p), "slot", 8, root=str(tmp_path))
    assert isinstance(got, Patch), got
    assert "static double slot[8][8] __attribute__((aligned(64)));" in got.new_text
    assert "s += slot[i][0];" in got.new_text and "slot[t % 8][0] += i;" in got.new_text
    assert got.info.kind == "pad_slots" and "2 use(s)" in got.info.scope
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    outs = []
    for text in (src, got.new_text):
        q = _write(tmp_path, text, "b.c")
        subprocess.run(["gcc", "-O2", "-fopenmp", "-Wall", "-Werror", "-o", str(tmp_path / "b"), str(q)],
                       check=True)
        outs.append(subprocess.run([str(tmp_path / "b")], capture_output=True, text=True,
                                   check=True).stdout)
    assert outs[0] == outs[1] == "999000\n"


@pytest.mark.parametrize("change, why", [
    (("static double slot[8];", "double slot[8];"), "visible to the program's other files"),
    (("s += slot[i];", "s += *(slot + i);"), "used as `slot + i`"),
    (("s += slot[i];", "s += sizeof slot;"), "used as `sizeof slot`"),
    (("static double slot[8];", "static double slot[8] = {1, 2};"), "has an initialiser"),
    (("static double slot[8];", "static double slot[8][2];"), "more than one dimension"),
    (("static double slot[8];", "static double slot[];"), "not declared with its size"),
])
def test_refused_with_the_reason(tmp_path, change, why):
    p = _write(tmp_path, SLOTS.replace(*change))
    got = pad_slots(str(p), "slot", 8, root=str(tmp_path))
    assert isinstance(got, Refusal) and why in got.reason, got
    assert "by hand" not in got.reason and got.by_hand


def test_a_local_of_the_same_name_is_another_object(tmp_path):
    src = SLOTS.replace("    double s = 0;\n", "    double s = 0, slot = 1;\n").replace(
        "        s += slot[i];", "        s += slot;")
    got = pad_slots(str(_write(tmp_path, src)), "slot", 8, root=str(tmp_path))
    assert isinstance(got, Patch), got
    assert "s += slot;" in got.new_text  # the local, untouched
    assert "static double slot[8] = {0};" not in got.new_text


def test_zero_initialiser_and_one_unit(tmp_path):
    src = SLOTS.replace("static double slot[8];", "double slot[8] = {0};")
    p = _write(tmp_path, src)
    assert isinstance(pad_slots(str(p), "slot", 8, root=str(tmp_path)), Refusal)
    got = pad_slots(str(p), "slot", 8, root=str(tmp_path), one_unit=True)
    assert isinstance(got, Patch) and "double slot[8][8] __attribute__((aligned(64))) = {0};" in got.new_text
    assert isinstance(pad_slots(str(p), "slot", 24, root=str(tmp_path), one_unit=True), Refusal)
