"""`report` reads perf.data files: a real `perf record -d` made here (no PMU: cpu-clock)
and a `perf mem record`-style file built byte by byte from the documented format."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import perfdata_synth as synth
import pytest
from helpers import EXAMPLES, run_numaprof

pytestmark = pytest.mark.skipif(shutil.which("perf") is None, reason="perf (linux-perf) missing")


def test_real_perf_record_loads(examples_built, tmp_path):
    data = tmp_path / "perf.data"
    proc = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-d", "-o", str(data),
                           "--", str(examples_built / "gather"), "8", "4"],
                          capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "2"})
    if proc.returncode != 0 and "paranoid" in proc.stderr:
        pytest.skip(f"perf record not permitted here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(run_numaprof("report", data, "--format", "json", check=True).stdout)
    assert doc["profile"]["backend"] == "perf"
    assert doc["profile"]["samples"] > 10
    assert {t["comm"] for t in doc["threads"]} == {"gather"}
    assert "gather" in " ".join(doc["profile"]["command"])
    # plain `perf record` (no -a, no --sample-cpu) does not record the cpu: the threads'
    # cpus are then unknown, not "cpu 0" (which read as two threads sharing one cpu)
    evlist = subprocess.run(["perf", "evlist", "-v", "-i", str(data)], capture_output=True,
                            text=True, check=True).stdout
    sample_type = evlist.split("sample_type:")[1].split(",")[0].strip().split("|")
    if "CPU" in sample_type:
        assert all(t["cpus"] for t in doc["threads"]), doc["threads"]
    else:
        assert all(t["cpus"] == [] for t in doc["threads"]), doc["threads"]
        assert not any("same cpu" in f for f in doc["findings"]), doc["findings"]
        assert any("no cpu" in f for f in doc["findings"]), doc["findings"]


def test_synthesized_perf_mem_file(examples_built, tmp_path):
    exe = examples_built / "spmv"
    segments, syms = synth.load_segments(exe)
    base = 0x5555_5555_4000
    pid, tids = 4242, (4242, 4243)
    records = [synth.comm(pid, t, "spmv") for t in tids]
    for off, vaddr, memsz, prot in segments:
        page_off = off & ~0xFFF
        start = base + (vaddr & ~0xFFF)
        length = ((vaddr + memsz + 0xFFF) & ~0xFFF) - (vaddr & ~0xFFF)
        records.append(synth.mmap2(pid, pid, start, length, page_off, prot, str(exe)))
    rng = np.random.default_rng(1)
    values_at, values_size = syms["values"]
    x_at, x_size = syms["x"]
    t0 = 10_000_000_000
    n = 3000
    for i in range(n):
        k = i % 2
        time = t0 + i * 300_000
        # values: each thread streams its half; x: gathered anywhere
        half = values_size // 2
        pos = (k * half + (i // 2) * (half // n * 2)) & ~7
        records.append(synth.sample(base + 0x1200, pid, tids[k], time, base + values_at + pos,
                                    k, 180, synth.DATA_SRC_LOCAL_DRAM_LOAD))
        xr = int(rng.integers(0, x_size // 8)) * 8
        records.append(synth.sample(base + 0x1210, pid, tids[k], time + 1000,
                                    base + x_at + xr, k, 250, synth.DATA_SRC_LOCAL_DRAM_LOAD))
    data = tmp_path / "perf.mem.data"
    synth.write(data, records)
    doc = json.loads(run_numaprof("report", data, "--format", "json", check=True).stdout)
    assert doc["profile"]["samples"] == 2 * n
    assert doc["profile"]["address_coverage"] == pytest.approx(1.0)
    objs = {o["name"]: o for o in doc["objects"]}
    assert {"values", "x"} <= set(objs), list(objs)
    assert objs["values"]["kind"] == "static"
    assert objs["values"]["samples"] == n and objs["x"]["samples"] == n
    assert objs["x"]["reads"] == 1.0
    assert objs["x"]["pattern"] == "random", objs["x"]["features"]
    assert objs["values"]["pattern"] == "regular", objs["values"]["features"]


def test_perf_data_is_recognised_and_garbage_is_not(tmp_path):
    bad = tmp_path / "perf.data"
    bad.write_bytes(b"PERFILE2" + b"\0" * 40)
    proc = run_numaprof("report", bad)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert len([ln for ln in proc.stderr.splitlines() if ln.strip()]) == 1
    assert EXAMPLES.exists()


def _report(data) -> dict:
    return json.loads(run_numaprof("report", data, "--format", "json", check=True).stdout)


def _loads(event_id: int | None, n: int, t0: int = 1000) -> list[bytes]:
    make = (lambda *a: synth.sample_ident(event_id, *a)) if event_id else synth.sample
    return [make(0x402000 + i, 100, 100, t0 + 10 * i, 0x7000 + 8 * i, 0, 100,
                 synth.DATA_SRC_LOCAL_DRAM_LOAD) for i in range(n)]


def test_lost_records_are_counted(tmp_path):
    """PERF_RECORD_LOST (the ring's) and PERF_RECORD_LOST_SAMPLES both count when the
    event has no PERF_FORMAT_LOST: perf record did not fold the ring's losses into
    LOST_SAMPLES then."""
    data = tmp_path / "lost.data"
    synth.write(data, [synth.comm(100, 100, "x"), *_loads(None, 10), synth.lost(1, 5),
                       synth.lost_samples(7)])
    doc = _report(data)
    assert doc["profile"]["samples"] == 10
    assert doc["profile"]["lost"] == 12


def test_lost_samples_are_not_counted_twice(tmp_path):
    """With PERF_FORMAT_LOST, perf record (6.0+) writes each event's lost-sample count as
    PERF_RECORD_LOST_SAMPLES: the same samples as the ring's PERF_RECORD_LOST."""
    data = tmp_path / "lost.data"
    attr = synth._attr(0x1CD, read_format=synth.FORMAT_ID | synth.FORMAT_LOST)
    synth.write(data, [synth.comm(100, 100, "x"), *_loads(None, 10), synth.lost(1, 7),
                       synth.lost_samples(7)], attrs=[(attr, 1)])
    assert _report(data)["profile"]["lost"] == 7


def test_real_lost_samples_match_perf(tmp_path):
    """A real ring-buffer overflow (one data page, a page fault per sample): the lost count
    is the one perf report gives ("Total Lost Samples")."""
    data = tmp_path / "perf.data"
    for _ in range(3):  # a loss is likely, not certain: perf's reader may keep up
        proc = subprocess.run(["perf", "record", "-q", "-m", "1", "-e", "minor-faults", "-c",
                               "1", "-d", "-o", str(data), "--", sys.executable, "-c",
                               "x = bytearray(128 << 20)"], capture_output=True, text=True)
        if proc.returncode != 0 and "paranoid" in proc.stderr:
            pytest.skip(f"perf record not permitted here: {proc.stderr.strip()[:200]}")
        assert proc.returncode == 0, proc.stderr
        header = subprocess.run(["perf", "report", "-i", str(data), "--stdio"],
                                capture_output=True, text=True, check=True).stdout
        perf_lost = int(re.search(r"# Total Lost Samples: (\d+)", header).group(1))
        if perf_lost:
            break
    else:
        pytest.skip("no sample was lost in three recordings: nothing to compare")
    assert _report(data)["profile"]["lost"] == perf_lost


def test_helper_event_samples_are_left_out(tmp_path):
    """perf mem record on Sapphire Rapids: {mem-loads-aux, mem-loads}; the leader's
    samples carry PERF_MEM_NA and are not memory samples."""
    st = synth.SAMPLE_TYPE | synth.IDENTIFIER
    aux = [synth.sample_ident(11, 0x401000 + i, 100, 100, 1003 + 10 * i, 0, 0, 0,
                              0x1E05080021) for i in range(6)]
    data = tmp_path / "mem.data"
    synth.write(data, [synth.comm(100, 100, "x"), *aux, *_loads(12, 10)],
                attrs=[(synth._attr(0x8203, st), 11), (synth._attr(0x1CD, st), 12)])
    doc = _report(data)
    assert doc["profile"]["samples"] == 10
    assert doc["profile"]["address_coverage"] == pytest.approx(1.0)
    assert "0x1cd" in doc["profile"]["backend_reason"]["perf"]
    assert "0x8203" not in doc["profile"]["backend_reason"]["perf"]
    assert any("6 samples of" in f and "0x8203" in f for f in doc["findings"]), doc["findings"]


def test_event_names_with_commas_are_read_whole():
    """`perf report --header-only -I` of a `perf mem record`: the event name has commas."""
    from numaprof.analyzer.perf_import import EVENT

    line = ("# event : name = cpu/mem-loads,ldlat=30/P, , id = { 12, 13 }, type = 4, "
            "size = 136, config = 0x1cd, config1 = 0x1e")
    assert EVENT.match(line).group(1) == "cpu/mem-loads,ldlat=30/P"
    assert EVENT.match("# event : name = cycles, , type = 0, size = 136").group(1) == "cycles"
