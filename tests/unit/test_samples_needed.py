"""The "needs more samples" states: an object whose pattern cannot be told for want of
samples says how many more it needs, and a random or irregular answer on too few samples
to tell the two apart is tentative and says how many more make it firm
(analyzer/classifier.py samples_needed, tentative; docs/classifier.md "Few samples")."""

from dataclasses import replace

import synth_analysis as sa

from numaprof.analyzer import classifier, core, merge
from numaprof.cli.render import json_report, text_report


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


def test_random_or_irregular_on_few_samples_is_tentative():
    few, firm = f(45, 45), f(classifier.FIRM_SAMPLES, 90)
    for pattern in ("random", "irregular"):
        assert classifier.tentative(pattern, few)
        assert classifier.samples_needed(few, pattern) == classifier.FIRM_SAMPLES - 45
        assert not classifier.tentative(pattern, firm)
        assert classifier.samples_needed(firm, pattern) == 0
    # a regular answer on few samples was right every time it was measured
    assert not classifier.tentative("regular", few)
    assert classifier.samples_needed(few, "regular") == 0
    assert not classifier.tentative("unknown", few)


def _objects():
    acc = sa.access_random(64, 2, n=45)
    guess = replace(sa.obj("hist", "random", acc, serial=False, n_threads=2, share=0.2),
                    pattern_confidence=0.74, pattern_tentative=True, samples_needed=55)
    needy = replace(sa.obj("idx", "unknown", sa.access_random(64, 2, n=12), serial=False,
                           n_threads=2, share=0.05), samples_needed=18,
                    features={"parallel_samples": 12.0})
    firm = sa.obj("a", "random", sa.access_random(64, 2, n=400), serial=False, n_threads=2)
    return guess, needy, firm


def test_the_reports_mark_a_tentative_pattern_and_the_finding_says_how_many_more(tmp_path):
    guess, needy, firm = _objects()
    out = tmp_path / "r.txt"
    text_report.render(sa.analysis([guess, needy, firm], sa.threads(2)), out=out)
    rows = {ln.split("│")[1].strip(): ln for ln in out.read_text().splitlines()
            if ln.startswith("│") and ln.split("│")[1].strip() in ("hist", "idx", "a")}
    assert "random? (0.74)" in rows["hist"], rows
    assert "needs +18 samples" in rows["idx"], rows
    assert "random (0.90)" in rows["a"] and "?" not in rows["a"], rows
    doc = json_report.report(sa.analysis([guess, firm], sa.threads(2)))
    tent = {o["name"]: o["pattern_tentative"] for o in doc["objects"]}
    assert tent == {"hist": True, "a": False}

    finding = core._more_samples([guess, needy, firm], freq=1009, duration=1.0)
    assert "1 object(s) need more samples for a pattern (idx: 18 more)" in finding, finding
    assert "1 object(s) with a tentative pattern" in finding and "hist: 55 more" in finding
    assert "a:" not in finding
    # the advice covers the neediest: hist's 45 samples must become 100
    factor = float(finding.split("a run ")[1].split("x longer")[0])
    assert factor >= 100 / 45 and factor >= (12 + 18) / 12, finding
    only = core._more_samples([guess, firm], freq=1009, duration=1.0)
    assert only.startswith("1 object(s) with a tentative pattern") and "for a pattern" not in only
    assert core._more_samples([firm], freq=1009, duration=1.0) is None


def test_merged_ranks_are_tentative_only_when_each_is():
    guess, _, firm = _objects()
    other = replace(guess, samples=60, samples_needed=40)
    both = merge._merge_objects([guess, other], total_samples=1000)
    assert both.pattern == "random" and both.pattern_tentative and both.samples_needed > 0
    one_firm = merge._merge_objects([guess, replace(firm, name="hist")], total_samples=1000)
    assert one_firm.pattern == "random" and not one_firm.pattern_tentative
    assert one_firm.samples_needed == 0
