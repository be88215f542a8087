"""A reduction clause for an accumulator every thread updates (recommender/patch/reduce.py):
added to the construct that runs the update, the atomic commented out, refused with the
reason when the threads' private copies would change what the program computes; the
patched file compiles and computes what the original did."""
from __future__ import annotations

import pytest
from helpers import line_of, outputs_before_after, write_source

from numaprof.recommender.patch.edits import Patch, Refusal
from numaprof.recommender.patch.reduce import reduction_patch

COUNTER = """#include <stdio.h>
static long counter;
int main(void)
{
#pragma omp parallel num_threads(2) // the workers
    {
        for (long i = 0; i < 100000; i++) {
#pragma omp atomic
            counter += i % 7;
        }
    }
    printf("%ld\\n", counter);
    return 0;
}
"""

HISTOGRAM = """#include <stdio.h>
static unsigned hist[64];
int main(void)
{
    long n = 200000;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        unsigned b = (unsigned)((i * 2654435761u) >> 7) % 64;
#pragma omp atomic update
        hist[b]++;
    }
    unsigned long s = 0;
    for (int b = 0; b < 64; b++)
        s += (unsigned long)hist[b] * (b + 1);
    printf("%lu\\n", s);
    return 0;
}
"""


def test_scalar_in_a_parallel_region(tmp_path):
    p = write_source(tmp_path, COUNTER)
    got = reduction_patch(str(p), "counter", line_of(COUNTER, "counter +="), root=str(tmp_path))
    assert isinstance(got, Patch), got
    # the clause goes before the directive's comment, the atomic is commented out
    assert "#pragma omp parallel num_threads(2) reduction(+:counter) // the workers" \
        in got.new_text
    assert "// #pragma omp atomic\n            counter += i % 7;" in got.new_text
    assert got.info.kind == "reduction" and "1 update(s)" in got.info.scope
    outs = outputs_before_after(tmp_path, COUNTER, got.new_text)
    assert outs[0] == outs[1] and outs[0].strip() != "0", outs


def test_array_in_a_parallel_loop(tmp_path):
    p = write_source(tmp_path, HISTOGRAM)
    got = reduction_patch(str(p), "hist", line_of(HISTOGRAM, "hist[b]++"), root=str(tmp_path))
    assert isinstance(got, Patch), got
    assert "#pragma omp parallel for schedule(static) reduction(+:hist)" in got.new_text
    assert "// #pragma omp atomic update" in got.new_text
    assert got.info.size_bytes == 256
    outs = outputs_before_after(tmp_path, HISTOGRAM, got.new_text)
    assert outs[0] == outs[1], outs


def test_local_accumulator_without_atomic(tmp_path):
    # a data race in the original (a common bug); the clause is what makes it right
    text = """double dot(const double *x, const double *y, long n)
{
    double s = 0;
#pragma omp parallel for
    for (long i = 0; i < n; i++)
        s = s + x[i] * y[i];
    return s;
}
"""
    p = write_source(tmp_path, text)
    got = reduction_patch(str(p), "s", line_of(text, "s = s +"), root=str(tmp_path))
    assert isinstance(got, Patch), got
    assert "#pragma omp parallel for reduction(+:s)\n" in got.new_text
    assert "local scope" in got.info.scope


@pytest.mark.parametrize("change, why", [
    # read inside the construct: it would see the thread's partial sum
    (("counter += i % 7;", "counter += i % 7;\n            if (counter > 5) break;"),
     "inside the construct"),
    # a function the region may call reads the shared variable
    (("int main(void)", "long peek(void) { return counter; }\nint main(void)"),
     "another function"),
    (("int main(void)\n{", "int main(void)\n{\n    long *q = &counter; (void)q;"),
     "address of `counter`"),
    (("#pragma omp atomic", "#pragma omp critical"), "critical"),
    (("static long counter;", "long counter;"), "other files"),
    (("static long counter;", "struct acc { long v; }; static struct acc counter;"),
     "arithmetic"),
    (("num_threads(2)", "num_threads(2) shared(counter)"), "already appears"),
    (("counter += i % 7;", "counter = i + counter;"), "has no update"),
    (("#pragma omp parallel num_threads(2) // the workers", "#pragma omp task"),
     "omp task"),
])
def test_refused_with_the_reason(tmp_path, change, why):
    text = COUNTER.replace(*change)
    assert text != COUNTER
    p = write_source(tmp_path, text)
    got = reduction_patch(str(p), "counter", line_of(text, "counter"
                                                   if "i + counter" in text else "counter +="),
                          root=str(tmp_path))
    assert isinstance(got, Refusal), got.diff
    assert why in got.reason, got.reason
    assert "reduction(+:counter)" in got.by_hand


def test_large_array_and_bitwise_float_refused(tmp_path):
    text = HISTOGRAM.replace("hist[64]", "hist[1 << 20]")
    got = reduction_patch(str(write_source(tmp_path, text)), "hist", line_of(text, "hist[b]++"),
                          root=str(tmp_path))
    assert isinstance(got, Refusal) and "private copy per thread" in got.reason, got
    text = COUNTER.replace("static long", "static double").replace("+= i % 7", "|= 1")
    got = reduction_patch(str(write_source(tmp_path, text)), "counter", line_of(text, "counter |="),
                          root=str(tmp_path))
    assert isinstance(got, Refusal) and "integer type" in got.reason, got


def test_one_unit_program_global(tmp_path):
    text = COUNTER.replace("static long counter;", "long counter;")
    got = reduction_patch(str(write_source(tmp_path, text)), "counter", line_of(text, "counter +="),
                          root=str(tmp_path), one_unit=True)
    assert isinstance(got, Patch), got
