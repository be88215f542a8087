"""Lab tier: a scope-sensitive patch places what it claims, page for page, on 2 nodes.

tests/progs/patch_corpus/static_params.c fills two static arrays through parameters of
the same name (`int keys[]`, `unsigned *perm`), where sizeof is a pointer's.  Recorded on
this machine, `suggest --target 2s --apply` places them with bind_block at the start of
main; the rebuilt program runs under `numaprof record` in a 2-node guest, and the
kernel's numa_maps at exit must show every page of each array on the node the Python
model of bind_block gives it (half on node 0, half on node 1) — where the old patch placed
one page and left the rest on the master thread's node.
"""

import shutil
import subprocess

import pytest
from helpers import ROOT, run_numaprof

pytestmark = pytest.mark.lab

CORPUS = ROOT / "tests" / "progs" / "patch_corpus"
BUILD = ["gcc", "-std=c11", "-O2", "-g", "-fopenmp"]
OMP = "OMP_NUM_THREADS=2 OMP_PROC_BIND=spread OMP_PLACES=cores"
THP_OFF = ("thp", "echo never > /sys/kernel/mm/transparent_hugepage/enabled")


@pytest.fixture(scope="module")
def placed(tmp_path_factory, labkit):
    work = tmp_path_factory.mktemp("patchcorpus")
    src = work / "static_params.c"
    shutil.copyfile(CORPUS / "static_params.c", src)
    exe = work / "static_params"
    subprocess.run([*BUILD, "-o", str(exe), str(src)], check=True)
    run_numaprof("record", "-o", work / "host.data", "--freq", "4000", "--", exe,
                 env={"OMP_NUM_THREADS": "2"}, cwd=work, check=True)
    applied = run_numaprof("suggest", work / "host.data", "--target", "2s", "--apply", cwd=work)
    assert applied.returncode == 0, applied.stderr
    cflags = run_numaprof("config", "--cflags", check=True).stdout.split()
    subprocess.run([*BUILD, *cflags, "-o", str(exe), str(src)], check=True)
    lab = ["--preset", "2s", "--timeout", str(labkit.LAB_TIMEOUT)]
    guest = labkit.run_group(work, lab, [
        THP_OFF, ("run", f"{OMP} $NUMAPROF record --freq 1000 -o lab.data -- ./static_params 4")])
    guest.out("run")
    return work / "lab.data"


def _vmas(prof) -> list[tuple[int, int, str, dict[int, int]]]:
    """(start, end, policy, pages per node) of the numa_maps lines kept at exit; a VMA
    ends where the next one starts (an upper bound across unmapped gaps)."""
    rows = []
    for f in prof.glob("numa_maps.*"):
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            nodes = {int(k[1:]): int(v) for k, v in (p.split("=", 1) for p in parts[2:]
                                                     if "=" in p)
                     if k.startswith("N") and k[1:].isdigit()}
            rows.append((int(parts[0], 16), parts[1], nodes))
    rows.sort()
    return [(start, rows[k + 1][0] if k + 1 < len(rows) else start + 4096, policy, nodes)
            for k, (start, policy, nodes) in enumerate(rows)]


@pytest.mark.parametrize("name", ["keys", "perm"])
def test_every_page_is_where_bind_block_puts_it(placed, name):
    from numaprof.analyzer import analyze
    from numaprof.recommender.policies import node_of_page

    obj = next(o for o in analyze(placed).objects if o.name == name)
    first = obj.address & ~0xFFF
    n_pages = ((obj.address + obj.size - 1) >> 12) - (first >> 12) + 1
    model = node_of_page("bind_block", n_pages, [0, 1], threads_nodes=[0, 1])
    # the first and last page may be shared with the neighbouring array, which its own
    # placement may bind elsewhere: every page in between must be where the model says
    lo, hi = first + 4096, first + (n_pages - 1) * 4096
    covered = 0
    for start, end, policy, nodes in _vmas(placed):
        a, b = max(start, lo), min(end, hi)
        if b <= a:
            continue
        pages = model[(a - first) >> 12:(b - first) >> 12]
        node = int(pages[0])
        assert (pages == node).all(), (hex(start), policy)
        assert policy == f"prefer:{node}", (hex(start), policy, node)
        assert set(nodes) <= {node}, (hex(start), policy, nodes)
        covered += (b - a) >> 12
    assert covered == n_pages - 2, (covered, n_pages)
    assert 0 < int((model == 1).sum()) < n_pages  # both nodes hold part of the array
