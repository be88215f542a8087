"""The "needs more samples" state: an object whose pattern cannot be told for want of
samples says how many more it needs (analyzer/classifier.py samples_needed)."""

from numaprof.analyzer import classifier


def f(samples, parallel, threads=2, windows=4):
    return {"samples": samples, "parallel_samples": parallel, "threads": threads,
            "parallel_windows": windows}


def test_too_few_samples_need_the_difference():
    assert classifier.fallback(f(6, 6)) == ("unknown", 0.0)
    assert classifier.samples_needed(f(6, 6)) == classifier.MIN_SAMPLES - 6


def test_too_few_parallel_samples_scale_with_the_parallel_share():
    # 40 samples, 5 in parallel windows: 15 parallel ones need 120 samples at that share
    assert classifier.samples_needed(f(40, 5)) == 80


def test_enough_or_one_thread_needs_nothing():
    assert classifier.samples_needed(f(500, 400)) == 0
    # one thread alone on an object: more samples would not give it a pattern
    assert classifier.samples_needed(f(60, 0, threads=1, windows=0)) == 0
    assert classifier.samples_needed(f(0, 0)) == 0
