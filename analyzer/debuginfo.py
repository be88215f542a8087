"""Where a stripped ELF file's separate debug file is, as gdb and perf look for it
(GDB manual, "Debugging Information in Separate Files"): by build ID under the debug
root, else by the `.gnu_debuglink` name beside the file, in its `.debug` directory, or
under the debug root.  The ELF reading is :mod:`symbols`'."""

from __future__ import annotations

import os

DEBUG_ROOT = "/usr/lib/debug"


def find(build_id: str | None, link_name: str | None, path: str) -> str | None:
    """The debug file of the ELF file at ``path`` with this build ID (hex) and
    `.gnu_debuglink` name (either may be None), or None when none is installed."""
    if build_id and len(build_id) > 2 and all(c in "0123456789abcdef" for c in build_id.lower()):
        bid = build_id.lower()
        candidate = os.path.join(DEBUG_ROOT, ".build-id", bid[:2], bid[2:] + ".debug")
        if os.path.isfile(candidate):
            return candidate
    if not link_name or "/" in link_name:
        return None
    here = os.path.dirname(os.path.realpath(path))
    for candidate in (os.path.join(here, link_name), os.path.join(here, ".debug", link_name),
                      os.path.join(DEBUG_ROOT + here, link_name)):
        if os.path.isfile(candidate) and os.path.realpath(candidate) != os.path.realpath(path):
            return candidate
    return None
