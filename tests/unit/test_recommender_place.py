"""numaprof_place.h: the C runtime computes the same page→node maps as policies.py, and
places pages where its map says (on this machine every page is on node 0; the multi-node
page-for-page check is the same program run in the NUMA lab)."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from placekit import C_POLICIES, CC, build, check_pages_against_python

from numaprof.recommender.policies import node_of_page

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
