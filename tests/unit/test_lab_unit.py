"""Unit tests of `numaprof lab` without a guest: topology building and validation, presets,
the vng command line, the guest script, and the missing-tool messages."""

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numaprof.cli.lab import lab_config
from numaprof.errors import NumaprofError, UsageError
from numaprof.lab import runner
from numaprof.lab.topology import PRESETS, build_topology, parse_size
from numaprof.recommender.targets import OPTERON_TABLE4


def _valid_slit(m):
    n = len(m)
    return all(m[i][i] == 10 for i in range(n)) and all(
        10 < m[i][j] <= 254 for i in range(n) for j in range(n) if i != j)


# ---- topology -----------------------------------------------------------------------

def test_defaults_two_nodes_remote_20():
    t = build_topology()
    assert (t.nodes, t.cpus_per_node, t.mem_per_node) == (2, 1, 512 << 20)
    assert t.distances == ((10, 20), (20, 10))


def test_distance_sets_both_directions_unless_both_given():
    t = build_topology(nodes=3, distances=["0,1=15", "2,0=30"])
    assert t.distances == ((10, 15, 30), (15, 10, 20), (30, 20, 10))
    a = build_topology(nodes=2, distances=["0,1=12", "1,0=14"])
    assert a.distances == ((10, 12), (14, 10))
    assert not a.is_symmetric()


def test_distance_overrides_a_preset_entry():
    t = build_topology(preset="4s", distances=["1,3=31"])
    assert t.distances[1][3] == t.distances[3][1] == 31
    assert t.distances[0][1] == 21


@pytest.mark.parametrize("kwargs, words", [
    (dict(nodes=2, distances=["0,1=10"]), "between 11 and 254"),
    (dict(nodes=2, distances=["0,1=255"]), "between 11 and 254"),
    (dict(nodes=2, distances=["0,0=12"]), "to itself must be 10"),
    (dict(nodes=2, distances=["0,2=20"]), "node 2 does not exist"),
    (dict(nodes=2, distances=["0,1=20", "0,1=21"]), "given twice"),
    (dict(nodes=2, distances=["0-1=20"]), "the form is I,J=D"),
    (dict(nodes=0), "between 1 and 16"),
    (dict(nodes=17), "between 1 and 16"),
    (dict(nodes=1, distances=["0,0=10"]), "single node"),
    (dict(preset="4s", nodes=2), "has 4 nodes"),
    (dict(preset="16s"), "unknown preset"),
    (dict(cpus_per_node=0), "at least 1"),
    (dict(nodes=16, cpus_per_node=5), "at most 64"),
    (dict(mem_per_node="128M"), "at least 256M"),
    (dict(mem_per_node="lots"), "cannot read size"),
])
def test_inconsistent_topologies_are_refused(kwargs, words):
    with pytest.raises(UsageError) as e:
        build_topology(**kwargs)
    assert words in str(e.value)
    assert "\n" not in str(e.value)
    assert e.value.exit_code == 2


def test_sizes():
    assert parse_size("512M") == 512 << 20
    assert parse_size("1G") == parse_size("1GiB") == parse_size("1024") == 1 << 30


def test_presets_are_valid_slit_matrices():
    sizes = {"2s": 2, "4s": 4, "8n-opteron": 8, "itanium2": 4, "2s-snc4": 8, "2s-nps4": 8, "4s-snc4": 16}
    for name, m in PRESETS.items():
        assert len(m) == sizes[name] and all(len(r) == len(m) for r in m)
        assert _valid_slit(m), name
        t = build_topology(preset=name)
        assert t.nodes == sizes[name] and t.distances == m
    assert PRESETS["2s"] == ((10, 21), (21, 10))


def test_opteron_preset_is_table4_times_ten():
    """Pousa Ribeiro et al. 2010, Table 4 x 10, rounded half up; the two factors that round to 10 become 11."""
    m = PRESETS["8n-opteron"]
    for i in range(8):
        for j in range(8):
            if i == j:
                continue
            want = int(OPTERON_TABLE4[i][j] * 10 + 0.5)
            assert m[i][j] == max(want, 11), (i, j)
    assert m[0][1] == 16  # 1.55, the largest factor
    assert m[3][6] == m[6][7] == 11  # 1.0337 and 1.024
    assert all(m[i][j] == m[j][i] for i in range(8) for j in range(8))


