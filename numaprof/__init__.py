"""numaprof: NUMA memory-access profiler and placement recommender.

In a source checkout the subpackages are the top-level folders analyzer/, recommender/,
cli/ and lab/ (docs/architecture.md); the installed wheel maps them under ``numaprof``.  Extending
``__path__`` lets ``python -m numaprof.cli.main`` work straight from the checkout too.
"""

from pathlib import Path as _Path

__version__ = "0.1.0"

_checkout = _Path(__file__).resolve().parent.parent
if (_checkout / "collector" / "CMakeLists.txt").exists() and (_checkout / "analyzer").is_dir():
    __path__.append(str(_checkout))  # noqa: F821  (module __path__)
