"""Backend selection on this machine, end to end through numaprof-collect and `numaprof
record`: a hardware backend asked for by name and unavailable fails with one line and
exit 125 (docs/backends.md); `auto` falls back to soft and says why in collector.json.  Where the
PMU exists, live tests (marked `pmu`) record a small program with it instead.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import run_numaprof

from numaprof import paths
from numaprof.errors import NumaprofError

PMU_DIR = Path("/sys/bus/event_source/devices")
HAS_PEBS = (PMU_DIR / "cpu" / "events" / "mem-loads").exists()
HAS_IBS = (PMU_DIR / "ibs_op").exists()


def collector() -> Path:
    try:
        return paths.collector()
    except NumaprofError as e:
        pytest.skip(f"numaprof-collect is not built yet: {e}")


def collect(tmp_path, *args):
    out = tmp_path / "prof"
    out.mkdir()
    proc = subprocess.run([str(collector()), *args, "-o", str(out), "--", "true"],
                          capture_output=True, text=True, timeout=120)
    return proc, out


@pytest.mark.parametrize("backend,present,words", [
    ("pebs", HAS_PEBS, ("PEBS",)),
    ("ibs", HAS_IBS, ("IBS", "ibs_op")),
])
def test_unavailable_backend_fails_with_one_line(tmp_path, backend, present, words):
    if present:
        pytest.skip(f"this machine has the {backend} PMU: see the live tests")
    proc, _ = collect(tmp_path, "--backend", backend)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 125, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert any(w in lines[0] for w in words), lines[0]
    # the reason names what is missing and a way out
    assert ("absent" in lines[0] or "perf_event_paranoid" in lines[0]
            or "refused" in lines[0] or "denied" in lines[0]), lines[0]


def test_auto_falls_back_to_soft_and_says_why(tmp_path):
    if HAS_PEBS or HAS_IBS:
        pytest.skip("this machine has a hardware PMU")
    proc, out = collect(tmp_path, "--backend", "auto")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "collector.json").read_text())
    assert meta["backend"] == "soft"
    reasons = meta["backend_reason"]
    assert "/sys/bus/event_source/devices/cpu is absent" in reasons["pebs"]
    assert "ibs_op is absent" in reasons["ibs"]


def test_record_with_unavailable_backend_is_one_line(tmp_path):
    if HAS_PEBS:
        pytest.skip("this machine has PEBS")
    collector()
    proc = run_numaprof("record", "--backend", "pebs", "-o", tmp_path / "p.data", "--", "true")
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("numaprof:"), proc.stderr
    assert "PEBS" in lines[0]


def _samples(out: Path, column: str, dtype: str):
    import numpy as np

    path = out / f"samples.{column}.col"
    if not path.exists():
        return None
    return np.fromfile(path, dtype=dtype, offset=16)


@pytest.mark.pmu
@pytest.mark.parametrize("backend,present", [("pebs", HAS_PEBS), ("ibs", HAS_IBS)])
def test_live_hardware_backend(tmp_path, backend, present):
    if not present:
        pytest.skip(f"no {backend} PMU here ({PMU_DIR} lacks "
                    f"{'cpu/events/mem-loads' if backend == 'pebs' else 'ibs_op'})")
    exe = collector()
    out = tmp_path / "prof"
    out.mkdir()
    # a memory-bound child: sum over a 64 MiB array several times
    prog = ("import array; a = array.array('d', bytes(64 << 20)); "
            "s = 0.0\nfor _ in range(3):\n    s += sum(a)\n")
    proc = subprocess.run([str(exe), "--backend", backend, "-o", str(out), "--",
                           "python3", "-c", prog], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ))
    if proc.returncode == 125:
        pytest.skip(f"{backend} present but not usable here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "collector.json").read_text())
    assert meta["backend"] == backend
    rules = _samples(out, "rule", "u1")
    assert rules is not None and len(rules) > 0
    assert (rules == 3).sum() > 0  # NMP_RULE_HW: the address came from the PMU
