"""numaprof_place.h, which the patches include after a file's own includes, builds
warning-free in strict ISO C (no _GNU_SOURCE), GNU C and C++, and places memory."""

import shutil
import subprocess

import pytest
from helpers import ROOT

INCLUDE = ROOT / "collector" / "include"
PROGRAM = """\
#include <stdio.h>
#include <stdlib.h>
#include "numaprof_place.h"

int main(void)
{
    size_t bytes = 64 * 4096;
    double *a = (double *)malloc(bytes);
    if (!a)
        return 2;
    int rc = numaprof_place(a, bytes, NUMAPROF_CYCLIC);
    a[0] = 1.0;
    printf("rc=%d %g\\n", rc, a[0]);
    free(a);
    return rc != 0;
}
"""


@pytest.mark.parametrize("compiler,std,suffix", [
    ("gcc", "c99", "c"), ("gcc", "c11", "c"), ("gcc", "c17", "c"), ("gcc", "gnu11", "c"),
    ("g++", "c++17", "cpp"),
])
def test_header_builds_strictly_and_places(tmp_path, compiler, std, suffix):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    src = tmp_path / f"app.{suffix}"
    src.write_text(PROGRAM)
    exe = tmp_path / "app"
    subprocess.run([compiler, f"-std={std}", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
                    str(src), "-o", str(exe)], check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "rc=0 1", (out.stdout, out.stderr)