def test_itanium2_factors_between_2_and_2_5():
    m = PRESETS["itanium2"]
    remote = {m[i][j] for i in range(4) for j in range(4) if i != j}
    assert min(remote) == 20 and max(remote) == 25


# ---- vng command line -----------------------------------------------------------------

def _tools(tmp_path):
    return runner.LabTools(vng=tmp_path / "vng", qemu=tmp_path / "qemu",
                           kernel=Path("/boot/vmlinuz-6.1.0-test"))


def test_vng_command_line(tmp_path):
    topo = build_topology(nodes=2, cpus_per_node=2, mem_per_node="1G",
                          distances=["0,1=12", "1,0=14"])
    argv = runner.build_vng_command(_tools(tmp_path), topo, Path("/work/x"),
                                    Path("/tmp/state"), Path("/tmp/state/run.sh"))
    assert argv[:4] == [str(tmp_path / "vng"), "--disable-kvm", "--run",
                        "/boot/vmlinuz-6.1.0-test"]
    joined = " ".join(argv)
    assert "--cpus 4 -m 2048M" in joined
    assert "--numa 1024M,cpus=0-1 --numa 1024M,cpus=2-3" in joined
    assert "--numa-distance 0,1=12 --numa-distance 1,0=14" in joined
    assert "--rwdir /work/x --rwdir /tmp/state --cwd /work/x" in joined
    assert "--qemu-opts=-cpu max,avx=off,avx2=off" in joined
    assert "--append numa_balancing=disable" in joined
    on = runner.build_vng_command(_tools(tmp_path), topo, Path("/w"), Path("/s"),
                                  Path("/s/run.sh"), numa_balancing=True)
    assert "numa_balancing=enable" in on
    assert "transparent_hugepage" not in joined
    thp = runner.build_vng_command(_tools(tmp_path), topo, Path("/w"), Path("/s"),
                                   Path("/s/run.sh"), thp="madvise")
    assert " ".join(thp).count("--append") == 2 and "--append transparent_hugepage=madvise" in " ".join(thp)
    assert argv[-2:] == ["--exec", "/bin/sh /tmp/state/run.sh"]


def test_every_ordered_pair_is_passed():
    args = runner.vng_topology_args(build_topology(preset="8n-opteron"))
    dists = [args[k + 1] for k, a in enumerate(args) if a == "--numa-distance"]
    assert len(dists) == 8 * 7
    assert "6,7=11" in dists and "7,6=11" in dists
    assert args.count("--numa") == 8 and "256M" not in " ".join(args)


def test_single_node_has_no_distances():
    args = runner.vng_topology_args(build_topology(nodes=1, cpus_per_node=2))
    assert args == ["--cpus", "2", "-m", "512M", "--numa", "512M,cpus=0-1"]


