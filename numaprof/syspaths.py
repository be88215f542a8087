"""Which files belong to the system rather than to the user's program.

One definition for every layer: `record` archives and hashes only the user's files, the
patcher never edits a system file, and naming looks through frames of the C library and
the compiler's headers (std::vector, std::allocator) to the user's line.
"""

from __future__ import annotations

import os

#: Trees the distribution or a vendor toolchain owns.  /usr/local is the user's.
SYSTEM_TREES = ("/usr/", "/lib/", "/lib64/", "/bin/", "/sbin/", "/etc/", "/proc/", "/sys/",
                "/dev/", "/snap/", "/opt/rh/")


def is_system_path(path: str) -> bool:
    """A file of the system: never the user's code to hash, archive or patch."""
    p = os.path.normpath(path)
    return p.startswith(SYSTEM_TREES) and not p.startswith("/usr/local/")


def is_system_source(path: str) -> bool:
    """A header of the compiler or the C library (``/usr/include``, GCC's own headers,
    any ``include/c++`` tree): inlined code from there (std::vector, std::allocator) is
    not where the user allocated."""
    p = os.path.normpath(path)
    return (p.startswith(("/usr/include/", "/usr/lib/gcc/", "/usr/local/lib/gcc/",
                          "/usr/local/include/c++/"))
            or "/include/c++/" in p or (is_system_path(p) and "/include/" in p))


def is_system_library(path: str) -> bool:
    """A shared library of the system (libc, libstdc++, libgomp, ld.so)."""
    p = os.path.normpath(path)
    return is_system_path(p) and ".so" in os.path.basename(p)
