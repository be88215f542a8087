"""One definition of the system's files (numaprof/syspaths.py) for record, the patcher
and naming; user trees such as /opt/<app> and /usr/local/src are the user's."""

import pytest

from numaprof.syspaths import is_system_library, is_system_path, is_system_source


@pytest.mark.parametrize("path, system", [
    ("/usr/lib/x86_64-linux-gnu/libc.so.6", True),
    ("/lib64/ld-linux-x86-64.so.2", True),
    ("/usr/include/stdlib.h", True),
    ("/opt/rh/gcc-toolset-13/root/usr/include/c++/13/vector", True),
    ("/proc/self/maps", True),
    ("/opt/myapp/src/solver.c", False),  # record once skipped all of /opt
    ("/usr/local/src/app/main.c", False),
    ("/home/u/src/../src/main.c", False),
    ("/usr/../home/u/main.c", False),  # normalised before the test
])
def test_system_paths(path, system):
    assert is_system_path(path) is system


def test_sources_and_libraries():
    assert is_system_source("/usr/include/c++/12/bits/stl_vector.h")
    assert is_system_source("/opt/gcc-14/include/c++/14/bits/stl_vector.h")
    assert not is_system_source("/opt/myapp/include/grid.hpp")
    assert is_system_library("/usr/lib/x86_64-linux-gnu/libgomp.so.1")
    assert not is_system_library("/usr/local/lib/libmine.so")
    assert not is_system_library("/usr/bin/python3")
