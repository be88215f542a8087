"""record's exit status and signal behaviour; report on bad profiles: one line, no traceback."""

import json
import os
import shutil
import signal
import subprocess
import time

import pytest
from helpers import ROOT, fill_disk, numaprof_argv, run_numaprof

pytestmark = pytest.mark.e2e


def _one_clean_line(proc):
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("numaprof:"), lines[0]


def test_exit_status_is_the_programs(tmp_path):
    proc = run_numaprof("record", "-o", tmp_path / "p", "--", "sh", "-c", "exit 7")
    assert proc.returncode == 7, proc.stderr
    assert (tmp_path / "p" / "manifest.json").exists()
    assert "numaprof report" in proc.stderr


def test_stdout_left_alone(tmp_path):
    proc = run_numaprof("record", "-o", tmp_path / "p", "--", "echo", "hello stdout")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello stdout\n"


def test_missing_command_exits_127(tmp_path):
    proc = run_numaprof("record", "-o", tmp_path / "p", "--", "/nonexistent/program")
    assert proc.returncode == 127
    assert "not found" in proc.stderr
    _one_clean_line(proc)
    # was: an empty profile of a run that never happened, announced as "profile in"
    assert not (tmp_path / "p").exists()


def test_a_command_that_cannot_run_leaves_the_last_profile(tmp_path):
    """A typo in the command does not push the last profile aside for an empty one."""
    run_numaprof("record", "-o", tmp_path / "p", "--", "sh", "-c", "exit 4")
    before = (tmp_path / "p" / "manifest.json").read_text()
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    for cmd, status in (("/nonexistent/program", 127), (str(script), 126)):
        proc = run_numaprof("record", "-o", tmp_path / "p", "--", cmd)
        assert proc.returncode == status, (cmd, proc.stderr)
        _one_clean_line(proc)
        assert "previous profile is back" in proc.stderr, proc.stderr
        assert (tmp_path / "p" / "manifest.json").read_text() == before
        assert sorted(x.name for x in tmp_path.iterdir()) == ["not-executable", "p"]


def test_a_misspelt_option_is_not_run_as_the_command(tmp_path):
    # was: `-q` taken for the program, which exited 127 into a "complete" empty profile
    for argv in (["-q", "-o", tmp_path / "p", "--", "true"], ["--freqq", "4000", "true"]):
        proc = run_numaprof("record", *argv)
        assert proc.returncode == 2 and "No such option" in proc.stderr, proc.stderr
        assert not (tmp_path / "p").exists()
    # after the command, and after `--`, options are the program's
    proc = run_numaprof("record", "-o", tmp_path / "p", "--", "sh", "-c", "exit 3", "-q")
    assert proc.returncode == 3, proc.stderr


def test_killed_program_gives_128_plus_signal(tmp_path):
    proc = run_numaprof("record", "-o", tmp_path / "p", "--", "sh", "-c", "kill -SEGV $$")
    assert proc.returncode == 128 + signal.SIGSEGV
    doc = json.loads(run_numaprof("report", tmp_path / "p", "--format", "json",
                                  check=True).stdout)
    assert doc["profile"]["complete"] is False


