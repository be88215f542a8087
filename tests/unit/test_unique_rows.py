"""varattr.unique_rows is numpy's unique over rows (axis 0, with the inverse), by one
lexsort: the same rows in the same order and the same inverse."""

import numpy as np

from numaprof.analyzer.varattr import unique_rows


def test_same_as_numpy_unique_over_rows():
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 17, 300):
        keys = rng.integers(-5, 5, (n, 3)).astype(np.int64)
        want, want_inv = np.unique(keys, axis=0, return_inverse=True)
        got, got_inv = unique_rows(keys)
        assert np.array_equal(got, want.reshape(-1, 3))
        assert np.array_equal(got_inv, want_inv.reshape(-1))
    big = np.array([[1, 2**62, -3], [1, 2**62, -4], [0, -(2**62), 5], [1, 2**62, -3]], dtype=np.int64)
    rows, inv = unique_rows(big)
    assert rows.tolist() == [[0, -(2**62), 5], [1, 2**62, -4], [1, 2**62, -3]]
    assert inv.tolist() == [2, 1, 0, 2]
