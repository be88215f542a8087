"""End-to-end: static thread-local storage (tests/progs/threadprivate.c: an OpenMP
threadprivate array and a C11 _Thread_local histogram) is accessed %fs-relative; the
shim records each thread's pointer, the collector adds it, and the analyzer names each
variable as one thread-private object with a copy per thread."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers import PROGS, compile_openmp, run_numaprof

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    work = tmp_path_factory.mktemp("tls")
    exe = work / "threadprivate"
    compile_openmp(PROGS / "threadprivate.c", exe)
    # 60 passes: the histogram gets ~300 samples here (~100 at 20 passes, where a random
    # answer is tentative and the thread-local histogram was called irregular in 4 of 12
    # recordings with 45-89 samples, 0 of 18 with 227-427: docs/classifier.md)
    run_numaprof("record", "-o", work / "p.data", "--", exe, "8000000", "60",
                 env={"OMP_NUM_THREADS": "2"}, check=True)
    return work / "p.data"


def test_tls_accesses_have_their_address(recorded):
    doc = json.loads(run_numaprof("report", recorded, "--format", "json", check=True).stdout)
    prof = doc["profile"]
    assert prof["address_coverage"] >= 0.9, prof["rules"]  # was 0.27: 71% `segment`
    assert prof["rules"].get("segment", 0) <= 0.02 * prof["samples"], prof["rules"]


def test_each_variable_is_one_thread_private_object(recorded):
    doc = json.loads(run_numaprof("report", recorded, "--format", "json", check=True).stdout)
    objs = {o["name"]: o for o in doc["objects"]}
    for name in ("work", "hist"):
        o = objs.get(name)
        assert o is not None, sorted(objs)
        assert o["thread_private"] is True and o["count"] == 2 and o["kind"] == "static", o
        assert o["threads"] == 2 and o["pattern"] == "random", o
    assert objs["in"]["thread_private"] is False


def test_each_thread_has_its_pointer_and_the_shims_file_is_gone(recorded):
    from numaprof.analyzer.profile import open_profile

    tt = open_profile(recorded).table("threads")
    tp = [int(x) for x in tt["tls_base"]]
    assert len(tp) == 2 and all(tp) and len(set(tp)) == 2, tp  # the main thread and one worker
    assert not list(recorded.glob("tls.*"))  # read into the table, then removed


def test_attached_the_pointers_come_from_the_threads_registers(tmp_path):
    # `record -p`: no shim in the program to record its threads' pointers; the collector
    # reads each one from the thread's registers (ptrace), and the program runs on
    exe = tmp_path / "threadprivate"
    compile_openmp(PROGS / "threadprivate.c", exe)
    env = dict(os.environ, OMP_NUM_THREADS="2")
    prog = subprocess.Popen([str(exe), "8000000", "100000"], stdout=subprocess.DEVNULL, env=env)
    try:
        time.sleep(0.5)  # its threads have started and run the loop
        prof = tmp_path / "a.data"
        run_numaprof("record", "-o", prof, "-p", str(prog.pid), "--duration", "1.5", check=True)
        state = (Path(f"/proc/{prog.pid}/status").read_text().split("State:")[1].split()[0])
        assert prog.poll() is None and state in ("R", "S"), state  # not left stopped
    finally:
        prog.kill()
        prog.wait()
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    assert doc["profile"]["address_coverage"] >= 0.9, doc["profile"]["rules"]  # was 0.24
    objs = {o["name"]: o for o in doc["objects"]}
    for name in ("work", "hist"):
        assert objs[name]["thread_private"] is True and objs[name]["count"] == 2, objs.get(name)


def test_a_shared_librarys_thread_local_array_is_named(tmp_path):
    # the library's block lies at an offset the dynamic linker chose; the shim records it
    # (tls_modules) and each thread's copy is found where the program itself says it is
    lib = tmp_path / "libtlslib.so"
    subprocess.run(["gcc", "-O2", "-g", "-fPIC", "-shared", "-o", str(lib), str(PROGS / "tls_lib.c")], check=True)
    exe = compile_openmp(PROGS / "tls_lib_main.c", tmp_path / "tls_lib_main",
                         f"-L{tmp_path}", "-ltlslib", f"-Wl,-rpath,{tmp_path}")
    prof = tmp_path / "l.data"
    out = run_numaprof("record", "-o", prof, "--", exe, "4000000", "20", env={"OMP_NUM_THREADS": "2"},
                       check=True).stdout
    copies = {int(line.split()[1], 16) for line in out.splitlines() if line.startswith("scratch ")}
    assert len(copies) == 2, out
    doc = json.loads(run_numaprof("report", prof, "--format", "json", check=True).stdout)
    objs = {o["name"]: o for o in doc["objects"]}
    o = objs.get("scratch")
    assert o is not None, sorted(objs)  # was two anonymous mappings (a thread stack, ld.so's block)
    assert o["site"] == ".tbss@libtlslib.so" and o["thread_private"] is True and o["count"] == 2, o
    assert int(o["address"], 16) in copies, (o["address"], [hex(c) for c in copies])
    assert o["samples"] >= 0.3 * doc["profile"]["samples"], (o["samples"], doc["profile"]["samples"])
