"""Synthetic analyses: the analyzer's result objects built by hand, with per-sample
accesses (page, thread) drawn from a known kernel shape (Pousa Ribeiro et al. 2010,
Figure 15: regular, irregular, random; static or dynamic schedule) and a known first touch
(master thread or parallel).  The recommender's tests start from these."""

import numpy as np

from numaprof.analyzer.model import (
    Analysis,
    FirstTouch,
    Node,
    ObjectAccess,
    ObjectResult,
    ProfileInfo,
    ThreadResult,
    Topology,
)
from numaprof.recommender.policies import static_schedule_owner

MiB = 1 << 20
PAGE = 4096


def one_node(cpus=2):
    return Topology(nodes=(Node(0, tuple(range(cpus)), 8 << 30),), distances=np.array([[10.0]]),
                    source="test")


def two_node_recorded():
    return Topology(nodes=(Node(0, (0, 1), 8 << 30), Node(1, (2, 3), 8 << 30)),
                    distances=np.array([[10.0, 21.0], [21.0, 10.0]]), source="test")


def threads(n, nodes=None, bound=False):
    nodes = nodes or [0] * n
    return [ThreadResult(tid=100 + i, pid=100, comm="app", samples=1000, cpus=[i], nodes=[nodes[i]],
                         node=nodes[i], migrations=0, bound=bound, affinity="") for i in range(n)]


def access_regular(n_pages, n_threads, n=8000, rng=None):
    """Static schedule, same block in every phase: thread k samples its own block."""
    rng = rng or np.random.default_rng(1)
    page = rng.integers(0, n_pages, n)
    return ObjectAccess(page=page, thread=static_schedule_owner(n_pages, n_threads)[page].astype(np.int32),
                        weight=np.ones(n), write=np.zeros(n, bool), n_pages=n_pages)


def access_random(n_pages, n_threads, n=8000, rng=None):
    """Gather: every thread's accesses spread over the whole array."""
    rng = rng or np.random.default_rng(2)
    return ObjectAccess(page=rng.integers(0, n_pages, n), thread=rng.integers(0, n_threads, n).astype(np.int32),
                        weight=np.ones(n), write=np.zeros(n, bool), n_pages=n_pages)


def access_dynamic(n_pages, n_threads, n=8000, chunk_pages=4, rng=None):
    """schedule(dynamic): chunks handed out in order to whichever thread is free, over time."""
    rng = rng or np.random.default_rng(3)
    n_chunks = n_pages // chunk_pages
    owner = rng.integers(0, n_threads, n_chunks)  # who grabbed each chunk
    time = np.sort(rng.random(n))  # chunks are processed in order: page rises with time
    page = np.minimum((time * n_pages).astype(np.int64), n_pages - 1)
    acc = ObjectAccess(page=page, thread=owner[np.minimum(page // chunk_pages, n_chunks - 1)].astype(np.int32),
                       weight=np.ones(n), write=np.zeros(n, bool), n_pages=n_pages)
    acc.time = (time * 1e9).astype(np.int64)
    return acc


def access_reversed(n_pages, n_threads, n=8000, rng=None):
    """Irregular (Pousa Ribeiro et al. 2010, Figure 15): forward static phase, then the loop run backwards."""
    rng = rng or np.random.default_rng(4)
    page = rng.integers(0, n_pages, n)
    owner = static_schedule_owner(n_pages, n_threads)
    fwd = owner[page]
    rev = owner[n_pages - 1 - page]
    phase2 = np.arange(n) >= n // 2
    return ObjectAccess(page=page, thread=np.where(phase2, rev, fwd).astype(np.int32),
                        weight=np.ones(n), write=np.zeros(n, bool), n_pages=n_pages)


def obj(name, pattern, acc, *, serial, n_threads, share=0.3, master_tid=100):
    ft = FirstTouch(threads=1 if serial else n_threads, nodes=[0], master_fraction=1.0 if serial else 1 / n_threads,
                    master_tid=master_tid, sites=["main@app.c:10"], pages=acc.n_pages, serial=serial)
    return ObjectResult(name=name, site="main@app.c:9", kind="heap", address=0x7F0000000000,
                        size=acc.n_pages * PAGE, samples=len(acc.page), share=share, pattern=pattern,
                        pattern_confidence=0.9, reads=0.7, writes=0.3, rmw=0.0, first_touch=ft,
                        pages_by_node=[acc.n_pages], traffic=np.zeros((1, 1)), local_fraction=1.0,
                        load_per_node=[1.0], imbalance=1.0, threads=n_threads, access=acc)


def analysis(objects, ths, topo=None, env=None, command=("./app", "-n", "10")):
    prof = ProfileInfo(path="/tmp/x", command=list(command), backend="soft", backend_reason={}, samples=10000,
                       with_address=9500, address_coverage=0.95, lost=0, unresolved=0, outside_objects=0,
                       complete=True, incomplete_reason=None, exit_status=0, duration_s=1.0, env=env or {},
                       freq=1000)
    topo = topo or one_node()
    return Analysis(profile=prof, topology=topo, objects=objects, threads=ths, traffic=np.zeros((1, 1)),
                    local_fraction=1.0, load_per_node=[1.0], imbalance=1.0)


def by_name(s):
    return {o.name: o for o in s.objects}


BIG = 64 * MiB // PAGE  # pages of a 64 MiB array: bandwidth-bound, spread threads


# --- the bundled examples (examples/serial_init.c, gather.c, numa_aware.c) as analyses ---

def example_serial_init(t=2):
    return analysis([obj(n, "regular", access_regular(BIG, t, rng=np.random.default_rng(i)), serial=True,
                         n_threads=t) for i, n in enumerate(("a", "b", "c"))], threads(t))


def example_gather(t=2):
    return analysis([
        obj("lookup", "random", access_random(BIG, t), serial=False, n_threads=t, share=0.6),
        obj("idx", "regular", access_regular(BIG // 2, t), serial=True, n_threads=t, share=0.3),
        obj("hist", "regular", access_regular(BIG // 32, t), serial=False, n_threads=t, share=0.05),
    ], threads(t))


def example_numa_aware(t=2):
    return analysis([obj(n, "regular", access_regular(BIG, t, rng=np.random.default_rng(i)), serial=False,
                         n_threads=t) for i, n in enumerate(("a", "b", "c"))], threads(t))
