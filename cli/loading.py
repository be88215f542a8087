"""Loading what the commands report on: a profile directory or a perf.data file."""

from __future__ import annotations

from pathlib import Path

from numaprof.analyzer.model import Analysis


def analyze_path(path: Path, **kwargs) -> Analysis:
    """Analyzes a numaprof profile, or a perf.data file through the perf importer."""
    from numaprof.analyzer import analyze
    from numaprof.analyzer.perf_import import as_profile

    with as_profile(path) as profile:
        analysis = analyze(profile, **kwargs)
    analysis.profile.path = str(path)
    return analysis