def test_sigint_stops_program_and_leaves_incomplete_profile(tmp_path):
    out = tmp_path / "p"
    env = dict(os.environ)
    if "numaprof.cli.main" in " ".join(numaprof_argv()):
        env["PYTHONPATH"] = str(ROOT)
    # SIGINT at its default, as at a terminal: a caller that ignores it (a job started
    # with & by a non-interactive shell) passes that on, and then it is rightly ignored
    proc = subprocess.Popen([*numaprof_argv(), "record", "-o", str(out), "--", "sleep", "60"],
                            env=env, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for _ in range(100):  # wait until the program runs (the collector wrote its tables)
        if (out / "samples.time.col").exists():
            break
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, err
    doc = json.loads(run_numaprof("report", out, "--format", "json", check=True).stdout)
    assert doc["profile"]["complete"] is False
    assert "SIGINT" in (doc["profile"]["incomplete_reason"] or "")


@pytest.fixture(scope="module")
def good_profile(tmp_path_factory):
    base = tmp_path_factory.mktemp("good")
    run_numaprof("record", "-o", base / "p", "--", "sh", "-c", "i=0; while [ $i -lt 20000 ]; "
                 "do i=$((i+1)); done", check=True)
    return base / "p"


def test_report_missing_profile(tmp_path):
    proc = run_numaprof("report", tmp_path / "nothing-here")
    assert proc.returncode != 0
    _one_clean_line(proc)


def test_report_other_version(good_profile, tmp_path):
    bad = tmp_path / "v2"
    shutil.copytree(good_profile, bad)
    m = json.loads((bad / "manifest.json").read_text())
    m["version"] = 2
    (bad / "manifest.json").write_text(json.dumps(m))
    proc = run_numaprof("report", bad)
    assert proc.returncode != 0
    _one_clean_line(proc)
    assert "2" in proc.stderr and "1" in proc.stderr


def test_report_truncated_column(good_profile, tmp_path):
    bad = tmp_path / "trunc"
    shutil.copytree(good_profile, bad)
    with open(bad / "samples.time.col", "r+b") as f:
        f.truncate(5)
    proc = run_numaprof("report", bad)
    assert proc.returncode != 0
    _one_clean_line(proc)


def test_report_corrupted_magic(good_profile, tmp_path):
    bad = tmp_path / "magic"
    shutil.copytree(good_profile, bad)
    with open(bad / "samples.addr.col", "r+b") as f:
        f.write(b"GARBAGE!")
    proc = run_numaprof("report", bad)
    assert proc.returncode != 0
    _one_clean_line(proc)


def test_report_corrupted_manifest(good_profile, tmp_path):
    bad = tmp_path / "manifest"
    shutil.copytree(good_profile, bad)
    (bad / "manifest.json").write_text("{not json")
    proc = run_numaprof("report", bad)
    assert proc.returncode != 0
    _one_clean_line(proc)


def test_unknown_target(good_profile):
    proc = run_numaprof("suggest", good_profile, "--target", "no-such-machine")
    assert proc.returncode != 0
    _one_clean_line(proc)


def test_existing_non_profile_output_is_kept(tmp_path):
    precious = tmp_path / "mydir"
    precious.mkdir()
    (precious / "data.txt").write_text("keep me")
    proc = run_numaprof("record", "-o", precious, "--", "true")
    assert proc.returncode != 0
    _one_clean_line(proc)
    assert (precious / "data.txt").read_text() == "keep me"


def test_previous_profile_kept_as_old(tmp_path):
    run_numaprof("record", "--", "true", cwd=tmp_path, check=True)
    first = json.loads((tmp_path / "numaprof.data" / "manifest.json").read_text())
    run_numaprof("record", "--", "sh", "-c", "exit 3", cwd=tmp_path)
    old = json.loads((tmp_path / "numaprof.data.old" / "manifest.json").read_text())
    assert old["start_time"] == first["start_time"]
    proc = run_numaprof("report", "--format", "json", cwd=tmp_path, check=True)
    assert json.loads(proc.stdout)["profile"]["command"] == ["sh", "-c", "exit 3"]


def _tree(d):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_full_disk_keeps_the_previous_profile(small_disk, examples_built):
    """The disk fills up during record: one line, exit 125, no half-written profile, and
    the previous profile is back where it was, byte for byte."""
    prof = small_disk / "p.data"
    run_numaprof("record", "-o", prof, "--", "true", check=True)
    before = _tree(prof)
    # room for the empty tables (a block per column file), not for the run's samples
    # (10 kHz: well over 1 MiB of samples alone)
    fill_disk(small_disk, leave=768 << 10)
    proc = run_numaprof("record", "-o", prof, "--freq", "10000", "--",
                        examples_built / "serial_init", env={"OMP_NUM_THREADS": "2"})
    assert proc.returncode == 125, (proc.returncode, proc.stderr)
    _one_clean_line(proc)
    assert "No space left on device" in proc.stderr, proc.stderr
    assert "checksum" in proc.stdout  # the program itself ran to its end
    assert _tree(prof) == before
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "p.data"]


def test_switch_output_of_a_command_that_cannot_run(tmp_path):
    """A COMMAND recorded in slices is started by numaprof record: one that cannot be
    run gets a shell's 127, one line, and no profile."""
    proc = run_numaprof("record", "-o", tmp_path / "p.data", "--switch-output", "1", "--",
                        str(tmp_path / "missing"))
    assert proc.returncode == 127 and "cannot run" in proc.stderr, (proc.returncode, proc.stderr)
    _one_clean_line(proc)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("value, said", [("0.5", "at least 1 second"), ("often", "neither a number")])
def test_switch_output_takes_seconds_or_signal(tmp_path, value, said):
    proc = run_numaprof("record", "-o", tmp_path / "p.data", "-p", "1", "--switch-output", value)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())
