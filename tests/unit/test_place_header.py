"""numaprof_place.h, which the patches include after a file's own includes, builds
warning-free in strict ISO C (no _GNU_SOURCE), GNU C and C++, and places memory."""

import shutil
import subprocess

import pytest
from helpers import ROOT

INCLUDE = ROOT / "collector" / "include"
PROGRAM = """\
#include <stdio.h>
#include <stdlib.h>
#include "numaprof_place.h"

int main(void)
{
    size_t bytes = 64 * 4096;
    double *a = (double *)malloc(bytes);
    if (!a)
        return 2;
    int rc = numaprof_place(a, bytes, NUMAPROF_CYCLIC);
    a[0] = 1.0;
    printf("rc=%d %g\\n", rc, a[0]);
    free(a);
    return rc != 0;
}
"""

# numaprof_place_weighted over the first two allowed nodes (one here: node 0) with weights
# 3:1, as the weighted_interleave patches call it; every page is then written (absent pages
# take their range's policy then), queried, and must be on the node of
# numaprof_node_of_page's weighted map.  Bad arguments fail with EINVAL
# and move nothing.
WEIGHTED = """\
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "numaprof_place.h"

int main(void)
{
    enum { PAGES = 40 };
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), bytes = PAGES * ps, i;
    int allowed[NUMAPROF_MAX_NODES], where[PAGES], stray = 0, absent = 0;
    static const unsigned weights[] = {3u, 1u}, zero[] = {0u, 0u};
    struct numaprof_place_opts o;
    int m = numaprof_allowed_nodes(allowed, NUMAPROF_MAX_NODES);
    char *raw = (char *)malloc(bytes + ps), *a;
    if (m <= 0 || !raw)
        return 2;
    if (m > 2)
        m = 2;
    a = raw + (ps - (size_t)raw % ps) % ps; /* page-aligned: page i is a + i * ps */
    int rc = numaprof_place_weighted(a, bytes, allowed, weights, m);
    int err_nodes = numaprof_place_weighted(a, bytes, NULL, weights, m) == -1 && errno == EINVAL;
    int err_count = numaprof_place_weighted(a, bytes, allowed, weights, 0) == -1 && errno == EINVAL;
    int err_zero = numaprof_place_weighted(a, bytes, allowed, zero, m) == -1 && errno == EINVAL;
    memset(a, 1, bytes); /* pages not yet present take their node's policy here */
    memset(&o, 0, sizeof o);
    o.nodes = allowed;
    o.n_nodes = m;
    o.weights = weights;
    if (numaprof_page_nodes(a, bytes, where, PAGES) != 0) {
        free(raw);
        return 3;
    }
    for (i = 0; i < PAGES; i++) {
        absent += where[i] < 0;
        stray += where[i] != numaprof_node_of_page(NUMAPROF_WEIGHTED_INTERLEAVE, i, PAGES, &o);
    }
    printf("rc=%d nodes=%d einval=%d%d%d absent=%d stray=%d\\n", rc, m, err_nodes, err_count,
           err_zero, absent, stray);
    free(raw);
    return 0;
}
"""


STANDARDS = pytest.mark.parametrize("compiler,std,suffix", [
    ("gcc", "c99", "c"), ("gcc", "c11", "c"), ("gcc", "c17", "c"), ("gcc", "gnu11", "c"),
    ("g++", "c++17", "cpp"),
])


def _build_and_run(tmp_path, name, text, compiler, std, suffix):
    """Builds TEXT as NAME.SUFFIX with -std=STD -Wall -Wextra -Werror and runs it."""
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    src = tmp_path / f"{name}.{suffix}"
    src.write_text(text)
    exe = tmp_path / name
    subprocess.run([compiler, f"-std={std}", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
                    str(src), "-o", str(exe)], check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], capture_output=True, text=True)


@STANDARDS
def test_header_builds_strictly_and_places(tmp_path, compiler, std, suffix):
    out = _build_and_run(tmp_path, "app", PROGRAM, compiler, std, suffix)
    assert out.returncode == 0 and out.stdout.strip() == "rc=0 1", (out.stdout, out.stderr)


@STANDARDS
def test_weighted_places_every_page_on_its_weighted_node(tmp_path, compiler, std, suffix):
    out = _build_and_run(tmp_path, "weighted", WEIGHTED, compiler, std, suffix)
    assert out.returncode == 0, (out.stdout, out.stderr)
    got = dict(kv.split("=") for kv in out.stdout.split())
    # placed without error, all 40 pages present and each on its node
    assert got["rc"] == "0" and int(got["nodes"]) >= 1, out.stdout
    assert got["einval"] == "111", out.stdout
    assert got["absent"] == "0" and got["stray"] == "0", out.stdout


# numaprof_replicate in one translation unit, numaprof_local and numaprof_replicate_free
# in another (the registry is one for the program).  On one node there is nothing to copy:
# the local copy is the array itself.  Replicating twice is EEXIST, freeing what is not
# replicated ENOENT.
REPLICA_TU = """\
#include "numaprof_place.h"

int replicate_table(const double *t, size_t n) { return numaprof_replicate(t, n * sizeof *t); }
"""
REPLICA_MAIN = """\
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "numaprof_place.h"

int replicate_table(const double *t, size_t n);

int main(void)
{
    size_t n = 100000, i;
    int nodes[NUMAPROF_MAX_NODES], m = numaprof_allowed_nodes(nodes, NUMAPROF_MAX_NODES);
    double *t = (double *)malloc(n * sizeof *t), sum = 0.0;
    const double *local;
    if (!t)
        return 2;
    for (i = 0; i < n; i++)
        t[i] = (double)i;
    int rc = replicate_table(t, n);
    int again = replicate_table(t, n) == -1 && errno == EEXIST;
    local = (const double *)numaprof_local(t);
    for (i = 0; i < n; i++)
        sum += local[i];
    int same = m == 1 ? local == t : local != t;
    int freed = numaprof_replicate_free(t);
    int gone = numaprof_replicate_free(t) == -1 && errno == ENOENT;
    int back = numaprof_local(t) == t;
    printf("rc=%d eexist=%d same=%d sum=%.0f freed=%d enoent=%d back=%d\\n", rc, again, same,
           sum, freed, gone, back);
    free(t);
    return 0;
}
"""


@STANDARDS
def test_replicas_across_translation_units(tmp_path, compiler, std, suffix):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    srcs = []
    for name, text in (("tu", REPLICA_TU), ("main", REPLICA_MAIN)):
        src = tmp_path / f"{name}.{suffix}"
        src.write_text(text)
        srcs.append(str(src))
    exe = tmp_path / "replica"
    subprocess.run([compiler, f"-std={std}", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
                    *srcs, "-o", str(exe)], check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, (out.stdout, out.stderr)
    got = dict(kv.split("=") for kv in out.stdout.split())
    assert got == {"rc": "0", "eexist": "1", "same": "1", "sum": str(sum(range(100000))),
                   "freed": "0", "enoent": "1", "back": "1"}, out.stdout