def test_guest_script_runs_in_cwd_and_records_status(tmp_path):
    env = runner.guest_environment({"PATH": "/opt/bin", "OMP_NUM_THREADS": "2",
                                    "PWD": "/x", "SSH_AUTH_SOCK": "/s", "WEIRD-NAME": "1",
                                    "QUOTED": "a 'b' $c", "OPENBLAS_CORETYPE": "Haswell"})
    assert env["PATH"].startswith("/opt/bin:") and env["PATH"].endswith(":/bin")
    assert "PWD" not in env and "SSH_AUTH_SOCK" not in env and "WEIRD-NAME" not in env
    assert "OPENBLAS_CORETYPE" not in env and env["OMP_NUM_THREADS"] == "2"
    status = tmp_path / "status"
    script = runner.guest_script(("sh", "-c", "echo \"$QUOTED\" > out; exit 5"), tmp_path,
                                 status, env)
    (tmp_path / "run.sh").write_text(script)
    proc = subprocess.run(["/bin/sh", str(tmp_path / "run.sh")], cwd="/",
                          env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 5
    assert status.read_text().strip() == "5"
    assert (tmp_path / "out").read_text() == "a 'b' $c\n"


def test_the_guest_finds_the_numaprof_that_runs_the_lab_without_an_active_venv(tmp_path):
    """`numaprof lab -- numaprof record ...` failed in the guest with 'numaprof: not found'
    when the venv was not activated: the lab puts its own numaprof's directory on PATH."""
    bindir = runner.numaprof_bin_dir()
    assert bindir is not None and (bindir / "numaprof").is_file()
    env = runner.guest_environment({"PATH": "/usr/bin:/bin"}, numaprof_bin=bindir)
    status = tmp_path / "status"
    script = runner.guest_script(("sh", "-c", "command -v numaprof > out"), tmp_path, status,
                                 env)
    (tmp_path / "run.sh").write_text(script)
    proc = subprocess.run(["/bin/sh", str(tmp_path / "run.sh")], cwd="/",
                          env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0
    assert (tmp_path / "out").read_text().strip() == str(bindir / "numaprof")


def test_command_not_found_is_127(tmp_path):
    status = tmp_path / "status"
    script = runner.guest_script(("no-such-command-here",), tmp_path, status,
                                 {"PATH": "/usr/bin:/bin"})
    (tmp_path / "run.sh").write_text(script)
    subprocess.run(["/bin/sh", str(tmp_path / "run.sh")], capture_output=True)
    assert status.read_text().strip() == "127"


@pytest.mark.parametrize("path", ["/", "/tmp/a b", "/tmp/a=b", "/tmp/a,b"])
def test_unshareable_directories(path):
    with pytest.raises(UsageError):
        runner.check_shareable(Path(path))


def test_cli_config(tmp_path):
    cfg = lab_config(None, 2, "512M", ("0,1=12",), "4s", 60.0, None, ("./app", "-x"),
                     tmp_path)
    assert cfg.topology.nodes == 4 and cfg.topology.total_cpus == 8
    assert cfg.command == ("./app", "-x") and cfg.timeout == 60.0 and cfg.cwd == tmp_path
    with pytest.raises(UsageError, match="no command"):
        lab_config(None, 1, "512M", (), None, None, None, (), tmp_path)
    with pytest.raises(UsageError, match="positive"):
        lab_config(None, 1, "512M", (), None, 0.0, None, ("true",), tmp_path)


# ---- missing tools ----------------------------------------------------------------------

def test_missing_qemu_names_the_package(monkeypatch):
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)
    with pytest.raises(NumaprofError) as e:
        runner.find_qemu()
    assert "qemu-system-x86" in str(e.value) and "make setup" in str(e.value)


def test_missing_vng_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)
    monkeypatch.setattr(runner.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(NumaprofError) as e:
        runner.find_vng()
    assert "virtme-ng==1.42" in str(e.value) and "make setup" in str(e.value)


def test_missing_kernel_names_the_package(monkeypatch, tmp_path):
    monkeypatch.delenv("NUMAPROF_LAB_KERNEL", raising=False)
    with pytest.raises(NumaprofError) as e:
        runner.find_kernel(boot=tmp_path)
    assert "linux-image-amd64" in str(e.value) and "make setup" in str(e.value)


def test_newest_kernel_is_chosen(monkeypatch, tmp_path):
    monkeypatch.delenv("NUMAPROF_LAB_KERNEL", raising=False)
    for v in ("6.1.0-9-amd64", "6.1.0-56-amd64", "6.1.0-10-amd64"):
        (tmp_path / f"vmlinuz-{v}").write_text("")
    monkeypatch.setattr(runner.Path, "is_dir", lambda self: True)
    assert runner.find_kernel(boot=tmp_path).name == "vmlinuz-6.1.0-56-amd64"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_unreadable_kernel(tmp_path):
    k = tmp_path / "vmlinuz-x"
    k.write_text("")
    k.chmod(0)
    with pytest.raises(NumaprofError, match="not readable"):
        runner.find_kernel(k)


def test_static_busybox_detection(tmp_path):
    assert not runner._is_static_elf(Path(sys.executable).resolve())  # dynamic
    notelf = tmp_path / "x"
    notelf.write_text("#!/bin/sh\n")
    notelf.chmod(stat.S_IRWXU)
    assert not runner._is_static_elf(notelf)


def test_presets_agree_with_suggest_targets():
    """The lab boots the machines `suggest --target` evaluates for (SLIT-rounded)."""
    from numaprof.recommender.targets import PRESETS as TARGETS

    assert set(TARGETS) == set(PRESETS)
    for name, target in TARGETS.items():
        m = PRESETS[name]
        for i, row in enumerate(target.distances):
            for j, d in enumerate(row):
                assert m[i][j] == (10 if i == j else max(11, int(d + 0.5 + 1e-9))), (name, i, j)


def test_every_preset_is_named_in_the_help_texts():
    """The CLI lists the presets by name without importing them (start-up cost); this keeps
    those lists complete."""
    from click.testing import CliRunner

    from numaprof.cli.main import group as cli
    from numaprof.recommender.targets import PRESETS as TARGETS

    for argv in (["lab", "-h"], ["suggest", "-h"], ["report", "-h"], ["topology", "-h"]):
        out = " ".join(CliRunner().invoke(cli, argv).output.split())
        for name in TARGETS:
            assert name in out, (argv, name)


def test_guest_script_runs_every_check_and_stops_a_stuck_one(tmp_path):
    """tests/labkit.py's group script: each check's output and status; a check still
    running after the watchdog's time is killed with what its processes were doing in
    <name>.hang, its status 124, and the next check runs."""
    import labkit

    script = labkit.guest_script([("first", "echo one; exit 3"),
                                  ("stuck", "sleep 30 & sleep 31; echo never"),
                                  ("last", 'echo "$NUMAPROF" | grep -c numaprof')], timeout=2)
    (tmp_path / "checks.sh").write_text(script)
    subprocess.run(["sh", "checks.sh"], cwd=tmp_path, check=True, timeout=60)
    read = lambda name, ext: (tmp_path / f"{name}.{ext}").read_text()  # noqa: E731
    assert (read("first", "rc"), read("first", "out")) == ("3\n", "one\n")
    assert read("stuck", "rc") == "124\n" and read("stuck", "out") == ""
    assert "still running after 2 s" in read("stuck", "hang") and "sleep 31" in read("stuck", "hang")
    assert (read("last", "rc"), read("last", "out")) == ("0\n", "1\n")
    # nothing of the stuck check is left running
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 30" not in ps.split("\n") and "sleep 31" not in ps.split("\n")


def _fake_lab(tmp_path, monkeypatch, script: str):
    """labkit's `numaprof lab` replaced by a shell script standing for the guest."""
    import labkit

    monkeypatch.setattr(labkit, "numaprof_argv", lambda: ["sh", "-c", script, "lab"])
    (tmp_path / "checks.sh").write_text("")
    return labkit


def _ends(pid: int, within: float = 5.0) -> bool:
    """Whether process ``pid`` is gone within ``within`` seconds (a kill is asynchronous:
    give it its moment)."""
    for _ in range(int(within / 0.1)):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_guest_that_never_starts_is_killed_with_its_processes(tmp_path, monkeypatch):
    """The labkit watchdog: a guest whose script never starts (a stalled TCG boot) is
    killed, with everything it started, once the boot deadline has passed."""
    kit = _fake_lab(tmp_path, monkeypatch, "sleep 600 & echo $! > child; wait")
    proc, why = kit.run_watched(tmp_path, [], boot_deadline=1, stall_deadline=60, poll=0.2)
    assert proc is None and "no check started" in why
    child = int((tmp_path / "child").read_text())
    if not _ends(child):
        pytest.fail(f"the guest's child {child} survived the kill")


def test_a_stalled_guest_in_a_session_of_its_own_is_stopped_too(tmp_path, monkeypatch):
    """numaprof lab runs its guest (vng, QEMU) in a session of its own and kills it when
    it is terminated (lab/runner.py): the watchdog terminates numaprof lab before it kills
    it, so that no QEMU outlives a stalled guest (SIGKILL alone left one running)."""
    kit = _fake_lab(tmp_path, monkeypatch,
                    "setsid sleep 600 & g=$!; echo $g > child; trap 'kill $g; exit 143' TERM; "
                    ": > started; echo 0 > a.rc; wait")
    proc, why = kit.run_watched(tmp_path, [], boot_deadline=60, stall_deadline=1, poll=0.2)
    assert proc is None and "no check ended" in why
    child = int((tmp_path / "child").read_text())
    if not _ends(child):
        os.kill(child, 9)
        pytest.fail(f"the guest {child} in its own session survived the watchdog")


def test_a_guest_whose_checks_stop_ending_is_killed(tmp_path, monkeypatch):
    kit = _fake_lab(tmp_path, monkeypatch, ": > started; echo 0 > a.rc; sleep 600")
    proc, why = kit.run_watched(tmp_path, [], boot_deadline=60, stall_deadline=1, poll=0.2)
    assert proc is None and "no check ended" in why


def test_a_stalled_guest_says_where_it_was(tmp_path, monkeypatch):
    """The stall's reason names the checks of the group that ended and the one that did
    not, with the guest's last lines: what the next stall in CI is diagnosed from."""
    kit = _fake_lab(tmp_path, monkeypatch, ": > started; echo 0 > a.rc; : > a.cmd; : > b.cmd; "
                    "echo booted; echo 'b: working' >&2; sleep 600")
    (tmp_path / "old.rc").write_text("0\n")  # another group's check in the same directory
    proc, why = kit.run_watched(tmp_path, [], boot_deadline=60, stall_deadline=1, poll=0.2,
                                names=["a", "b", "c"])
    assert proc is None and "no check ended" in why
    assert "ended: a; not ended: b;" in why and "old" not in why and "; no heartbeat;" in why
    assert why.endswith("booted\nb: working"), why


def test_a_stalled_guests_heartbeat_says_whether_it_still_ran(tmp_path, monkeypatch):
    kit = _fake_lab(tmp_path, monkeypatch, ": > started; echo 0 > a.rc; : > heartbeat; sleep 600")
    proc, why = kit.run_watched(tmp_path, [], boot_deadline=60, stall_deadline=1, poll=0.2, names=["a"])
    assert proc is None and re.search(r"; the guest's heartbeat [0-9]+ s old", why), why


def _stalling_group(tmp_path, monkeypatch, beat: str):
    """labkit.run_group of one check with a guest that stalls after it, `beat` its
    heartbeat; the number of boots it made."""
    kit = _fake_lab(tmp_path, monkeypatch, f"echo boot >> boots; : > started; {beat} sleep 600")
    watched = getattr(kit, "_unpatched_run_watched", kit.run_watched)  # a second call
    monkeypatch.setattr(kit, "_unpatched_run_watched", watched, raising=False)
    monkeypatch.setattr(kit, "require_lab", lambda: None)
    monkeypatch.setattr(kit, "run_watched", lambda workdir, lab_args, names=(): watched(
        workdir, lab_args, boot_deadline=60, stall_deadline=1, poll=0.2, names=names))
    with pytest.raises(pytest.fail.Exception) as e:
        kit.run_group(tmp_path, [], [("a", "true")])
    return (tmp_path / "boots").read_text().count("boot"), str(e.value)


def test_a_stalled_guest_is_booted_again_but_a_live_one_is_not(tmp_path, monkeypatch):
    """A guest whose heartbeat stopped (TCG made no progress) is booted again, up to
    STALL_ATTEMPTS times; one whose heartbeat goes on has a check stuck past its own
    watchdog, which another boot would not mend: the group fails at once."""
    import labkit

    monkeypatch.setattr(labkit, "HEARTBEAT_ALIVE", 0.5)  # the stalls come after 1 s here
    (tmp_path / "dead").mkdir()
    boots, why = _stalling_group(tmp_path / "dead", monkeypatch, ": > heartbeat;")
    assert boots == labkit.STALL_ATTEMPTS and "stalled 3 times" in why, why
    live = "(while :; do : > heartbeat; sleep 0.2; done) & trap 'kill $!' EXIT;"
    (tmp_path / "live").mkdir()
    boots, why = _stalling_group(tmp_path / "live", monkeypatch, live)
    assert boots == 1 and "a check is stuck in a live guest" in why, why


def test_a_guest_that_ends_is_returned(tmp_path, monkeypatch):
    kit = _fake_lab(tmp_path, monkeypatch, ": > started; echo 0 > a.rc; echo done")
    proc, why = kit.run_watched(tmp_path, [], boot_deadline=5, stall_deadline=5, poll=0.2)
    assert why is None and proc.returncode == 0 and proc.stdout == "done\n"


# ---- a guest that stops before the command starts -------------------------------------

FAKE_VNG = """#!/bin/sh
# stands for vng: boots number 1..FAIL_BOOTS abort as QEMU did in CI (status 255, before
# the guest runs anything); later ones run the guest script (the last argument) and, with
# LOSE_STATUS, lose its status as a guest dying after the command would
n=$(cat "$BOOTS" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$BOOTS"
for last; do :; done
if [ "$n" -le "$FAIL_BOOTS" ]; then
  echo "qemu-system-x86_64: ../../hw/pci/msix.c:218: msix_table_mmio_write: Assertion failed." >&2
  exit 255
fi
$last
if [ -n "$LOSE_STATUS" ]; then rm -f "$(dirname "${last#/bin/sh }")/status"; exit 255; fi
exit 0
"""


def _fake_vng_lab(tmp_path, monkeypatch, fail_boots, lose_status=False):
    vng = tmp_path / "vng"
    vng.write_text(FAKE_VNG)
    vng.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("BOOTS", str(tmp_path / "boots"))
    monkeypatch.setenv("FAIL_BOOTS", str(fail_boots))
    if lose_status:
        monkeypatch.setenv("LOSE_STATUS", "1")
    config = runner.LabConfig(topology=build_topology(nodes=2, cpus_per_node=1),
                              command=("sh", "-c", "echo ran >> runs; exit 7"), cwd=work,
                              timeout=600.0)
    tools = runner.LabTools(vng=vng, qemu=tmp_path / "qemu", kernel=Path("/boot/vmlinuz-test"))
    return config, tools, work


def test_a_guest_that_stops_before_the_command_is_booted_again(tmp_path, monkeypatch, capsys):
    """QEMU under TCG sometimes aborts while booting (an assertion in its MSI-X emulation,
    in a CI run): the command never started, so the lab boots the guest once more and
    returns the command's status; the command ran once."""
    config, tools, work = _fake_vng_lab(tmp_path, monkeypatch, fail_boots=1)
    assert runner.run(config, tools) == 7
    assert (work / "runs").read_text() == "ran\n"
    assert (tmp_path / "boots").read_text().strip() == "2"
    assert "stopped before the command started" in capsys.readouterr().err


def test_a_guest_that_keeps_failing_to_boot_gives_the_error(tmp_path, monkeypatch):
    """Two aborted boots in a row: the error, after BOOT_ATTEMPTS boots."""
    config, tools, work = _fake_vng_lab(tmp_path, monkeypatch, fail_boots=5)
    with pytest.raises(NumaprofError, match="did not run the command to its end"):
        runner.run(config, tools)
    assert (tmp_path / "boots").read_text().strip() == str(runner.BOOT_ATTEMPTS)
    assert not (work / "runs").exists()


def test_a_guest_that_stops_after_the_command_started_is_not_booted_again(tmp_path, monkeypatch):
    """A guest that stopped after the command started (its status lost) gives the error:
    the command must not run twice."""
    config, tools, work = _fake_vng_lab(tmp_path, monkeypatch, fail_boots=0, lose_status=True)
    with pytest.raises(NumaprofError, match="did not run the command to its end"):
        runner.run(config, tools)
    assert (work / "runs").read_text() == "ran\n"
    assert (tmp_path / "boots").read_text().strip() == "1"


def test_host_thp_is_the_bracketed_mode(tmp_path):
    f = tmp_path / "enabled"
    f.write_text("always [madvise] never\n")
    assert runner.host_thp(f) == "madvise"
    f.write_text("[always] madvise never\n")
    assert runner.host_thp(f) == "always"
    f.write_text("garbage\n")
    assert runner.host_thp(f) is None
    assert runner.host_thp(tmp_path / "missing") is None


# ---- a guest that stalls: QEMU under TCG stops making progress -------------------------

STALLING_VNG = """#!/bin/sh
# stands for vng: boots number 1..HANG_BOOTS hang before the guest runs anything (a
# stalled boot); later ones run the guest script (the last argument) and end what it left
# running, as the guest's power-off does
n=$(cat "$BOOTS" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$BOOTS"
for last; do :; done
if [ "$n" -le "$HANG_BOOTS" ]; then exec /bin/sleep 600; fi
$last
rc=$?
trap '' TERM
kill -TERM 0
exit $rc
"""

# the heartbeat's `sleep PERIOD` never returns: the guest stops beating after its first
# beat, as a guest TCG stopped running does
FROZEN_SLEEP = f"""#!/bin/sh
if [ "$1" = {runner.HEARTBEAT_PERIOD} ]; then exec /bin/sleep 600; fi
exec /bin/sleep "$@"
"""


def _stalling_lab(tmp_path, monkeypatch, hang_boots, command, frozen=False, rerun=False):
    vng = tmp_path / "vng"
    vng.write_text(STALLING_VNG)
    vng.chmod(0o755)
    if frozen:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "sleep").write_text(FROZEN_SLEEP)
        (bin_dir / "sleep").chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("BOOTS", str(tmp_path / "boots"))
    monkeypatch.setenv("HANG_BOOTS", str(hang_boots))
    config = runner.LabConfig(topology=build_topology(nodes=2, cpus_per_node=1),
                              command=("sh", "-c", command), cwd=work, timeout=120.0,
                              rerun_stalled=rerun)
    tools = runner.LabTools(vng=vng, qemu=tmp_path / "qemu", kernel=Path("/boot/vmlinuz-test"))
    return config, tools, work


