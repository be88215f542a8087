"""`numaprof record` works for an ordinary user at perf_event_paranoid=2 (SPEC §7)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, numaprof_argv

pytestmark = pytest.mark.e2e
USER = "numaprof-test"
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")


@pytest.fixture
def unprivileged_user():
    if os.geteuid() != 0:
        pytest.skip("needs root to create the unprivileged test account")
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", USER],
                       check=True)
    before = PARANOID.read_text().strip()
    subprocess.run(["sysctl", "-q", "kernel.perf_event_paranoid=2"], check=True)
    yield USER
    subprocess.run(["sysctl", "-q", f"kernel.perf_event_paranoid={before}"], check=True)


def test_record_as_ordinary_user(unprivileged_user, examples_built, tmp_path):
    argv = numaprof_argv()
    probe = subprocess.run(["runuser", "-u", unprivileged_user, "--", argv[0], "--version"],
                           capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    if probe.returncode != 0:
        pytest.fail(f"{argv[0]} cannot run as {unprivileged_user} (is the venv built on a "
                    f"world-readable interpreter? make setup uses /usr/bin/python3): "
                    f"{probe.stderr.strip()}")
    work = tmp_path / "user"
    work.mkdir()
    shutil.chown(work, unprivileged_user)
    tmp_path.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "OMP_NUM_THREADS": "2", "HOME": str(work),
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        ["runuser", "-u", unprivileged_user, "--", *argv, "record", "-o", str(work / "p"),
         "--", str(examples_built / "gather"), "16", "4"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((work / "p" / "manifest.json").read_text())
    assert manifest["backend"] == "soft"
    assert manifest["counts"]["samples"] > 100
    assert manifest["counts"]["with_address"] > 0.5 * manifest["counts"]["samples"]
    assert (work / "p").stat().st_mode & 0o777 == 0o700
    assert (work / "p" / "manifest.json").stat().st_mode & 0o777 == 0o600
