"""Shared fixtures: how to run numaprof, the built examples, recorded example profiles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def numaprof_argv() -> list[str]:
    """The numaprof command: the installed entry point, else the module from this checkout."""
    exe = Path(sys.executable).parent / "numaprof"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "numaprof.cli.main"]


def run_numaprof(*args, cwd=None, env=None, timeout=600, check=False):
    e = dict(os.environ)
    if env:
        e.update(env)
    if "numaprof.cli.main" in " ".join(numaprof_argv()):
        e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    proc = subprocess.run([*numaprof_argv(), *map(str, args)], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"numaprof {' '.join(map(str, args))} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def examples_built() -> Path:
    subprocess.run(["make", "-s", "-C", str(EXAMPLES)], check=True)
    return EXAMPLES


class Recorded:
    """One example recorded once per session, with its report and 2-socket suggestion."""

    def __init__(self, base: Path, program: str, args: list[str]):
        self.dir = base / f"{program}.data"
        env = {"OMP_NUM_THREADS": "2"}
        self.record = run_numaprof("record", "-o", self.dir, "--", EXAMPLES / program, *args,
                                   env=env, check=True)
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
