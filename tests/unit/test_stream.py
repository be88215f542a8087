"""Large profiles (analyzer/stream.py): every sample counted, a stratified sub-sample
analysed, columns read a chunk at a time.  The sub-sample's answers are compared with the
whole profile's on synthetic runs whose answers are known (tests/profgen.py)."""

import numpy as np
import profgen
import pytest
from profgen import Array

from numaprof.analyzer import analyze, stream
from numaprof.analyzer.profile import open_profile, rows_of
from numaprof.analyzer.writer import write_column

MiB = 1 << 20


def test_keep_probabilities_fill_the_budget_small_strata_whole():
    counts = np.array([10, 100, 1000, 5000, 0])
    p = stream.keep_probabilities(counts, 600)
    kept = counts * p
    assert kept.sum() == pytest.approx(600)
    assert p[0] == p[1] == 1.0  # below the cap: every row
    assert kept[2] == pytest.approx(kept[3])  # above it: the same number of rows each
    assert np.all(stream.keep_probabilities(counts, 10**6) == 1.0)


def test_uniform_is_deterministic_and_uniform():
    rows = np.arange(200_000, dtype=np.uint64)
    u = stream.uniform(rows)
    assert np.array_equal(u, stream.uniform(rows))
    assert u.min() >= 0.0 and u.max() < 1.0
    hist = np.bincount((u * 10).astype(np.int64), minlength=10)
    assert np.all(np.abs(hist - 20_000) < 600)  # 4 standard deviations of a binomial


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "p"
    run = profgen.synth_run(path, [
        Array("regular", 16 * MiB, ["serial_init", "regular", "regular"], samples=40_000),
        Array("reversed", 16 * MiB, ["parallel_init", "regular", "reversed"], samples=40_000),
        Array("dynamic", 8 * MiB, ["parallel_init", "dynamic", "dynamic"], samples=40_000),
        Array("random", 8 * MiB, ["parallel_init", "random", "random"], samples=40_000),
        Array("small", 1 * MiB, ["parallel_init", "random", "random"], samples=400),
    ], extra_samples=2000, seed=5)
    return run, analyze(path), analyze(path, budget=30_000)


def _by_addr(analysis, run):
    return {a.name: next(o for o in analysis.objects if o.address == a.addr) for a in run.arrays}


def test_subsample_counts_every_row_exactly(big):
    run, whole, part = big
    assert part.profile.samples == whole.profile.samples == run.samples
    assert part.profile.with_address == whole.profile.with_address
    assert part.profile.rules == whole.profile.rules
    assert part.profile.outside_objects == whole.profile.outside_objects
    assert [t.samples for t in part.threads] == [t.samples for t in whole.threads]
    w, p = _by_addr(whole, run), _by_addr(part, run)
    for name in w:
        assert p[name].samples == w[name].samples, name
        assert p[name].share == pytest.approx(w[name].share)
    assert any("analysed for patterns" in f for f in part.findings)
    assert not any("analysed for patterns" in f for f in whole.findings)


def test_subsample_keeps_small_objects_whole_and_thins_large_ones(big):
    run, whole, part = big
    p = _by_addr(part, run)
    assert len(p["small"].access.page) == p["small"].samples  # all of its samples
    large = [len(p[n].access.page) for n in ("regular", "reversed", "dynamic", "random")]
    assert sum(large) < 30_000 and min(large) > 5_000  # about budget / 4 each
    # the weights stand for the object's samples
    assert float(np.sum(p["random"].access.weight)) == pytest.approx(p["random"].samples)


def test_subsample_gives_the_same_answers(big):
    run, whole, part = big
    w, p = _by_addr(whole, run), _by_addr(part, run)
    for name in w:
        assert p[name].pattern == w[name].pattern, name
        assert p[name].local_fraction == pytest.approx(w[name].local_fraction, abs=0.03), name
        assert p[name].reads == pytest.approx(w[name].reads, abs=0.03), name
        assert p[name].pages_by_node == w[name].pages_by_node, name
    assert part.local_fraction == pytest.approx(whole.local_fraction, abs=0.01)
    assert np.abs(part.traffic / part.traffic.sum() - whole.traffic / whole.traffic.sum()).max() < 0.01


def test_reading_a_column_in_chunks_keeps_memory_to_one_chunk(tmp_path):
    n = 8 << 20  # 64 MiB of <u8
    write_column(tmp_path / "samples.time.col", np.arange(n, dtype=np.uint64), "<u8")
    col = np.memmap(tmp_path / "samples.time.col", dtype="<u8", mode="r", offset=16, shape=(n,))
    before = _rss_file()
    total = 0
    for a in range(0, n, 1 << 20):
        total += int(rows_of(col, a, min(a + (1 << 20), n)).sum())
    assert total == n * (n - 1) // 2
    assert _rss_file() - before < 16 * MiB  # one 8 MiB chunk at a time, not 64 MiB


def test_absurd_time_in_a_later_chunk_is_refused_with_its_row(tmp_path, monkeypatch):
    from numaprof.analyzer import profile

    monkeypatch.setattr(profile, "CHECK_CHUNK", 1000)
    path = tmp_path / "p"
    run = profgen.synth_run(path, [Array("a", 1 * MiB, ["random"], samples=5000)])
    t = np.fromfile(path / "samples.time.col", dtype="<u8", offset=16)
    t[4321] = 2**63
    write_column(path / "samples.time.col", t, "<u8")
    assert run.samples > 4321
    with pytest.raises(profile.ProfileError, match="samples.time.col: row 4321: .*beyond 63 bits"):
        open_profile(path).table("samples")


def _rss_file() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile in /proc/self/status")


def test_pruning_as_the_counts_grow_leaves_the_final_caps_sample(big, monkeypatch):
    """Small chunks make the held rows pile up and be pruned many times: what is left is
    exactly the rows that the final caps keep (each row's hash below its stratum's final
    probability), in row order."""
    from numaprof.analyzer import attribution as att
    from numaprof.analyzer.archive import Archive
    from numaprof.analyzer.core import heap_intervals, mapping_intervals, static_intervals
    from numaprof.analyzer.objects import short_intervals, thread_sites
    from numaprof.analyzer.symbols import Mappings

    run, _whole, _part = big
    prof = open_profile(run.path)
    mappings = Mappings(prof.table("mappings"))
    objs = []
    layers = [heap_intervals(prof.table("objects"), objs, thread_sites(prof, mappings)),
              att.Intervals.concat([short_intervals(prof.table("objects"), objs),
                                    static_intervals(mappings, objs, Archive.read(run.path))]),
              mapping_intervals(prof.table("mappings"), objs)]
    s = prof.table("samples")
    monkeypatch.setattr(stream, "CHUNK", 5000)
    sub = stream.subsample(s, layers, len(objs), 20_000)
    whole = {k: np.asarray(v) for k, v in s.items()}
    strata = stream._strata(whole, layers, len(objs), len(objs) + 1)
    p = stream.keep_probabilities(np.bincount(strata, minlength=len(objs) + 2), 20_000)
    expected = np.flatnonzero(stream.uniform(np.arange(len(strata), dtype=np.uint64)) < p[strata])
    for col in ("time", "addr", "tid"):
        assert np.array_equal(sub.table[col], whole[col][expected]), col
