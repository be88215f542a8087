"""Lab tier: `numaprof lab` itself, end to end in a real guest.

One boot with the 8n-opteron preset checks together: the preset's matrix reaches the
guest, the exit status comes back, files written in the current directory stay, output
is streamed, the caller's environment is seen.  The timeout check kills a guest while
it boots (no boot is waited for).
"""

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab


@pytest.fixture(scope="session")
def opteron(tmp_path_factory, labkit):
    labkit.require_lab()
    work = tmp_path_factory.mktemp("lab8")
    script = ("numactl -H > numactl.txt; echo \"$LAB_MARKER\" > marker.txt; "
              "echo streamed-to-stdout; echo streamed-to-stderr >&2; exit 3")
    proc = labkit.run_lab(work, ["--preset", "8n-opteron", "--mem-per-node", "256M",
                                 "--timeout", str(labkit.LAB_TIMEOUT)],
                          ["sh", "-c", script], env={"LAB_MARKER": "seen-in-guest"})
    return work, proc


def test_exit_status_is_the_commands(opteron):
    _, proc = opteron
    assert proc.returncode == 3, proc.stderr[-3000:]


def test_output_is_passed_through(opteron):
    _, proc = opteron
    assert "streamed-to-stdout" in proc.stdout
    assert "streamed-to-stderr" in proc.stderr
    assert "streamed-to-stderr" not in proc.stdout


def test_files_written_in_cwd_are_kept_and_env_is_passed(opteron):
    work, _ = opteron
    assert (work / "marker.txt").read_text().strip() == "seen-in-guest"


def test_preset_matrix_reaches_the_guest(opteron, labkit):
    from numaprof.lab.topology import PRESETS

    work, _ = opteron
    nodes, cpus, matrix = labkit.parse_numactl_hardware((work / "numactl.txt").read_text())
    assert nodes == 8
    assert cpus == {k: [k] for k in range(8)}
    assert matrix == [list(r) for r in PRESETS["8n-opteron"]]


def _processes_in(directory: Path) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd") == str(directory):
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def test_timeout_kills_the_guest(tmp_path, labkit):
    labkit.require_lab()
    proc = labkit.run_lab(tmp_path, ["--nodes", "2", "--timeout", "5"], ["sleep", "600"],
                          timeout=60)
    assert proc.returncode == 124, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("numaprof: ") and "killed" in last, proc.stderr
    assert "Traceback" not in proc.stderr
    assert _processes_in(tmp_path) == [], "QEMU or vng still running after the timeout"


def test_inconsistent_topology_is_one_line(tmp_path, labkit):
    proc = labkit.run_lab(tmp_path, ["--nodes", "2", "--distance", "0,1=9"], ["true"],
                          timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert proc.stderr.startswith("numaprof: --distance 0,1=9")
