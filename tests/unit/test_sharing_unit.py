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


def test_hitm_loads_are_evidence_without_a_sampled_write():
    """Loads that hit a line modified in another core's cache (data source HITM, as PEBS,
    IBS and perf c2c report it): two threads' loads of one line, each thread's write never
    sampled, several HITM among them: contended; the same loads without HITM: nothing."""
    n = 40
    addr = np.asarray([0x10000 + 8 * (i % 2) for i in range(n)], dtype=np.uint64)
    tid, time, write = np.asarray([i % 2 for i in range(n)]), np.asarray([i * MS for i in range(n)]), \
        np.zeros(n, dtype=bool)
    ip = np.zeros(n, dtype=np.uint64)
    plain = np.full(n, 0x1E05080021, dtype=np.uint64)  # the kernel's "not available"
    hitm_src = plain.copy()
    hitm_src[::3] = (0x1E05080021 & ~np.uint64(0x1F << 19)) | np.uint64(sharing.SNOOP_HITM)
    assert sharing.hitm(plain).sum() == 0 and sharing.hitm(hitm_src).sum() == (n + 2) // 3
    assert sharing.object_sharing("x", addr, tid, time, write, ip, hitm_loads=sharing.hitm(plain)) is None
    f = sharing.object_sharing("x", addr, tid, time, write, ip, hitm_loads=sharing.hitm(hitm_src))
    assert f is not None and f.kind == "false" and f.hitm == (n + 2) // 3 and f.writes == 0
    # one thread alone hitting modified lines (written by a thread never sampled): no finding
    one = np.zeros(n, dtype=int)
    assert sharing.object_sharing("x", addr, one, time, write, ip, hitm_loads=sharing.hitm(hitm_src)) is None


def test_a_profile_with_hitm_data_sources_reports_them(tmp_path):
    """The analyzer reads samples.data_src when the profile has it (hardware backends,
    perf c2c imports): a small table read all over by 4 threads whose loads hit modified
    lines is a sharing finding with its HITM count, though no store was sampled."""
    import profgen
    from profgen import Array

    from numaprof.analyzer.core import analyze
    from numaprof.analyzer.profile import read_table

    path = tmp_path / "p.data"
    # written once by one thread, read by every thread two phases (200 ms) later
    profgen.synth_run(path, [Array("t", 4096, ["serial_init", "serial", "random"], mix=(1.0, 0.0, 0.0),
                                   samples=400)])
    assert analyze(path).sharing == []  # no store sampled near the loads: no evidence
    n = len(read_table(path, "samples")["addr"])
    src = np.full(n, 0x1E05080021, dtype=np.uint64)
    src[::4] = (0x1E05080021 & ~np.uint64(0x1F << 19)) | np.uint64(sharing.SNOOP_HITM)
    profgen.ProfileWriter(path).table("samples", data_src=src)
    a = analyze(path)
    found = {f.object: f for f in a.sharing}
    assert len(found) == 1, found
    f = next(iter(found.values()))
    assert f.hitm > 0 and f.threads >= 2, f


