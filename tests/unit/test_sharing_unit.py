"""analyzer/sharing.py on constructed samples: what counts as true and false sharing."""

import numpy as np

from numaprof.analyzer import sharing

MS = 1_000_000


def _find(addr, tid, time, write):
    return sharing.object_sharing("x", np.asarray(addr, dtype=np.uint64), np.asarray(tid),
                                  np.asarray(time), np.asarray(write, dtype=bool),
                                  np.zeros(len(addr), dtype=np.uint64))


def test_two_threads_writing_neighbouring_words_of_a_line_is_false_sharing():
    base = 0x10000
    n = 40
    addr = [base + 8 * (i % 2) for i in range(n)]  # thread i%2 writes its own word
    f = _find(addr, [i % 2 for i in range(n)], [i * MS for i in range(n)], [True] * n)
    assert f is not None and f.kind == "false" and f.lines == 1 and f.threads == 2


def test_two_threads_writing_one_word_is_true_sharing():
    n = 40
    f = _find([0x10000] * n, [i % 2 for i in range(n)], [i * MS for i in range(n)], [True] * n)
    assert f is not None and f.kind == "true"


def test_no_finding_without_writes_or_without_concurrency():
    n = 40
    # both threads only read the line: no invalidation
    assert _find([0x10000] * n, [i % 2 for i in range(n)], [i * MS for i in range(n)],
                 [False] * n) is None
    # each thread writes the line in its own phase, seconds apart: no concurrent access
    t = [i * MS if i < n // 2 else 5000 * MS + i * MS for i in range(n)]
    assert _find([0x10000] * n, [0 if i < n // 2 else 1 for i in range(n)], t, [True] * n) is None
    # different lines per thread
    assert _find([0x10000 + 64 * (i % 2) for i in range(n)], [i % 2 for i in range(n)],
                 [i * MS for i in range(n)], [True] * n) is None


def test_suggest_says_where_the_sharing_threads_run_on_the_target():
    """With the threads spread over a two-socket target, a shared line's writes cross the
    interconnect; the note names the nodes and the factor."""
    import synth_analysis as sa

    from numaprof.recommender import suggest
    from numaprof.recommender.targets import preset_topology

    a = sa.analysis([sa.obj("u", "regular", sa.access_regular(sa.BIG, 2), serial=True,
                            n_threads=2)], sa.threads(2))
    a.sharing = [sharing.SharingFinding("resid", "false", 1, 2, 500, 80, 40, 0.8, ["f@a.c:3"],
                                        thread_index=[0, 1])]
    notes = suggest(a, preset_topology("2s")).notes
    assert any(n.startswith("resid: false sharing") for n in notes), notes
    on = [n for n in notes if n.startswith("resid on 2s:")]
    assert on and "nodes 0, 1" in on[0] and "2.10" in on[0], notes
