"""Unit tests of record's pieces that need no collector."""

import pytest

from numaprof.cli.recording import expand_output
from numaprof.errors import NumaprofError


def test_rank_expansion_from_each_launcher():
    assert expand_output("prof.%r", {"OMPI_COMM_WORLD_RANK": "3"}) == "prof.3"
    assert expand_output("prof.%r", {"PMI_RANK": "1"}) == "prof.1"
    assert expand_output("prof.%r", {"SLURM_PROCID": "7"}) == "prof.7"
    assert expand_output("p%%r", {}) == "p%r"


def test_rank_without_launcher_is_an_error():
    with pytest.raises(NumaprofError):
        expand_output("prof.%r", {})
    with pytest.raises(NumaprofError):
        expand_output("prof.%x", {})


def test_host_and_pid():
    out = expand_output("p.%h.%p", {})
    host, pid = out.split(".")[1:]
    assert host and pid.isdigit()


def test_redact_command_keeps_the_program_name():
    from numaprof.cli.recording import REDACTED, redact_command

    argv = ["numaprof", "record", "-o", "p", "--", "./app", "--password=x", "in.dat"]
    cmd, kept = redact_command(("./app", "--password=x", "in.dat"), argv)
    assert cmd == ["./app", REDACTED, REDACTED]
    assert kept == ["numaprof", "record", "-o", "p", "--", "./app", REDACTED, REDACTED]
    assert "--password=x" not in redact_command(("./app", "--password=x"), ["numaprof"])[1]


def test_a_collector_that_is_not_built_is_a_setup_failure(tmp_path, monkeypatch):
    """Exit 125 (numaprof could not start the recording), and no profile directory."""
    from pathlib import Path

    from numaprof import paths
    from numaprof.cli.recording import RecordConfig, run_record

    def not_built():
        raise NumaprofError("the numaprof collector is not built")

    monkeypatch.setattr(paths, "collector", not_built)
    cfg = RecordConfig(command=("true",), output=Path(tmp_path / "p"), output_given=True,
                       backend="auto", freq=None, alloc_threshold=65536, pid=None, duration=None)
    with pytest.raises(NumaprofError) as e:
        run_record(cfg, ["numaprof", "record", "true"])
    assert e.value.exit_code == 125 and "not built" in str(e.value)
    assert not (tmp_path / "p").exists()


def test_the_supervisor_outlives_a_child_another_thread_reaped(monkeypatch):
    """record's prefetch thread runs a helper while the supervisor reaps every child it
    sees exit (a subreaper adopts orphans): when the thread's waitpid takes the child
    between the supervisor's look and its own waitpid, the supervisor goes on (it ended
    record with 'No child processes' in the NUMA lab once)."""
    import os
    import time

    from numaprof.cli import supervise

    helper = os.fork()
    if helper == 0:
        os._exit(0)
    collector = os.fork()
    if collector == 0:
        time.sleep(0.3)
        os._exit(3)
    while os.waitid(os.P_PID, helper, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        time.sleep(0.01)  # the helper is a zombie: the supervisor's next look finds it
    real_waitpid = os.waitpid

    def thread_first(pid, options):
        if pid == helper:
            real_waitpid(pid, options)  # the prefetch thread's own wait came first
        return real_waitpid(pid, options)

    monkeypatch.setattr(os, "waitpid", thread_first)

    class Control:
        def program_pid(self):
            return None

    sup = supervise._Supervisor(collector, Control(), (), None)
    while sup.collector_rc is None:
        sup._reap()
        time.sleep(0.01)
    assert sup.collector_rc == 3
