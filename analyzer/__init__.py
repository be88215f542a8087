"""The analyzer: profile loading, attribution, classification, traffic matrices (docs/analyzer.md).

``numaprof.analyzer.analyze(path)`` returns a :class:`numaprof.analyzer.model.Analysis`;
the submodules are imported lazily so that the result model stays cheap to import.
"""

from __future__ import annotations


def analyze(path_or_profile, *, top=None, object_name=None, progress=None, budget=None):
    """Analyse a profile directory or an opened Profile; see :func:`numaprof.analyzer.core.analyze`."""
    from numaprof.analyzer.core import analyze as _analyze
    from numaprof.analyzer.stream import BUDGET

    return _analyze(path_or_profile, top=top, object_name=object_name, progress=progress,
                    budget=BUDGET if budget is None else budget)
