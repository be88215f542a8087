"""Page→node maps of docs/recommender.md (recommender/policies.py): exact definitions."""

import numpy as np
import pytest

from numaprof.recommender.policies import (
    POLICIES,
    frame_toucher,
    node_of_page,
    smallest_prime_at_least,
    splitmix64,
    static_schedule_owner,
)


def test_cyclic_is_page_mod_m_over_the_given_nodes():
    got = node_of_page("cyclic", 7, [3, 5, 9])
    assert got.tolist() == [3, 5, 9, 3, 5, 9, 3]


def test_cyclic_block_deals_blocks_of_b_pages():
    got = node_of_page("cyclic_block", 10, [0, 1], block_pages=3)
    assert got.tolist() == [0, 0, 0, 1, 1, 1, 0, 0, 0, 1]


def test_skew_mapp_formula():
    m = 4
    got = node_of_page("skew_mapp", 40, list(range(m)))
    want = [(i + i // m + 1) % m for i in range(40)]
    assert got.tolist() == want
    # the skew shifts each round by one node: round r starts on node (r + 1) mod M
    assert got[0::m].tolist()[:4] == [1, 2, 3, 0]


def test_smallest_prime():
    assert [smallest_prime_at_least(m) for m in (1, 2, 3, 4, 6, 8, 9, 14)] == [2, 2, 3, 5, 7, 11, 11, 17]


def test_prime_mapp_with_prime_m_is_cyclic():
    assert node_of_page("prime_mapp", 30, [0, 1, 2]).tolist() == node_of_page("cyclic", 30, [0, 1, 2]).tolist()


def test_prime_mapp_deals_virtual_overflow_cyclically():
    # M = 4 → P = 5: page i goes to virtual node i mod 5; pages on virtual node 4 (i = 4, 9,
    # 14, ...) are dealt over the real nodes in page order: 0, 1, 2, 3, 0, ...
    got = node_of_page("prime_mapp", 25, [0, 1, 2, 3]).tolist()
    assert got[:4] == [0, 1, 2, 3]
    assert [got[i] for i in (4, 9, 14, 19, 24)] == [0, 1, 2, 3, 0]
    assert got[5:9] == [0, 1, 2, 3]


def test_prime_mapp_closed_form_matches_a_sequential_deal():
    for m in (4, 6, 8):
        p = smallest_prime_at_least(m)
        seq, c = [], 0
        for i in range(500):
            v = i % p
            if v < m:
                seq.append(v)
            else:
                seq.append(c % m)
                c += 1
        assert node_of_page("prime_mapp", 500, list(range(m))).tolist() == seq


def test_prime_mapp_spreads_evenly_enough():
    counts = np.bincount(node_of_page("prime_mapp", 8000, list(range(8))), minlength=8)
    assert counts.max() - counts.min() <= 2


def test_static_schedule_matches_libgomp_split():
    # 10 items over 4 threads: 3, 3, 2, 2
    assert static_schedule_owner(10, 4).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]


def test_bind_block_gives_block_k_to_thread_ks_node():
    got = node_of_page("bind_block", 8, [0, 1], threads_nodes=[0, 0, 1, 1])
    assert got.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    got = node_of_page("bind_block", 6, [0, 1], threads_nodes=[1, 0, 1])
    assert got.tolist() == [1, 1, 0, 0, 1, 1]


def test_parallel_init_is_bind_block_over_the_compute_threads():
    tn = [0, 1, 2, 3, 0, 1]
    a = node_of_page("parallel_init", 101, range(4), threads_nodes=tn)
    b = node_of_page("bind_block", 101, range(4), threads_nodes=tn)
    assert np.array_equal(a, b)


def test_parallel_init_on_huge_pages_gives_a_boundary_frame_to_the_block_starting_in_it():
    # 16 MiB, 2 threads, 2 MiB frames, page 0 of the array 400 pages into its frame:
    # block 1 starts at page 2048, in the frame of pages 1648..2159, which thread 1
    # reaches first (at its start) though pages 1648..2047 are thread 0's; the partial
    # frames at both ends are base pages
    n, first = 4096, 512 * 1000 + 400
    owner = static_schedule_owner(n, 2)
    got = node_of_page("parallel_init", n, [0, 1], threads_nodes=[0, 1], frame_pages=512,
                       first_page=first)
    want = owner.copy()
    want[1648:2048] = 1
    assert got.tolist() == want.tolist()
    assert frame_toucher(n, 2, np.arange(n), 512, first).tolist() == want.tolist()
    # at a frame boundary nothing moves; base pages (frame_pages 1): the static schedule
    aligned = node_of_page("parallel_init", n, [0, 1], threads_nodes=[0, 1], frame_pages=512,
                           first_page=512 * 1000)
    assert aligned.tolist() == owner.tolist()
    assert node_of_page("parallel_init", n, [0, 1], threads_nodes=[0, 1]).tolist() == owner.tolist()
    # bind_block (mbind per block) is exact whatever the frames
    assert node_of_page("bind_block", n, [0, 1], threads_nodes=[0, 1], frame_pages=512,
                        first_page=first).tolist() == owner.tolist()
    # a subset of pages gives the same nodes
    sub = np.array([0, 1647, 1648, 2047, 2048, 4095])
    assert node_of_page("parallel_init", n, [0, 1], threads_nodes=[0, 1], frame_pages=512,
                        first_page=first, pages=sub).tolist() == want[sub].tolist()


def test_frame_toucher_with_more_threads_than_frames_and_empty_blocks():
    # 4 threads over 1024 pages (blocks of 256), frames of 512 aligned at page 0: blocks 0
    # and 1 start in frame 0 (thread 0 first), blocks 2, 3 in frame 1 (thread 2)
    got = frame_toucher(1024, 4, np.arange(1024), 512, 0)
    assert got.tolist() == [0] * 512 + [2] * 512
    # 3 pages over 5 threads: blocks of one page and two empty ones; no whole frame
    assert frame_toucher(3, 5, np.arange(3), 512, 0).tolist() == [0, 1, 2]


def test_bind_all_fills_first_node_before_the_next():
    assert node_of_page("bind_all", 5, [2, 3]).tolist() == [2] * 5
    got = node_of_page("bind_all", 7, [2, 3], capacity_pages=[3, 10])
    assert got.tolist() == [2, 2, 2, 3, 3, 3, 3]


def test_first_touch_returns_the_toucher_nodes():
    ft = np.array([1, 1, 0, 2])
    assert node_of_page("first_touch", 4, [0, 1, 2], first_touch_nodes=ft).tolist() == [1, 1, 0, 2]
    with pytest.raises(ValueError):
        node_of_page("first_touch", 4, [0, 1])
    with pytest.raises(ValueError):
        node_of_page("first_touch", 5, [0, 1], first_touch_nodes=ft)


def test_splitmix64_reference_values():
    # splitmix64 seeded with 0: the well-known first outputs.
    got = splitmix64(0, np.arange(3)).tolist()
    assert got == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


def test_random_is_seeded_uniform_and_reproducible():
    a = node_of_page("random", 20000, [0, 1, 2, 3], seed=7)
    b = node_of_page("random", 20000, [0, 1, 2, 3], seed=7)
    c = node_of_page("random", 20000, [0, 1, 2, 3], seed=8)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    counts = np.bincount(a, minlength=4)
    assert counts.min() > 4500 and counts.max() < 5500


def test_random_block_is_constant_within_a_block():
    got = node_of_page("random_block", 64, [0, 1, 2, 3], block_pages=8, seed=1)
    blocks = got.reshape(8, 8)
    assert (blocks == blocks[:, :1]).all()
    assert len(set(blocks[:, 0].tolist())) > 1


def test_weighted_interleave_follows_the_weights():
    got = node_of_page("weighted_interleave", 10, [0, 1], weights=[3, 2])
    assert got.tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 1, 1]
    assert node_of_page("weighted_interleave", 6, [0, 1]).tolist() == [0, 1, 0, 1, 0, 1]
    with pytest.raises(ValueError):
        node_of_page("weighted_interleave", 6, [0, 1], weights=[1, 0])


