"""A crafted profile is data: `suggest` on a profile whose archived binary's
DW_AT_producer asks gcc to run a command (-wrapper) compiles its patch check without it."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import run_numaprof

pytestmark = pytest.mark.e2e


def test_producer_cannot_make_suggest_run_a_command(examples_built, tmp_path):
    prof = tmp_path / "prof"
    run_numaprof("record", "-o", prof, "--freq", "2000", "--", examples_built / "serial_init",
                 "32", "30", env={"OMP_NUM_THREADS": "2"}, check=True)
    honest = json.loads(run_numaprof("suggest", prof, "--target", "2s", "--format", "json",
                                     check=True).stdout)
    checked = [o["fix"] for o in honest["objects"] if (o.get("fix") or {}).get("compiler")]
    if not checked:
        pytest.skip("no patch of this run was compile-checked (nothing to craft against)")
    # a short path: the command must fit in the producer string it replaces
    short = Path(tempfile.mkdtemp(prefix="np", dir="/tmp"))
    marker = short / "P"
    archive = json.loads((prof / "archive.json").read_text())
    crafted = 0
    for digest in archive["binaries"].values():
        copy = prof / "archive" / digest
        data = copy.read_bytes()
        for m in re.finditer(rb"GNU C[^\0]{40,}", data):
            # gcc runs cc1 as `sh -c '>MARKER;exec $0 $@' cc1 ARGS...`; the flags the
            # patch check needs (-fopenmp) stay
            cmd = f"-fopenmp -O2 -wrapper sh,-c,>{marker};exec${{IFS}}$0${{IFS}}$@ "
            new = (m.group()[:15] + cmd.encode()).ljust(len(m.group()), b" ")
            if len(new) == len(m.group()):
                data = data[:m.start()] + new + data[m.end():]
                crafted += 1
        copy.write_bytes(data)
    assert crafted, "no DW_AT_producer found to craft"
    doc = json.loads(run_numaprof("suggest", prof, "--target", "2s", "--format", "json",
                                  check=True).stdout)
    ran = marker.exists()
    shutil.rmtree(short)
    assert not ran, "suggest ran the command a profile's producer string named"
    assert [o["policy"] for o in doc["objects"]] == [o["policy"] for o in honest["objects"]]
