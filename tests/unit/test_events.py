"""`numaprof events`: rendering (unit), the collector plumbing (a stand-in executable),
and the real `numaprof-collect --list-events` on forced libpfm4 PMUs where it is built.

Expected encodings: ../shared/hw-sampling.md section 5 (P lib/events/intel_skl_events.h,
intel_icl_events.h, intel_spr_events.h, amd64_events_fam19h_zen3.h / _zen4.h; the SPR
store event 0x2cd from L arch/x86/events/intel/core.c spr_events_attrs).
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest
from click.testing import CliRunner

from numaprof import paths
from numaprof.cli import events
from numaprof.errors import NumaprofError

CANNED = {
    "core_pmu": "skx",
    "forced": True,
    "backends": {"pebs": {"usable": False, "why": "not probed: LIBPFM_FORCE_PMU=skx"},
                 "ibs": {"usable": False, "why": "not probed: LIBPFM_FORCE_PMU=skx"}},
    "sampling": [
        {"role": "loads", "name": "MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=30",
         "source": "libpfm4 skx", "type": 4, "config": "0x1cd", "config1": "0x1e",
         "config2": "0", "precise": 3, "sample_type": "0x109808f", "period": 2003},
    ],
    "counting": [],
    "node_counters": [
        {"role": "imc.read_bytes", "name": "cas_count_read",
         "source": "sysfs uncore_imc_0, cpu 0, node 0, 64 bytes/count", "type": 13,
         "config": "0x304", "config1": "0", "config2": "0", "precise": 0,
         "sample_type": "0", "period": 0},
    ],
}


def test_render_text():
    text = events.render_text(CANNED)
    lines = text.splitlines()
    assert lines[0] == "core PMU: skx (forced by LIBPFM_FORCE_PMU)"
    assert lines[1] == "pebs: not usable: not probed: LIBPFM_FORCE_PMU=skx"
    loads = next(ln for ln in lines if ln.strip().startswith("loads"))
    assert loads.split()[:6] == ["loads", "MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=30", "4",
                                 "0x1cd", "0x1e", "3"]
    assert "local/remote DRAM counting (core PMU):" in lines
    assert lines[lines.index("local/remote DRAM counting (core PMU):") + 1] == "  (none)"
    assert any("imc.read_bytes" in ln and "0x304" in ln for ln in lines)


def _fake_collector(tmp_path, script: str):
    exe = tmp_path / "numaprof-collect"
    exe.write_text("#!/bin/sh\n" + textwrap.dedent(script))
    exe.chmod(0o755)
    return tmp_path


def test_list_events_passes_the_pmu_and_parses(tmp_path, monkeypatch):
    libexec = _fake_collector(tmp_path, """\
        [ "$1 $2" = "--list-events --json" ] || exit 3
        printf '{"core_pmu": "%s", "forced": true, "backends": {}, "sampling": [],
                 "counting": [], "node_counters": []}' "$LIBPFM_FORCE_PMU"
        """)
    monkeypatch.setenv("NUMAPROF_LIBEXEC", str(libexec))
    monkeypatch.delenv("LIBPFM_FORCE_PMU", raising=False)
    assert events.list_events("icx")["core_pmu"] == "icx"
    result = CliRunner().invoke(events.command, ["--pmu", "spr", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["core_pmu"] == "spr"


def test_list_events_failure_is_one_line(tmp_path, monkeypatch):
    libexec = _fake_collector(tmp_path, """\
        echo "numaprof: unknown or incomplete option: --list-events" >&2
        exit 125
        """)
    monkeypatch.setenv("NUMAPROF_LIBEXEC", str(libexec))
    with pytest.raises(NumaprofError, match="unknown or incomplete option: --list-events"):
        events.list_events()


def test_list_events_bad_json(tmp_path, monkeypatch):
    libexec = _fake_collector(tmp_path, "echo '{not json'\n")
    monkeypatch.setenv("NUMAPROF_LIBEXEC", str(libexec))
    with pytest.raises(NumaprofError, match="invalid JSON"):
        events.list_events()


def _real_collector():
    try:
        exe = paths.collector()
    except NumaprofError as e:
        pytest.skip(f"numaprof-collect is not built: {e}")
    probe = subprocess.run([str(exe), "--list-events", "--json"], capture_output=True,
                           text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("numaprof-collect does not handle --list-events yet (main.c must call "
                    f"nmp_hw_list_events): {probe.stderr.strip()}")
    return exe


def _run(exe, pmu):
    env = dict(os.environ, LIBPFM_FORCE_PMU=pmu)
    out = subprocess.run([str(exe), "--list-events", "--json"], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return json.loads(out)


def _by_role(rows):
    return {r["role"]: r for r in rows}


@pytest.mark.parametrize("pmu,aux,store", [("skx", False, "0x82d0"), ("icx", False, "0x82d0"),
                                           ("spr", True, "0x2cd")])
def test_forced_intel_encodings(pmu, aux, store):
    data = _run(_real_collector(), pmu)
    assert data["core_pmu"] == pmu and data["forced"] is True
    roles = _by_role(data["sampling"])
    assert roles["loads"]["config"] == "0x1cd" and roles["loads"]["config1"] == "0x1e"
    assert roles["loads"]["type"] == 4
    assert roles["stores"]["config"] == store
    assert ("aux-leader" in roles) == aux
    if aux:
        assert data["sampling"][0]["role"] == "aux-leader"
        assert roles["aux-leader"]["config"] == "0x8203"
    if pmu == "skx":
        counting = _by_role(data["counting"])
        assert counting["dram-loads.local"]["config"] == "0x1d3"
        assert counting["dram-loads.remote"]["config"] == "0x2d3"


@pytest.mark.parametrize("pmu,near,far", [("amd64_fam19h_zen3", "MEM_IO_LCL", "MEM_IO_RMT"),
                                          ("amd64_fam19h_zen4", "DRAM_IO_NEAR", "DRAM_IO_FAR")])
def test_forced_amd_encodings(pmu, near, far):
    data = _run(_real_collector(), pmu)
    counting = _by_role(data["counting"])
    assert counting["dram-fills.local"]["name"].endswith(near)
    assert counting["dram-fills.local"]["config"] == "0x844"
    assert counting["dram-fills.remote"]["name"].endswith(far)
    assert counting["dram-fills.remote"]["config"] == "0x4044"
    assert not any(r["role"] in ("loads", "stores") for r in data["sampling"])
