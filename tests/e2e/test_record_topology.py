"""End-to-end: the machine's topology is discovered while the program runs, without
hwloc's I/O and XML plugins (collector/src/topology.c), and none of that reaches the
program: its environment and open descriptors are what they are without numaprof."""

import json
import os
import subprocess

import pytest
from helpers import numaprof_argv, run_numaprof

from numaprof.analyzer.topology import load_hwloc_xml, load_topology_json

pytestmark = pytest.mark.e2e

SHOW = "ls /proc/self/fd; env"  # ls's own descriptors (no pipeline: its shell's vary)


def _sysfs_nodes() -> int:
    return sum(1 for n in os.listdir("/sys/devices/system/node")
               if n.startswith("node") and n[4:].isdigit())


def _record(tmp_path, env=None):
    prof = tmp_path / "p.data"
    r = subprocess.run([*numaprof_argv(), "record", "-o", str(prof), "--", "sh", "-c", SHOW],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return prof, r.stdout


def _plain(env=None) -> str:
    return subprocess.run(["sh", "-c", SHOW], capture_output=True, text=True, env=env,
                          check=True).stdout


def _same_as_plain(out: str, plain: str) -> None:
    """No descriptor beyond those the program has without numaprof (record passes on
    fewer: its own caller's are not the program's), the same HWLOC_ variables."""
    def fds(text):
        return {line for line in text.splitlines() if line.isdigit()}

    def hwloc(text):
        return sorted(line for line in text.splitlines() if line.startswith("HWLOC_"))

    assert {"0", "1", "2"} <= fds(out) <= fds(plain)
    assert hwloc(out) == hwloc(plain)


@pytest.mark.parametrize("program", [["true"], ["sleep", "0.3"]])
def test_topology_files_of_a_run_of_any_length(tmp_path, program):
    prof = tmp_path / "p.data"
    run_numaprof("record", "-o", prof, "--", *program, check=True)
    from_json = load_topology_json(prof / "topology.json")
    from_xml = load_hwloc_xml(prof / "topology.xml")
    assert len(from_json.nodes) == len(from_xml.nodes) == _sysfs_nodes()
    assert sorted(c for n in from_xml.nodes for c in n.cpus) == \
        sorted(c for n in from_json.nodes for c in n.cpus)
    assert json.loads((prof / "collector.json").read_text())["warnings"] == []


def test_program_sees_the_users_descriptors_and_environment(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    prof, out = _record(tmp_path, env)
    _same_as_plain(out, _plain(env))
    assert "HWLOC_" not in out
    assert (prof / "topology.json").is_file()


def test_a_users_hwloc_setting_is_kept(tmp_path):
    env = dict(os.environ, HWLOC_PLUGINS_BLACKLIST="hwloc_opencl")
    prof, out = _record(tmp_path, env)
    _same_as_plain(out, _plain(env))
    assert "HWLOC_PLUGINS_BLACKLIST=hwloc_opencl" in out
    assert load_topology_json(prof / "topology.json").nodes
