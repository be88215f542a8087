"""Lab tier: `suggest --verify` on the master-initialised example recorded on this host:
the patches are applied to a scratch copy, rebuilt, run in a 2-node guest, and every
placed array's pages by node come from the guest kernel, sampled in the guest or not.

The verdicts are checked against the numbers, not assumed: a parallel first-touch loop
over an 8 MiB array splits it at a transparent huge page when THP is on (one thread
faults the 2 MiB page that holds the middle), which the prediction does not model and
--verify rightly flags; numaprof_place's bind_block places it exactly either way."""

import json
import os
import re
import shutil
import subprocess

import pytest
from helpers import EXAMPLES, run_numaprof

pytestmark = pytest.mark.lab

BUILD = "gcc -O2 -g -fopenmp $CFLAGS -o serial_init serial_init.c"
KERNEL_SOURCES = ("numa_maps", "move_pages_at_free", "move_pages_at_exit")


@pytest.fixture(scope="module")
def verified(tmp_path_factory, labkit):
    labkit.require_lab()
    work = tmp_path_factory.mktemp("verify")
    shutil.copy(EXAMPLES / "serial_init.c", work / "serial_init.c")
    subprocess.run(["gcc", "-O2", "-g", "-fopenmp", "-o", "serial_init", "serial_init.c"],
                   cwd=work, check=True)
    run_numaprof("record", "--freq", "4000", "-o", "before.data", "--", "./serial_init", "8",
                 "300", cwd=work, env={"OMP_NUM_THREADS": "2"}, check=True)
    original = (work / "serial_init.c").read_text()
    proc = run_numaprof("suggest", "before.data", "--target", "2s", "--verify", "--build",
                        BUILD, "--format", "json", "--verify-timeout", str(labkit.LAB_TIMEOUT),
                        cwd=work, timeout=labkit.LAB_TIMEOUT + 120)
    return work, original, proc


def test_verify_measures_every_placed_array_in_the_guest(verified):
    work, original, proc = verified
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "numaprof.verify/1"
    checks = {o["name"]: o for o in doc["objects"]}
    assert {"a", "b", "c"} <= set(checks), checks
    for name in ("a", "b", "c"):
        o = checks[name]
        # the page map is the guest kernel's, for sampled and unsampled arrays alike
        assert o["lab_pages_source"] in KERNEL_SOURCES, o
        assert sum(o["lab_pages"]) >= 0.9 * sum(o["predicted_pages"]), o
        assert o["patch"].endswith("compile clean"), o
        pred, lab = o["predicted_pages"], o["lab_pages"]
        off = 0.5 * sum(abs(p / sum(pred) - m / sum(lab)) for p, m in zip(pred, lab, strict=True))
        assert (o["verdict"] == "disagrees") == (off > 0.10 or bool(o["why"])), o
        # part by part: the shim in the guest counted the pages per sixteenth, and the
        # host's accesses were replayed on that map
        assert o["lab_segments"] is not None and o["lab_map_local"] is not None, o
        if o["policy"] == "bind_block":
            assert o["verdict"] == "as predicted", o
            assert abs(o["lab_map_local"] - o["predicted_local"]) <= 0.15, o
    # the user's tree is untouched and the copy is gone
    assert (work / "serial_init.c").read_text() == original
    assert not (work / ".numaprof").exists()
    copy = re.search(r"copied \S+ to (\S+numaprof-verify-\S+)/tree", proc.stderr)
    assert copy, proc.stderr
    assert not os.path.exists(copy.group(1))