def test_every_policy_is_defined_and_unknown_is_refused():
    for p in POLICIES:
        got = node_of_page(p, 33, [0, 1, 2], threads_nodes=[0, 1, 2],
                           first_touch_nodes=np.zeros(33, dtype=int))
        assert got.shape == (33,) and set(got.tolist()) <= {0, 1, 2}
    with pytest.raises(ValueError):
        node_of_page("interleave_everything", 4, [0])


def test_zero_pages():
    assert node_of_page("skew_mapp", 0, [0, 1]).shape == (0,)


def test_a_subset_of_pages_gives_the_same_nodes():
    rng = np.random.default_rng(3)
    n = 100_003
    sub = np.sort(rng.choice(n, 500, replace=False))
    ft = rng.integers(0, 4, n)
    for p in POLICIES:
        kw = dict(threads_nodes=[0, 1, 2, 3, 1, 2], first_touch_nodes=ft, block_pages=7, seed=9,
                  weights=[1, 2, 3, 1] if p == "weighted_interleave" else None,
                  capacity_pages=[30_000, 30_000, 30_000, 30_000] if p == "bind_all" else None)
        full = node_of_page(p, n, [0, 1, 2, 3], **kw)
        assert np.array_equal(node_of_page(p, n, [0, 1, 2, 3], pages=sub, **kw), full[sub]), p
    with pytest.raises(ValueError):
        node_of_page("cyclic", 10, [0, 1], pages=np.array([10]))
