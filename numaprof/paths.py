"""Where the native parts (collector executable, shim library, headers) live.

Installed: ``numaprof/libexec`` and ``numaprof/include`` inside the package.  In a source
checkout: ``build/dev`` (``make build``).  ``NUMAPROF_LIBEXEC`` overrides both.
"""

import os
from pathlib import Path

from numaprof.errors import NumaprofError

_PKG = Path(__file__).resolve().parent


def libexec_dir() -> Path:
    env = os.environ.get("NUMAPROF_LIBEXEC")
    candidates = [Path(env)] if env else []
    candidates += [_PKG / "libexec", _PKG.parent / "build" / "dev" / "libexec"]
    for c in candidates:
        if (c / "numaprof-collect").exists():
            return c
    for c in _installed("libexec"):  # importlib.metadata: only when nothing nearer has it
        if (c / "numaprof-collect").exists():
            return c
    raise NumaprofError(
        "the numaprof collector is not built (reinstall with 'pip install .' or run 'make build')"
    )


def _installed(sub: str) -> list[Path]:
    """The directory `sub` of an installed numaprof wheel, for a checkout whose Python
    sources are imported first (PYTHONPATH) but whose native parts are not built there."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        return [Path(distribution("numaprof").locate_file(f"numaprof/{sub}"))]
    except (PackageNotFoundError, OSError):
        return []


def include_dir() -> Path:
    for c in (_PKG / "include", _PKG.parent / "collector" / "include"):
        if (c / "numaprof_place.h").exists():
            return c
    # importlib.metadata costs 5 ms of every start: only when the checkout has none
    for c in _installed("include"):
        if (c / "numaprof_place.h").exists():
            return c
    return _PKG / "include"


def collector() -> Path:
    return libexec_dir() / "numaprof-collect"


def shim() -> Path:
    return libexec_dir() / "libnumaprof_shim.so"
