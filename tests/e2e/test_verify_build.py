"""`suggest --verify` without --build rebuilds from the compile lines the binary recorded
(cli/verify.py recorded_build): run here, in a copy, the command builds a program that
runs and gives the same answer."""

import shutil
import subprocess

from helpers import EXAMPLES, run_numaprof

from numaprof.cli.verify import recorded_build


def test_recorded_compile_lines_rebuild_the_program(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(EXAMPLES / "serial_init.c", src / "serial_init.c")
    subprocess.run(["gcc", "-O2", "-g", "-fopenmp", "-o", "serial_init", "serial_init.c"],
                   cwd=src, check=True)
    run_numaprof("record", "-o", "p.data", "--", "./serial_init", "1", "5", cwd=src,
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    build = recorded_build(src / "p.data", str(src.resolve()), str(src / "serial_init"))
    assert build is not None
    assert "-fopenmp" in build and "-O2" in build and "serial_init.c" in build
    # built with -g: the lab recording names the objects it measures from that debug info
    assert " -g " in build
    copy = tmp_path / "copy"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("p.data", "serial_init"))
    subprocess.run(build, shell=True, cwd=copy, check=True, env={"PATH": "/usr/bin:/bin",
                                                                  "CFLAGS": ""})
    want = subprocess.run([str(src / "serial_init"), "1", "5"], capture_output=True, text=True)
    got = subprocess.run([str(copy / "serial_init"), "1", "5"], capture_output=True, text=True)
    assert got.returncode == 0 and got.stdout == want.stdout
