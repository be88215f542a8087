"""`report` reads perf.data files: a real `perf record -d` made here (no PMU: cpu-clock)
and a `perf mem record`-style file built byte by byte from the documented format."""

import json
import os
import shutil
import subprocess

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
