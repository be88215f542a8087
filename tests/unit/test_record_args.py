"""record's arguments read without click (cli/recording.parse_args) must be read as the click
command reads them, and the ordinary forms must take that way."""

import os
import random
import subprocess
import sys

import pytest

from numaprof.cli import record
from numaprof.cli.recording import make_config, parse_args

SHIM_SETTINGS = ("NUMAPROF_SMALL_SAMPLE", "NUMAPROF_SHORT_LIVED")


def _config(values: dict):
    """The RecordConfig and the shim's settings in the environment that `values` make."""
    saved = {k: os.environ.pop(k, None) for k in SHIM_SETTINGS}
    try:
        cfg = make_config(**values)
        return cfg, {k: os.environ.get(k) for k in SHIM_SETTINGS}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _click_values(args: list[str]) -> dict:
    """What the click command makes of `args`, as make_config's keywords."""
    params = dict(record.command.make_context("record", list(args)).params)
    assert params.pop("switch_output") is None
    command = params.pop("command")
    if command[:1] == ("--",):  # as the command's body does
        command = command[1:]
    return {"command": command, **params}


ORDINARY = [
    ["./app"],
    ["./app", "-o", "x", "--freq", "5"],  # the program's own options
    ["-o", "prof", "./app", "in.dat"],
    ["--output=prof", "--", "./app"],
    ["--freq", "4000", "--backend", "soft", "--", "./app", "--", "x"],
    ["--freq=100000", "--alloc-threshold", "1", "./app"],
    ["--small-sample", "0", "--short-lived=0", "--fault-period", "1", "./app"],
    ["--redact-args", "-o", "p.%p", "--", "--", "./app"],
    ["--backend=auto", "--freq", "0010", "./app"],
]


@pytest.mark.parametrize("args", ORDINARY, ids=" ".join)
def test_ordinary_forms_are_read_as_click_reads_them(args):
    values = parse_args(args)
    assert values is not None
    assert _config(values) == _config(_click_values(args))


@pytest.mark.parametrize("args", [
    [], ["--"], ["--help"], ["-h", "./app"], ["-p", "12"], ["--pid=3", "--duration", "1"],
    ["--switch-output", "1", "./app"], ["--freq", "9", "./app"], ["--freq", "100001", "./app"],
    ["--freq", "4e3", "./app"], ["--freq", "١٢", "./app"], ["--freq"], ["--backend", "x", "a"],
    ["--alloc-threshold", "0", "./app"], ["--fault-period=0", "./app"], ["--output=", "a"],
    ["--redact-args=1", "a"], ["--bogus", "a"], ["-o", "--", "a"], ["-oprof", "a"],
], ids=lambda a: " ".join(a) or "(none)")
def test_anything_else_is_left_to_click(args):
    assert parse_args(args) is None


def test_random_argument_lists_agree_with_click():
    """Wherever the fast reading accepts a list, click accepts it too and means the same."""
    words = ["-o", "p", "--output=q", "--freq", "4000", "9", "10", "--freq=77", "--backend",
             "soft", "ibs", "bad", "--redact-args", "--", "./app", "-x", "--fault-period=17",
             "--alloc-threshold", "0", "1", "--small-sample", "--short-lived", "--help", "-",
             "-p", "5", "=", "--backend=pebs", "a b"]
    rng = random.Random(20261201)
    accepted = 0
    for _ in range(3000):
        args = [rng.choice(words) for _ in range(rng.randint(0, 7))]
        values = parse_args(args)
        if values is None:
            continue
        accepted += 1
        assert _config(values) == _config(_click_values(args)), args
    assert accepted > 300  # the comparison was made often enough to mean something


def test_record_does_not_import_click(tmp_path):
    """The ordinary form runs without the click group and the analysis modules."""
    code = (
        "import sys\n"
        "from numaprof.cli import main\n"
        "try:\n"
        f"    main.main(['record', '-o', {str(tmp_path / 'p')!r}, '--', 'true'])\n"
        "except SystemExit as e:\n"
        "    loaded = [m for m in ('click', 'numpy', 'dataclasses', 'numaprof.cli.group')\n"
        "              if m in sys.modules]\n"
        "    print(e.code, loaded)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.stdout.strip() == "0 []", out.stdout + out.stderr
    assert (tmp_path / "p" / "manifest.json").is_file()
