"""Shared fixtures: the built examples, recorded example profiles."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import EXAMPLES, run_numaprof


@pytest.fixture(scope="session")
def examples_built() -> Path:
    subprocess.run(["make", "-s", "-C", str(EXAMPLES)], check=True)
    return EXAMPLES


class Recorded:
    """One example recorded once per session, with its report and 2-socket suggestion."""

    def __init__(self, base: Path, program: str, args: list[str]):
        self.dir = base / f"{program}.data"
        env = {"OMP_NUM_THREADS": "2"}
        # 4 kHz: a few hundred samples even on the cheap streamed arrays (idx), so the
        # statistical answers are decided on enough data
        self.record = run_numaprof("record", "-o", self.dir, "--freq", "4000", "--",
                                   EXAMPLES / program, *args, env=env, check=True)
        self.report = json.loads(run_numaprof("report", self.dir, "--format", "json",
                                              check=True).stdout)
        self.suggest = json.loads(run_numaprof("suggest", self.dir, "--target", "2s",
                                               "--format", "json", check=True).stdout)

    def obj(self, name: str) -> dict:
        found = [o for o in self.report["objects"] if o["name"] == name]
        names = [o["name"] for o in self.report["objects"]]
        assert found, f"object {name!r} not in the report; objects: {names}"
        return found[0]

    def policy(self, name: str) -> str:
        found = [o for o in self.suggest["objects"] if o["name"] == name]
        names = [o["name"] for o in self.suggest["objects"]]
        assert found, f"no suggestion for {name!r}; suggestions for: {names}"
        return found[0]["policy"]


@pytest.fixture(scope="session")
def recorded(examples_built, tmp_path_factory):
    base = tmp_path_factory.mktemp("examples")
    cache: dict[str, Recorded] = {}

    def get(program: str, *args: str) -> Recorded:
        if program not in cache:
            cache[program] = Recorded(base, program, list(args))
        return cache[program]

    return get


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (root only: mount(2) needs CAP_SYS_ADMIN)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.strip()[:200]}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)