def _boots(tmp_path) -> int:
    return int((tmp_path / "boots").read_text())


def test_a_boot_that_stalls_is_killed_and_booted_again(tmp_path, monkeypatch, capsys):
    """No start mark within the boot deadline: the guest is killed and booted again; the
    command runs once and its status is returned."""
    config, tools, work = _stalling_lab(tmp_path, monkeypatch, 1, "echo ran >> runs; exit 7")
    assert runner.run(config, tools, watch={"boot_deadline": 1, "poll": 0.2}) == 7
    assert (work / "runs").read_text() == "ran\n" and _boots(tmp_path) == 2
    assert "had not started 1 s after the boot began" in capsys.readouterr().err


# the first run stops (its guest stalls in it); a second run ends with 7
TWICE = "echo ran >> runs; if [ ! -e again ]; then : > again; exec /bin/sleep 600; fi; exit 7"


def test_a_guest_that_stalls_in_the_command_is_killed_with_the_reason(tmp_path, monkeypatch):
    """The heartbeat stops while the command runs: the guest is killed at once (not at
    the timeout) with exit 124, and not booted again: the command must not run twice."""
    config, tools, work = _stalling_lab(tmp_path, monkeypatch, 0, TWICE, frozen=True)
    # the stall's error, not the timeout's ("did not finish within")
    with pytest.raises(NumaprofError, match="stopped making progress .*no heartbeat") as e:
        runner.run(config, tools, watch={"stall_seconds": 1, "poll": 0.2})
    assert e.value.exit_code == runner.TIMEOUT_EXIT
    assert (work / "runs").read_text() == "ran\n" and _boots(tmp_path) == 1
    # nothing of the guest is left running
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "/bin/sleep 600" not in ps


def test_a_stalled_command_that_may_run_twice_is_run_again(tmp_path, monkeypatch, capsys):
    """With rerun_stalled (--verify's recording, labkit's groups) the guest is booted
    again and the second run's status returned."""
    config, tools, work = _stalling_lab(tmp_path, monkeypatch, 0, TWICE, frozen=True, rerun=True)
    assert runner.run(config, tools, watch={"stall_seconds": 1, "poll": 0.2}) == 7
    assert (work / "runs").read_text() == "ran\nran\n" and _boots(tmp_path) == 2
    assert "to run the command once more" in capsys.readouterr().err


def test_a_live_guest_is_left_running(tmp_path, monkeypatch):
    """A command longer than the stall limit in a guest that beats on is not a stall."""
    monkeypatch.setattr(runner, "HEARTBEAT_PERIOD", 1)
    config, tools, work = _stalling_lab(tmp_path, monkeypatch, 0, "/bin/sleep 4; exit 3")
    assert runner.run(config, tools, watch={"stall_seconds": 2.5, "poll": 0.2}) == 3
    assert _boots(tmp_path) == 1
