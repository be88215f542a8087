"""A copy per node of data written first and then only read (recommender/patch/replicate.py):
the copy after the last write, the parallel reads through a per-thread pointer to this
node's copy, the copies dropped before a free; refused with the reason when a write could
follow the copy; the patched file compiles and computes what the original did."""
from __future__ import annotations

import pytest
from helpers import PROGS, line_of, outputs_before_after, run_numaprof, write_source

from numaprof.recommender.patch.edits import Patch, Refusal
from numaprof.recommender.patch.replicate import replicate_patch

TABLE = (PROGS / "replicate_table.c").read_text()

STATIC = """#include <stdio.h>
static double table[4096];
static void fill(void) { }
int main(void)
{
    for (int i = 0; i < 4096; i++)
        table[i] = i * 0.25;
    double sum = 0;
#pragma omp parallel reduction(+:sum)
    {
        for (int k = 0; k < 100000; k++)
            sum += table[(k * 7919) % 4096];
    }
    fill();
    printf("%.2f\\n", sum);
    return 0;
}
"""


def _same_output(tmp_path, original: str, patched: str, args=()) -> list[str]:
    cflags = run_numaprof("config", "--cflags", check=True).stdout.split()
    return outputs_before_after(tmp_path, original, patched, cflags, args)


def test_heap_table_read_in_a_parallel_loop(tmp_path):
    p = write_source(tmp_path, TABLE)
    got = replicate_patch(str(p), "table", line_of(TABLE, "malloc("), root=str(tmp_path))
    assert isinstance(got, Patch), got
    new = got.new_text
    # the copy right after the filling loop, before anything else
    fill = "        table[i] = (double)(i % 1000) * 0.5;\n"
    assert fill + "    numaprof_replicate(table, malloc_usable_size(table));\n" in new
    # each thread takes its node's copy once, in its first iteration
    assert "__typeof__(&(table)[0]) table_local = 0;\n#pragma omp parallel for" in new
    assert "reduction(+:total) firstprivate(table_local)\n" in new
    assert "{ if (!table_local) table_local = NUMAPROF_LOCAL(table);" in new
    assert "total += table_local[x % (unsigned long)n];" in new
    assert "(void)numaprof_replicate_free(table), free(table);" in new
    assert got.info.kind == "replicate"
    outs = _same_output(tmp_path, TABLE, new, ["4096", "100000"])
    assert outs[0] == outs[1] and float(outs[0]) > 0, outs


def test_static_array_read_in_a_parallel_region(tmp_path):
    p = write_source(tmp_path, STATIC)
    got = replicate_patch(str(p), "table", None, root=str(tmp_path), one_unit=True)
    assert isinstance(got, Patch), got
    new = got.new_text
    assert "numaprof_replicate(table, sizeof(table));" in new
    # the function may run again: no write under live copies
    assert "numaprof_replicate_free(table);\n    for (int i = 0; i < 4096; i++)" in new
    assert "    {\n        __typeof__(&(table)[0]) table_local = NUMAPROF_LOCAL(table);" in new
    assert "sum += table_local[(k * 7919) % 4096];" in new
    assert "malloc.h" not in new
    outs = _same_output(tmp_path, STATIC, new)
    assert outs[0] == outs[1], outs


def test_local_name_taken(tmp_path):
    text = STATIC.replace("static void fill(void) { }",
                          "static int table_local;\nstatic void fill(void) { table_local++; }")
    got = replicate_patch(str(write_source(tmp_path, text)), "table", None, root=str(tmp_path),
                          one_unit=True)
    assert isinstance(got, Patch), got
    assert "table_local2[(k * 7919) % 4096]" in got.new_text


@pytest.mark.parametrize("change, why", [
    # written again after the reads (in the same loop): not written first, then read
    (("    fill();\n", "    table[0] = 1;\n"), "follows its last write"),
    # passed to a function, which may write it
    (("    fill();\n", "    fill2(table);\n"), "passed, copied or offset"),
    # copied into another pointer
    (("    double sum = 0;", "    double *alias = table; (void)alias;\n    double sum = 0;"),
     "passed, copied or offset"),
    # used in two functions: the order of their writes and reads is not seen
    (("static void fill(void) { }", "static void fill(void) { table[1] = 2; }"),
     "2 functions"),
    # read only in serial code
    (("#pragma omp parallel reduction(+:sum)\n", ""), "follows its last write"),
    (("static double table", "double table"), "other files"),
])
def test_refused_with_the_reason(tmp_path, change, why):
    text = STATIC.replace(*change)
    if "fill2" in text:
        text = text.replace("static void fill(void) { }",
                            "void fill2(double *t);\nstatic void fill(void) { }")
    assert text != STATIC
    got = replicate_patch(str(write_source(tmp_path, text)), "table", None, root=str(tmp_path),
                          one_unit="static double table" in text)
    assert isinstance(got, Refusal), got.diff
    assert why in got.reason, got.reason
    assert "numaprof_replicate(table, bytes)" in got.by_hand


