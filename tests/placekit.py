"""The test program of numaprof_place.h (the runtime the patches call), shared by the unit
tests on this machine and the page-for-page check in a 4-node lab guest."""

import shutil
import subprocess
from pathlib import Path

from helpers import ROOT

from numaprof.recommender.policies import node_of_page

INCLUDE = ROOT / "collector" / "include"
CC = shutil.which("cc") or shutil.which("gcc")

C_POLICIES = ["first_touch", "bind_all", "bind_block", "cyclic", "cyclic_block", "skew_mapp",
              "prime_mapp", "random", "random_block", "weighted_interleave"]

# Reads cases on stdin, one per line:
#   map POLICY N_PAGES M nodes... T threads_nodes... B SEED W weights... C capacity...
# and prints the node of every page.  `place` applies every policy to unaligned heap
# ranges, touches them as the program's initialisation would, and checks, page for page
# with move_pages, that each page is on the node the
# map gives over the allowed nodes, and that the data survived.
PROGRAM = r"""
#include <numaprof_place.h>
#include <stdio.h>
#include <string.h>

static const char *names[] = {"first_touch", "bind_all", "bind_block", "cyclic", "cyclic_block",
                              "skew_mapp", "prime_mapp", "random", "random_block",
                              "weighted_interleave"};

static int read_ints(int *out, int n)
{
    for (int i = 0; i < n; i++)
        if (scanf("%d", &out[i]) != 1)
            return -1;
    return 0;
}

static int do_map(void)
{
    char pol[64];
    while (scanf("%63s", pol) == 1) {
        int policy = -1, m, t, w, c;
        size_t n;
        unsigned long long seed;
        static int nodes[1024], tn[1024];
        static unsigned weights[1024];
        static size_t cap[1024];
        struct numaprof_place_opts o;
        for (int i = 0; i < NUMAPROF_N_POLICIES; i++)
            if (!strcmp(pol, names[i]))
                policy = i;
        if (policy < 0 || scanf("%zu %d", &n, &m) != 2 || read_ints(nodes, m)
            || scanf("%d", &t) != 1 || read_ints(tn, t))
            return 2;
        memset(&o, 0, sizeof o);
        if (scanf("%zu %llu %d", &o.block_pages, &seed, &w) != 3)
            return 2;
        for (int i = 0; i < w; i++)
            if (scanf("%u", &weights[i]) != 1)
                return 2;
        if (scanf("%d", &c) != 1)
            return 2;
        for (int i = 0; i < c; i++)
            if (scanf("%zu", &cap[i]) != 1)
                return 2;
        o.nodes = nodes;
        o.n_nodes = m;
        o.threads_nodes = t ? tn : NULL;
        o.n_threads = t;
        o.seed = seed;
        o.weights = w ? weights : NULL;
        o.capacity_pages = c ? cap : NULL;
        for (size_t i = 0; i < n; i++)
            printf("%d%c", numaprof_node_of_page((enum numaprof_policy)policy, i, n, &o),
                   i + 1 < n ? ' ' : '\n');
        if (n == 0)
            printf("\n");
    }
    return 0;
}

static int do_place(void)
{
    int allowed[NUMAPROF_MAX_NODES];
    int m = numaprof_allowed_nodes(allowed, NUMAPROF_MAX_NODES);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    const size_t sizes[] = {1, 4095, 3 * 4096 + 17, (1 << 20) + 123, (8 << 20) + 5};
    if (m <= 0) {
        perror("numaprof_allowed_nodes");
        return 1;
    }
    if (numaprof_current_node() < 0) {
        perror("numaprof_current_node");
        return 1;
    }
    for (int k = m - 1; k >= 0; k--) {
        if (numaprof_bind_to_node(allowed[k]) != 0) {
            perror("numaprof_bind_to_node");
            return 1;
        }
        if (numaprof_current_node() != allowed[k]) {
            fprintf(stderr, "bound to node %d, running on %d\n", allowed[k], numaprof_current_node());
            return 1;
        }
    }
    errno = 0;
    if (numaprof_bind_to_node(NUMAPROF_MAX_NODES - 1) != -1 || errno != ENOENT) {
        fprintf(stderr, "binding to a missing node did not fail with ENOENT\n");
        return 1;
    }
    for (int policy = 1; policy < NUMAPROF_N_POLICIES; policy++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t bytes = sizes[s];
            unsigned char *buf = malloc(bytes + 64);
            unsigned char *p = buf + 7; /* never page aligned */
            struct numaprof_place_opts o;
            size_t n, i;
            int *where;
            if (!buf)
                return 1;
            for (i = 0; i < bytes; i += 97)
                p[i] = (unsigned char)(i * 31 + 7);
            if (numaprof_place(p, bytes, (enum numaprof_policy)policy) != 0) {
                fprintf(stderr, "%s %zu: numaprof_place: %s\n", names[policy], bytes, strerror(errno));
                return 1;
            }
            n = ((uintptr_t)p + bytes - 1 - ((uintptr_t)p & ~(uintptr_t)(ps - 1))) / ps + 1;
            /* the program's own initialisation touches every page after the placement */
            {
                volatile unsigned char *v = p;
                for (i = 0; i < bytes; i += ps / 2)
                    v[i] = v[i];
                v[bytes - 1] = v[bytes - 1];
            }
            where = malloc(n * sizeof *where);
            if (!where || numaprof_page_nodes(p, bytes, where, n) != 0) {
                perror("numaprof_page_nodes");
                return 1;
            }
            memset(&o, 0, sizeof o);
            o.nodes = allowed;
            o.n_nodes = m;
            printf("pages %s %zu %d", names[policy], bytes, m);
            for (i = 0; i < (size_t)m; i++)
                printf(" %d", allowed[i]);
            printf(" :");
            for (i = 0; i < n; i++)
                printf(" %d", where[i]);
            printf("\n");
            for (i = 0; i < n; i++) {
                int want = numaprof_node_of_page((enum numaprof_policy)policy, i, n, &o);
                if (where[i] != want) {
                    fprintf(stderr, "%s %zu bytes: page %zu on node %d, expected %d\n",
                            names[policy], bytes, i, where[i], want);
                    return 1;
                }
            }
            for (i = 0; i < bytes; i += 97)
                if (p[i] != (unsigned char)(i * 31 + 7)) {
                    fprintf(stderr, "%s: data changed at %zu\n", names[policy], i);
                    return 1;
                }
            if (numaprof_place(p, bytes, NUMAPROF_FIRST_TOUCH) != 0) {
                perror("reset to first touch");
                return 1;
            }
            free(where);
            free(buf);
        }
        printf("%s ok\n", names[policy]);
    }
    errno = 0;
    if (numaprof_place(NULL, 10, NUMAPROF_CYCLIC) != -1 || errno != EINVAL)
        return 1;
    if (numaprof_place(allowed, 10, (enum numaprof_policy)99) != -1 || errno != EINVAL)
        return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "map"))
        return do_map();
    if (argc > 1 && !strcmp(argv[1], "place"))
        return do_place();
    return 2;
}
"""


def build(tmp_path: Path, *flags: str) -> Path:
    src = tmp_path / "place_test.c"
    src.write_text(PROGRAM)
    exe = tmp_path / ("place_test" + "".join(f.replace("=", "_").replace("-", "") for f in flags))
    proc = subprocess.run([CC, "-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
                           "-I", str(INCLUDE), *flags, str(src), "-o", str(exe)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return exe


def check_pages_against_python(stdout: str, min_nodes: int = 1) -> int:
    """Every `pages POLICY BYTES M nodes... : node per page` line equals policies.py's map."""
    n_lines = 0
    for line in stdout.splitlines():
        if not line.startswith("pages "):
            continue
        head, pages = line.split(" : ")
        words = head.split()
        policy, m = words[1], int(words[3])
        nodes = [int(x) for x in words[4:4 + m]]
        got = [int(x) for x in pages.split()]
        assert m >= min_nodes, line[:200]
        # defaults of numaprof_place(): all allowed nodes; bind_block one block per node
        want = node_of_page(policy, len(got), nodes, threads_nodes=nodes).tolist()
        assert got == want, (policy, words[2], got[:40], want[:40])
        n_lines += 1
    return n_lines
