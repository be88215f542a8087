"""numaprof_place.h: the C runtime computes the same page→node maps as policies.py, and
places pages where its map says (on this machine every page is on node 0; the multi-node
page-for-page check is the same program run in the NUMA lab)."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from numaprof.recommender.policies import node_of_page

ROOT = Path(__file__).resolve().parent.parent
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


pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    return build(tmp_path_factory.mktemp("place"))


def cases():
    rng = np.random.default_rng(5)
    out = []
    for policy in C_POLICIES[1:]:
        for n_pages in (0, 1, 7, 64, 1000, 4099):
            for m in (1, 2, 3, 4, 6, 8):
                nodes = [int(x) for x in rng.permutation(16)[:m]]
                t = int(rng.integers(1, 20))
                tn = [int(x) for x in rng.choice(nodes, t)]
                b = int(rng.integers(1, 40))
                seed = int(rng.integers(0, 2**63))
                w = [int(x) for x in rng.integers(1, 5, m)] if policy == "weighted_interleave" else []
                cap = [int(x) for x in rng.integers(1, 300, m)] if (policy == "bind_all" and m > 1) else []
                out.append((policy, n_pages, nodes, tn, b, seed, w, cap))
    return out


def test_c_and_python_maps_agree_page_for_page(exe):
    cs = cases()
    text = "".join(
        f"{p} {n} {len(nodes)} {' '.join(map(str, nodes))} {len(tn)} {' '.join(map(str, tn))} "
        f"{b} {seed} {len(w)} {' '.join(map(str, w))} {len(cap)} {' '.join(map(str, cap))}\n"
        for p, n, nodes, tn, b, seed, w, cap in cs)
    proc = subprocess.run([str(exe), "map"], input=text, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    for k, (p, n, nodes, tn, b, seed, w, cap) in enumerate(cs):
        got = [int(x) for x in lines[k].split()]
        want = node_of_page(p, n, nodes, threads_nodes=tn, block_pages=b, seed=seed,
                            weights=w or None, capacity_pages=cap or None).tolist()
        assert got == want, (p, n, nodes, tn, b, seed, w, cap)


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


def place_ok(exe: Path, env=None):
    proc = subprocess.run([str(exe), "place"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0 and ("Operation not permitted" in proc.stderr
                                 or "Function not implemented" in proc.stderr):
        pytest.skip(f"NUMA system calls refused here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert proc.stdout.count(" ok") == len(C_POLICIES) - 1
    assert check_pages_against_python(proc.stdout) == (len(C_POLICIES) - 1) * 5


def test_place_puts_every_page_where_the_map_says(exe):
    place_ok(exe)


def test_place_through_move_pages(tmp_path):
    # force the move_pages path (no mbind runs) to exercise it on a one-node machine
    place_ok(build(tmp_path, "-DNMP_PLACE_MAX_MBIND_RUNS=0"))


def test_place_under_sanitizers(tmp_path):
    flags = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all")
    probe = subprocess.run([CC, *flags, "-x", "c", "-", "-o", str(tmp_path / "probe")],
                           input="int main(void){return 0;}", capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("no ASan/UBSan runtime")
    place_ok(build(tmp_path, *flags), env={"ASAN_OPTIONS": "detect_leaks=1"})


_LAB_MAIN = (
    "import sys\n"
    "from numaprof.cli import lab, main\n"
    "if 'lab' not in main.group.commands:\n"
    "    main.group.add_command(lab.command, 'lab')\n"
    "main.main(sys.argv[1:])\n"
)


@pytest.mark.lab
def test_lab_four_nodes_c_placement_equals_python_model(tmp_path):
    """docs/recommender.md: on a 4-node guest, every page placed by numaprof_place.h is on the node
    recommender/policies.py gives, for every policy, for ranges that are not a multiple
    of the page size."""
    import sys

    from numaprof.errors import NumaprofError
    from numaprof.lab.runner import find_tools

    try:
        find_tools()
    except NumaprofError as e:
        if os.environ.get("NUMAPROF_LAB_REQUIRED"):
            pytest.fail(f"the NUMA lab is required but unavailable: {e}")
        pytest.skip(f"the NUMA lab is unavailable: {e}")
    exe = build(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", _LAB_MAIN, "lab", "--nodes", "4", "--timeout", "900",
                           "--", str(exe), "place"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=1000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count(" ok") == len(C_POLICIES) - 1, proc.stdout[-3000:]
    assert check_pages_against_python(proc.stdout, min_nodes=4) == (len(C_POLICIES) - 1) * 5