def _chunks(chunk_bytes, pages=32, n=400):
    """Two threads writing alternate chunks of `chunk_bytes` over `pages` pages, one
    sample a millisecond each, going through the array in turn."""
    addr, tid, time, write = [], [], [], []
    per_page = 4096 // chunk_bytes
    for i in range(n):
        t = i % 2
        k = (i // 2) % (pages * per_page // 2)  # the thread's k-th chunk
        chunk = 2 * k + t
        addr.append(0x100000 + chunk * chunk_bytes + 8 * (i % 3))
        tid.append(t)
        time.append(i * MS // 2)
        write.append(True)
    return addr, tid, time, write


def test_threads_writing_their_own_lines_of_shared_pages_is_page_sharing():
    # chunks of 128 bytes: no line shared, every page written by both threads
    f = _find(*_chunks(128))
    assert f is not None and f.kind == "page", f
    assert f.pages >= 4 and f.threads == 2 and f.windows >= 2
    assert "whole pages" in f.fix


def test_page_chunks_or_one_page_or_false_sharing_are_not_page_sharing():
    # chunks of a page: each page one thread's
    assert _find(*_chunks(4096)) is None
    # shared pages, but only two of them (boundaries, or a small object in the caches)
    assert _find(*_chunks(128, pages=2)) is None
    # chunks of 8 bytes: the lines are shared, which is false sharing, not page sharing
    f = _find(*_chunks(8, pages=8))
    assert f is not None and f.kind == "false", f
    # read by both, written by neither
    addr, tid, time, _ = _chunks(128)
    assert _find(addr, tid, time, [False] * len(addr)) is None


def test_line_moves_between_threads_are_counted_and_placed_on_the_target():
    """Successive samples on the line by two threads, one writing, move the line: counted
    per pair of threads; on a target whose binding puts the threads on two nodes every
    such move crosses the interconnect, on one node none does."""
    import synth_analysis as sa

    from numaprof.recommender import suggest
    from numaprof.recommender.targets import preset_topology

    n = 40
    # threads 0,1 alternate on one word, all writes: 39 successive pairs, all moves
    f = _find([0x10000] * n, [i % 2 for i in range(n)], [i * MS for i in range(n)], [True] * n)
    assert f.pairs == n - 1
    assert sorted(f.handoffs) == [(0, 1, 20), (1, 0, 19)]
    assert f.cross_node([0, 1]) == n - 1 and f.cross_node([0, 0]) == 0
    # reads only between the writes of one thread: a read by the other thread after a
    # write moves the line, two reads in a row by the same thread do not
    line = np.zeros(6, dtype=np.int64)
    tid = np.array([0, 1, 1, 0, 0, 1])
    write = np.array([True, False, False, True, False, False])
    pairs, moves = sharing._handoffs(line, tid, np.arange(6) * MS, write, np.ones(6, bool))
    # 0w->1r moves, 1r->1r no, 1r->0w moves, 0w->0r no, 0r->1r no (no write)
    assert pairs == 5 and sorted(moves) == [(0, 1, 1), (1, 0, 1)]

    a = sa.analysis([sa.obj("u", "regular", sa.access_regular(sa.BIG, 2), serial=True,
                            n_threads=2)], sa.threads(2))
    f.object, f.thread_index = "acc", [0, 1]
    a.sharing = [f]
    on = [x for x in suggest(a, preset_topology("2s")).notes if x.startswith("acc on 2s:")]
    assert on and f"{n - 1} (100%) are by a thread of another node" in on[0], on


def test_with_no_data_to_place_the_note_says_what_spreading_would_cost():
    """A program whose only hot object is a shared accumulator: the plan's binding keeps
    its threads on one node (small data), and the note says how many of the line's moves
    would cross nodes if the threads were spread."""
    import synth_analysis as sa

    from numaprof.recommender import suggest
    from numaprof.recommender.targets import preset_topology

    n = 40
    f = _find([0x10000] * n, [i % 2 for i in range(n)], [i * MS for i in range(n)], [True] * n)
    f.object, f.thread_index = "acc", [0, 1]
    a = sa.analysis([], sa.threads(2))
    a.sharing = [f]
    on = [x for x in suggest(a, preset_topology("2s")).notes if x.startswith("acc on 2s:")]
    assert on and "share node 0" in on[0], on
    assert f"they would run on nodes 0, 1: {n - 1} of the {n - 1}" in on[0], on


def test_an_object_of_many_samples_is_judged_on_a_subsample_with_counts_scaled(monkeypatch):
    """Past MAX_SAMPLES an object's sharing is found on a uniform sub-sample (bounded
    time): the same kind, the counts scaled back to the object's samples."""
    n = 4000
    rng = np.random.default_rng(1)
    tid = rng.integers(0, 2, n)
    args = (0x10000 + 8 * tid, tid, np.arange(n) * (MS // 10), np.ones(n, dtype=bool))
    whole = _find(*args)
    monkeypatch.setattr(sharing, "MAX_SAMPLES", 1000)
    part = _find(*args)
    assert whole is not None and part is not None
    assert part.kind == whole.kind == "false" and part.lines == 1
    assert abs(part.samples - whole.samples) < 0.1 * whole.samples
