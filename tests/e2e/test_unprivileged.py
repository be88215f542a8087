"""`numaprof record` works for an ordinary user at perf_event_paranoid=2 (docs/faq.md)."""

import json
import os
import shutil
import subprocess
import tempfile
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


@pytest.fixture
def world_readable_dir():
    # pytest's tmp_path lives under a 0700 directory of root's: not reachable by the user
    d = Path(tempfile.mkdtemp(prefix="numaprof-user-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_record_as_ordinary_user(unprivileged_user, examples_built, world_readable_dir):
    argv = numaprof_argv()
    from_checkout = "numaprof.cli.main" in " ".join(argv)
    extra = {"PYTHONPATH": str(ROOT)} if from_checkout else {}
    probe = subprocess.run(["runuser", "-u", unprivileged_user, "--", *argv, "--version"],
                           capture_output=True, text=True, env={**os.environ, **extra})
    if probe.returncode != 0:
        pytest.fail(f"{argv[0]} cannot run as {unprivileged_user} (is the venv built on a "
                    f"world-readable interpreter? make setup uses /usr/bin/python3): "
                    f"{probe.stderr.strip()}")
    work = world_readable_dir / "user"
    work.mkdir()
    shutil.chown(work, unprivileged_user)
    env = {"PATH": os.environ["PATH"], "OMP_NUM_THREADS": "2", "HOME": str(work), **extra}
    proc = subprocess.run(
        ["runuser", "-u", unprivileged_user, "--", *argv, "record", "-o", str(work / "p"),
         "--", str(examples_built / "gather"), "32", "12"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((work / "p" / "manifest.json").read_text())
    assert manifest["backend"] == "soft"
    assert manifest["counts"]["samples"] > 100
    assert manifest["counts"]["with_address"] > 0.5 * manifest["counts"]["samples"]
    assert (work / "p").stat().st_mode & 0o777 == 0o700
    assert (work / "p" / "manifest.json").stat().st_mode & 0o777 == 0o600
