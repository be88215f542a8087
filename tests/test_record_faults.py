"""`numaprof record` under faults: what is never lost, what the program never sees.

* the output rotation never removes what numaprof did not write;
* setup failures are one line and exit 125;
* descriptors, signal dispositions and signals reach the program as in a plain run;
* a program that closes or dup2()s over numaprof's descriptors keeps being recorded;
* SIGKILL of the collector, of numaprof record or of the program leaves a readable
  profile, and the program is neither killed nor left orphaned without a word;
* a full disk at every write leaves the previous profile intact and nothing half-written;
* --redact-args keeps the arguments out of the profile;
* the allocation shim's own memory is never an object of the program.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, run_numaprof

from numaprof.analyzer.profile import read_table

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")]
PROGS = ROOT / "tests" / "progs"
BLOCK = 3 << 20  # tests/progs/fdabuse.c


@pytest.fixture(scope="module")
def progs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("progs")
    built = {}
    for name in ("fdabuse", "mallocbench"):
        exe = out / name
        r = subprocess.run(["gcc", "-O2", "-g", str(PROGS / f"{name}.c"), "-o", str(exe)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        built[name] = exe
    return built


@pytest.mark.parametrize("mode", ["close", "dup2"])
def test_a_program_that_closes_or_dup2s_over_every_descriptor(tmp_path, progs, mode):
    """Closing every descriptor >= 3, or dup2()ing a file of the program's onto every
    number, neither stops the recording nor sends records into the program's file."""
    user = tmp_path / "user.txt"
    user.write_text("precious\n")
    n = 1000  # 2000 shim records: beyond the chunks mapped when the run starts
    args = ["close", str(n)] if mode == "close" else ["dup2", str(user), str(n)]
    proc = run_numaprof("record", "-o", tmp_path / "p", "--", progs["fdabuse"], *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"done {n}\n"
    assert user.read_text() == "precious\n"
    sizes = read_table(tmp_path / "p", "objects")["size"]
    assert int((sizes == BLOCK).sum()) == n


def _report(profile: Path) -> dict:
    proc = run_numaprof("report", profile, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["profile"]


def test_the_shims_own_memory_is_never_an_object(tmp_path, progs):
    """malloc/free of 64 KiB blocks: the shim records each one, so its code and record
    buffers take many samples; none is an object, all are counted."""
    out = tmp_path / "p"
    proc = run_numaprof("record", "--freq", "4000", "-o", out, "--", progs["mallocbench"],
                        "65536", "400000")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(run_numaprof("report", out, "--format", "json", check=True).stdout)
    for o in doc["objects"]:
        where = f"{o['name']} {o.get('site', '')}"
        assert "shim." not in where and "libnumaprof_shim" not in where, o
    own = [f for f in doc["findings"] if "numaprof's own work" in f]
    assert own and int(own[0].split()[0]) > 0, doc["findings"]
