"""The native `numaprof` launcher (collector/launcher/numaprof.c) starts the collector for
the ordinary `record` forms exactly as the CLI would start it, and hands everything else
to the CLI (numaprof-cli) unread."""

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from numaprof.cli.recording import _collector_argv, make_config, parse_args

LAUNCHER = Path(sys.executable).parent / "numaprof"
SHIM_SETTINGS = ("NUMAPROF_SMALL_SAMPLE", "NUMAPROF_SHORT_LIVED")


@pytest.fixture(scope="module", autouse=True)
def _installed():
    if not (Path(sys.executable).parent / "numaprof-cli").exists():
        pytest.skip("numaprof is not installed in this interpreter's environment")
    # installed by this tree's pyproject.toml: `numaprof` must then be the native launcher
    assert LAUNCHER.read_bytes()[:4] == b"\x7fELF", f"{LAUNCHER} is not the native launcher"


def _env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in (*SHIM_SETTINGS, "NUMAPROF_LAUNCHED", "NUMAPROF_LIBEXEC")}
    env["NUMAPROF_LAUNCHER_DRY_RUN"] = "1"
    return env


def _launcher(args: list[str]) -> list[str] | None:
    """What the launcher would run for `numaprof record ARGS`: the environment settings
    and the collector's argv (descriptors as FD); None when it leaves it to the CLI."""
    out = subprocess.run([str(LAUNCHER), "record", *args], env=_env(), capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    return None if lines == ["cli"] else lines


def _cli(args: list[str]) -> list[str] | None:
    """The same as the CLI reads it (cli/recording.py), None where it is not the fast path."""
    values = parse_args(args)
    if values is None:
        return None
    saved = {k: os.environ.pop(k, None) for k in SHIM_SETTINGS}
    try:
        cfg = make_config(**values)
        env = [f"env {k}={os.environ[k]}" for k in SHIM_SETTINGS if k in os.environ]
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v
    argv = _collector_argv(cfg)
    return [*env, argv[0], "--error-fd", "FD", "--control-fd", "FD", *argv[1:]]


ORDINARY = [
    ["./app"],
    ["./app", "-o", "x", "--freq", "5"],
    ["-o", "prof", "./app", "in.dat"],
    ["--output=prof/", "--", "./app"],
    ["-o", "./a//b/./c", "./app"],
    ["-o", "/tmp/%h.%%.data", "./app"],
    ["--freq", "4000", "--backend", "soft", "--", "./app", "--", "x"],
    ["--freq=100000", "--alloc-threshold", "1", "./app"],
    ["--small-sample", "0", "--short-lived=0", "--fault-period", "1", "./app"],
    ["--small-sample", "007", "--short-lived=9223372036854775807", "./app"],
    ["--redact-args", "-o", "p", "--", "--", "./app"],
    ["--backend=auto", "--freq", "0010", "./app"],
    ["--alloc-threshold", "18446744073709551615", "./app"],
]


@pytest.mark.parametrize("args", ORDINARY, ids=" ".join)
def test_ordinary_forms_start_the_collector_as_the_cli_would(args):
    cli = _cli(args)
    assert cli is not None
    assert _launcher(args) == cli


@pytest.mark.parametrize("args", [
    [], ["--"], ["--help"], ["-h", "./app"], ["-p", "12"], ["--switch-output", "1", "./app"],
    ["--freq", "9", "./app"], ["--freq", "4e3", "./app"], ["--freq", "١٢", "./app"],
    ["--backend", "x", "a"], ["--alloc-threshold", "0", "./app"], ["--output=", "a"],
    ["--redact-args=1", "a"], ["--bogus", "a"], ["-o", "--", "a"], ["-oprof", "a"],
    ["--alloc-threshold", "18446744073709551616", "./app"],  # past 64 bits: the CLI's to read
    ["-o", "p.%r", "./app"], ["-o", "p.%x", "./app"], ["-o", "//net/p", "./app"],
    ["-o", "/", "./app"], ["-o", "a/..", "./app"], ["-o", ".", "./app"],
], ids=lambda a: " ".join(a) or "(none)")
def test_anything_else_goes_to_the_cli(args):
    assert _launcher(args) is None


def test_other_commands_go_to_the_cli():
    for args in (["report"], ["-v", "suggest", "x"], ["--version"], ["recordx"], []):
        out = subprocess.run([str(LAUNCHER), *args], env=_env(), capture_output=True, text=True,
                             timeout=30)
        assert out.stdout.splitlines() == ["cli"], args


def test_random_argument_lists_agree_with_the_cli():
    """Wherever the launcher starts the collector, the CLI would start it alike; and it
    starts it wherever the CLI reads the ordinary form (none of these words is an -o it
    leaves to the CLI)."""
    words = ["-o", "p", "--output=q/", "--freq", "4000", "9", "10", "--freq=77", "--backend",
             "soft", "ibs", "bad", "--redact-args", "--", "./app", "-x", "--fault-period=17",
             "--alloc-threshold", "0", "1", "--small-sample", "--short-lived", "--help", "-",
             "-p", "5", "=", "--backend=pebs", "a b", "./d/", "%%", "-o=p"]
    rng = random.Random(20261202)
    fast = 0
    for _ in range(600):
        args = [rng.choice(words) for _ in range(rng.randint(0, 7))]
        cli, launched = _cli(args), _launcher(args)
        if launched is not None:
            fast += 1
            assert launched == cli, args
        else:
            assert cli is None, args
    assert fast > 60  # the comparison was made often enough to mean something


def test_a_stale_launch_variable_is_not_taken_for_a_collector(tmp_path):
    """NUMAPROF_LAUNCHED is the launcher's word to the CLI only: one in the caller's
    environment is dropped, whatever the command."""
    env = {k: v for k, v in _env().items() if k != "NUMAPROF_LAUNCHER_DRY_RUN"}
    env["NUMAPROF_LAUNCHED"] = "1:0:2"
    out = subprocess.run([str(LAUNCHER), "report", str(tmp_path / "none")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "internal error" not in out.stderr, out.stderr
    out = subprocess.run([str(LAUNCHER), "record", "-p", "1", "--duration", "x"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "internal error" not in out.stderr, out.stderr


def test_pid_in_the_output_is_the_recording_process(tmp_path):
    """-o prof.%p names the pid of `numaprof record`, which the CLI keeps after the exec."""
    out = subprocess.run([str(LAUNCHER), "record", "-o", "prof.%p", "--", "true"],
                         env={k: v for k, v in _env().items() if k != "NUMAPROF_LAUNCHER_DRY_RUN"},
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    (made,) = [p.name for p in tmp_path.iterdir()]
    assert re.fullmatch(r"prof\.\d+", made)
    assert f"profile in {made}/" in out.stderr


def test_a_launched_recording_is_whole(tmp_path):
    """Through the launcher: the manifest of the CLI, complete, without the launcher's
    variable; the program's status and output as in a plain run."""
    env = {k: v for k, v in _env().items() if k != "NUMAPROF_LAUNCHER_DRY_RUN"}
    env["NUMAPROF_SHORT_LIVED"] = "5"
    out = subprocess.run([str(LAUNCHER), "record", "-o", "p", "--small-sample", "4096", "--",
                          "sh", "-c", "echo $NUMAPROF_SMALL_SAMPLE; exit 3"],
                         env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 3, out.stderr
    assert out.stdout == "4096\n"
    doc = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert doc["complete"] is True and doc["exit_status"] == 3
    assert doc["command"] == ["sh", "-c", "echo $NUMAPROF_SMALL_SAMPLE; exit 3"]
    assert "NUMAPROF_LAUNCHED" not in doc["env"]
    assert doc["env"]["NUMAPROF_SMALL_SAMPLE"] == "4096"
    assert doc["sampling"]["small_sample"] == 4096 and doc["sampling"]["short_lived"] == 5
