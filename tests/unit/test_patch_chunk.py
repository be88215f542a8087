"""Whole pages per chunk for a loop whose threads write the same pages
(recommender/patch/chunk.py): the schedule's literal chunk scaled to 64 KiB, refused with
what to do otherwise; the patched file compiles and computes what the original did."""
from __future__ import annotations

import pytest
from helpers import line_of, outputs_before_after, write_source

from numaprof.recommender.patch.chunk import page_chunk_patch
from numaprof.recommender.patch.edits import Patch, Refusal

LOOP = """#include <stdio.h>
#include <stdlib.h>
int main(void)
{
    long n = 1 << 20;
    double *x = malloc(n * sizeof *x);
    for (long i = 0; i < n; i++)
        x[i] = (double)(i % 7);
    for (int s = 0; s < 3; s++) {
#pragma omp parallel for schedule(static, 16)
        for (long i = 0; i < n; i++)
            x[i] = 0.5 * x[i] + 1.0;
    }
    double sum = 0;
    for (long i = 0; i < n; i += 4096)
        sum += x[i];
    printf("%.3f\\n", sum);
    free(x);
    return 0;
}
"""


def test_static_chunk_scaled_to_whole_pages(tmp_path):
    p = write_source(tmp_path, LOOP)
    got = page_chunk_patch(str(p), "x", line_of(LOOP, "x[i] = 0.5"), root=str(tmp_path))
    assert isinstance(got, Patch), got
    # 16 doubles are 128 bytes: times 512, 64 KiB
    assert "#pragma omp parallel for schedule(static, 16 * 512)\n" in got.new_text
    assert got.info.kind == "page_chunks" and got.info.size_bytes == 65536
    outs = outputs_before_after(tmp_path, LOOP, got.new_text)
    assert outs[0] == outs[1], outs


def test_dynamic_without_chunk_gets_one(tmp_path):
    text = LOOP.replace("schedule(static, 16)", "schedule(dynamic)")
    got = page_chunk_patch(str(write_source(tmp_path, text)), "x", line_of(text, "x[i] = 0.5"),
                           root=str(tmp_path))
    assert isinstance(got, Patch), got
    assert "schedule(dynamic, 8192)" in got.new_text  # 8192 doubles: 64 KiB


@pytest.mark.parametrize("change, why, hand", [
    (("schedule(static, 16)", "schedule(runtime)"), "OMP_SCHEDULE", "OMP_SCHEDULE=static"),
    (("schedule(static, 16)", "schedule(static)"), "one block per thread", "whole pages"),
    (("schedule(static, 16)", "schedule(static, CH)"), "not a number", "whole pages"),
    (("schedule(static, 16)", "schedule(static, 16384)"), "already", "whole pages"),
    (("#pragma omp parallel for schedule(static, 16)\n", ""), "not in an OpenMP loop",
     "whole pages"),
])
def test_refused_with_what_to_do(tmp_path, change, why, hand):
    text = LOOP.replace(*change)
    got = page_chunk_patch(str(write_source(tmp_path, text)), "x", line_of(text, "x[i] = 0.5"),
                           root=str(tmp_path))
    assert isinstance(got, Refusal), got.diff
    assert why in got.reason and hand in got.by_hand, (got.reason, got.by_hand)