def test_heap_refusals(tmp_path):
    # written in the parallel loop that reads it
    text = TABLE.replace("total += table[x % (unsigned long)n];",
                         "total += table[x % (unsigned long)n];\n        table[k % n] = 0;")
    got = replicate_patch(str(write_source(tmp_path, text)), "table", line_of(text, "malloc("),
                          root=str(tmp_path))
    assert isinstance(got, Refusal) and "follows its last write" in got.reason, got
    # the allocation line names another variable
    got = replicate_patch(str(write_source(tmp_path, TABLE)), "other", line_of(TABLE, "malloc("),
                          root=str(tmp_path))
    assert isinstance(got, Refusal) and "no allocation" in got.reason, got
    # collapse(2): no statement may go between the loops
    text = TABLE.replace("schedule(static) reduction(+:total)",
                         "schedule(static) collapse(1) reduction(+:total)")
    got = replicate_patch(str(write_source(tmp_path, text)), "table", line_of(text, "malloc("),
                          root=str(tmp_path))
    assert isinstance(got, Refusal) and "collapses" in got.reason, got


def test_member_and_row_writes_are_writes(tmp_path):
    # x[i].v = ... and x[i][j] = ... after the reads: written again, refused
    text = STATIC.replace("static double table[4096];",
                          "struct e { double v; };\nstatic struct e table[4096];")
    text = text.replace("table[i] = i * 0.25;", "table[i].v = i * 0.25;")
    text = text.replace("sum += table[(k * 7919) % 4096];", "sum += table[(k * 7919) % 4096].v;")
    got = replicate_patch(str(write_source(tmp_path, text)), "table", None, root=str(tmp_path),
                          one_unit=True)
    assert isinstance(got, Patch), got
    assert "table_local[(k * 7919) % 4096].v" in got.new_text
    later = text.replace("    fill();\n", "    table[3].v = 1;\n")
    got = replicate_patch(str(write_source(tmp_path, later)), "table", None, root=str(tmp_path),
                          one_unit=True)
    assert isinstance(got, Refusal) and "follows its last write" in got.reason, got


KERNEL = """#include <stdio.h>
#include <stdlib.h>
static double kernel(const double *t, long n, long m)
{
    double s = 0;
#pragma omp parallel for reduction(+:s)
    for (long k = 0; k < m; k++)
        s += t[(k * 7919) % n];
    return s;
}
int main(void)
{
    long n = 4096;
    double *table = malloc(n * sizeof *table);
    for (long i = 0; i < n; i++)
        table[i] = i * 0.25;
    printf("%.2f\\n", kernel(table, n, 100000));
    free(table);
    return 0;
}
"""


def test_reads_through_a_const_pointer_parameter(tmp_path):
    """The common shape: main fills the table and passes it to a kernel taking
    `const double *`: the copy goes after the fill, the kernel's parallel reads of its
    parameter go to this node's copy."""
    got = replicate_patch(str(write_source(tmp_path, KERNEL)), "table", line_of(KERNEL, "malloc("),
                          root=str(tmp_path))
    assert isinstance(got, Patch), got
    new = got.new_text
    assert "        table[i] = i * 0.25;\n    numaprof_replicate(table, malloc_usable_size(table));" in new
    assert "__typeof__(&(t)[0]) t_local = 0;\n#pragma omp parallel for reduction(+:s) " \
           "firstprivate(t_local)" in new
    assert "s += t_local[(k * 7919) % n];" in new
    assert "kernel() " in got.info.scope or "kernel()" in got.info.scope
    outs = _same_output(tmp_path, KERNEL, new)
    assert outs[0] == outs[1], outs


@pytest.mark.parametrize("change, why", [
    # a non-const parameter may write
    (("kernel(const double *t", "kernel(double *t"), "passed, copied or offset"),
    # the kernel casts the const away
    (("        s += t[(k * 7919) % n];", "        s += ((double *)t)[(k * 7919) % n];"),
     "used as"),
])
def test_const_parameter_refusals(tmp_path, change, why):
    text = KERNEL.replace(*change)
    assert text != KERNEL
    got = replicate_patch(str(write_source(tmp_path, text)), "table", line_of(text, "malloc("),
                          root=str(tmp_path))
    assert isinstance(got, Refusal), got.diff
    assert why in got.reason, got.reason


FACTORY = KERNEL.replace("""int main(void)""", """static double *build(long n)
{
    double *t = malloc(n * sizeof *t);
    if (!t)
        exit(2);
    for (long i = 0; i < n; i++)
        t[i] = i * 0.25;
    return t;
}
int main(void)""").replace("""    double *table = malloc(n * sizeof *table);
    for (long i = 0; i < n; i++)
        table[i] = i * 0.25;
""", """    double *table = build(n);
""")


def test_a_table_a_function_builds_and_returns(tmp_path):
    """`double *table = build(n);` where build allocates, fills and returns the block:
    the copy goes right after that call."""
    assert "= build(n);" in FACTORY
    got = replicate_patch(str(write_source(tmp_path, FACTORY)), "table",
                          line_of(FACTORY, "= build(n);"), root=str(tmp_path))
    assert isinstance(got, Patch), got
    assert "    double *table = build(n);\n    numaprof_replicate(table, " \
           "malloc_usable_size(table));\n" in got.new_text
    assert "s += t_local[(k * 7919) % n];" in got.new_text
    outs = _same_output(tmp_path, FACTORY, got.new_text)
    assert outs[0] == outs[1], outs
    # a builder that also hands the block to someone else is no plain factory
    leaky = FACTORY.replace("    return t;\n}", "    keep(t);\n    return t;\n}").replace(
        "static double *build", "void keep(double *p);\nstatic double *build")
    got = replicate_patch(str(write_source(tmp_path, leaky)), "table",
                          line_of(leaky, "= build(n);"), root=str(tmp_path))
    assert isinstance(got, Refusal) and "no allocation" in got.reason, got
