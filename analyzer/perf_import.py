"""Reading a `perf.data` file (perf record -d, perf mem record, perf c2c record) as a profile.

perf itself decodes the file: `perf script -s` runs a small exporter inside perf's own
Python (`_perf_export.py`) that writes one record per sample, and `--show-mmap-events`
lists the mappings.  The samples, their data addresses, data sources and weights, the
mappings (for static arrays and libraries) and the NUMA nodes of the perf.data header
become a numaprof profile directory that the analyzer reads like any other.  perf.data
has no heap allocations, first touches or page locations: those parts stay empty.  The
samples of events that carry no memory information are left out when others do, and the
lost samples are counted as perf counts them (docs/record.md, "perf.data").
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from numaprof.analyzer.format import FORMAT, VERSION
from numaprof.analyzer.profile import CPU_UNKNOWN
from numaprof.analyzer.writer import write_json, write_table
from numaprof.errors import NumaprofError, ProfileError

PERF_MAGIC = b"PERFILE2"
EXPORTER = Path(__file__).with_name("_perf_export.py")
# Layout of the exporter's struct "<QQQQQQIIIIB7x"; `event` indexes its .events file.
RECORD = np.dtype([("time", "<u8"), ("ip", "<u8"), ("addr", "<u8"), ("data_src", "<u8"),
                   ("phys_addr", "<u8"), ("event", "<u8"), ("pid", "<u4"), ("tid", "<u4"),
                   ("cpu", "<u4"), ("weight", "<u4"), ("user", "u1"), ("_pad2", "V7")])
MMAP2 = re.compile(
    r"^\s*\S*\s*(\d+)/(\d+)\s+([\d.]+):\s+PERF_RECORD_MMAP2 (-?\d+)/(-?\d+): "
    r"\[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (0x[0-9a-f]+|0) [^\]]*\]: ([rwxps-]{4}) (.*)$")
# `perf script --show-lost-events`: a PERF_RECORD_LOST (records the ring buffer dropped)
LOST = re.compile(r"PERF_RECORD_LOST lost (\d+)\s*$")
# `perf report --header-only -I`: "# event : name = NAME, , id = { .. }, type = .., ..."
EVENT = re.compile(r"^# event : name = (.*?), , (?:id|type) = ")
MEM_OP_LOAD, MEM_OP_STORE = 0x2, 0x4
READ_FORMAT_LOST = 1 << 4  # PERF_FORMAT_LOST, include/uapi/linux/perf_event.h


def is_perf_data(path: Path) -> bool:
    """True for a perf.data file (magic PERFILE2)."""
    try:
        with open(path, "rb") as f:
            return f.read(8) == PERF_MAGIC
    except OSError:
        return False


def _perf() -> str:
    exe = shutil.which("perf")
    if not exe:
        raise NumaprofError("reading perf.data needs perf (Debian package linux-perf)")
    return exe


def _run(argv: list[str], env: dict | None = None) -> str:
    import os

    proc = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise ProfileError(f"perf could not read the file: {last}")
    return proc.stdout


def _header(perf: str, path: Path) -> dict:
    """cmdline and NUMA nodes from the perf.data header (`perf report --header-only -I`)."""
    out = _run([perf, "report", "-i", str(path), "--header-only", "-I"])
    info: dict = {"command": [], "nodes": {}}
    for line in out.splitlines():
        m = re.match(r"# cmdline : (.*)", line)
        if m:
            info["command"] = m.group(1).split()
        m = re.match(r"# node(\d+) meminfo\s*: total = (\d+) kB", line)
        if m:
            info["nodes"].setdefault(int(m.group(1)), {})["memory_bytes"] = int(m.group(2)) * 1024
        m = re.match(r"# node(\d+) cpu list\s*: (.*)", line)
        if m:
            info["nodes"].setdefault(int(m.group(1)), {})["cpus"] = _cpulist(m.group(2))
        m = EVENT.match(line)
        if m:
            info.setdefault("events", []).append(m.group(1))
    return info


def _lost_samples(perf: str, path: Path) -> dict[str, int]:
    """Samples lost per event, as perf counts them: the PERF_RECORD_LOST_SAMPLES of each
    event summed (the per-event part of `perf report --stats`)."""
    out = _run([perf, "report", "-i", str(path), "--stats"])
    lost: dict[str, int] = {}
    event = None
    for line in out.splitlines():
        m = re.match(r"^(\S.*) stats:$", line)
        if m:
            event = None if m.group(1) == "Aggregated" else m.group(1)
            continue
        m = re.match(r"^\s*LOST_SAMPLES events:\s+(\d+)", line)
        if m and event is not None:
            lost[event] = lost.get(event, 0) + int(m.group(1))
    return lost


def _cpulist(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus += range(int(lo), int(hi) + 1)
        elif part.strip():
            cpus.append(int(part))
    return cpus


def convert(path: Path, out: Path) -> Path:
    """Converts perf.data `path` into a numaprof profile directory `out`."""
    perf = _perf()
    header = _header(perf, path)
    raw = out / "perf.samples"
    _run([perf, "script", "-i", str(path), "-s", str(EXPORTER)], {"NUMAPROF_PERF_OUT": str(raw)})
    rec = np.fromfile(raw, dtype=RECORD) if raw.exists() else np.zeros(0, RECORD)
    events_file = raw.with_name(raw.name + ".events")
    event_lines = events_file.read_text().splitlines() if events_file.exists() else []
    events_file.unlink(missing_ok=True)
    names = [ln.rsplit("\t", 1)[0] for ln in event_lines]
    read_formats = [int(ln.rsplit("\t", 1)[1]) for ln in event_lines]
    rec, kept, warnings = _memory_events(rec, names)
    op = rec["data_src"] & 0x1F
    access = np.where(op & MEM_OP_LOAD, 1, np.where(op & MEM_OP_STORE, 2, 0)).astype("u1")
    user = rec["user"].astype(bool)
    has_addr = (rec["addr"] != 0) & user
    rule = np.where(has_addr, 3, np.where(user, 0, 13)).astype("u1")
    no_cpu = rec["cpu"] == 0xFFFFFFFF
    write_table(out, "samples", time=rec["time"], pid=rec["pid"], tid=rec["tid"],
                cpu=np.where(no_cpu, CPU_UNKNOWN, rec["cpu"]).astype("<u2"), ip=rec["ip"],
                addr=np.where(has_addr, rec["addr"], 0), access=access,
                size=np.zeros(len(rec), "u1"), rule=rule, weight=rec["weight"],
                data_src=rec["data_src"], phys_addr=rec["phys_addr"])
    raw.unlink(missing_ok=True)

    maps = []
    ring_lost = 0
    listing = _run([perf, "script", "-i", str(path), "--show-mmap-events",
                    "--show-lost-events", "-F", "pid,tid,time"])
    for line in listing.splitlines():
        m = LOST.search(line)
        if m:
            ring_lost += int(m.group(1))
            continue
        m = MMAP2.match(line)
        if m and int(m.group(4)) > 0:
            prot = sum(b for ch, b in zip(m.group(9)[:3], (1, 2, 4), strict=True) if ch != "-")
            maps.append((int(float(m.group(3)) * 1e9), int(m.group(4)), int(m.group(6), 16),
                         int(m.group(7), 16), int(m.group(8), 16), prot, m.group(10).strip()))
    cols = list(zip(*maps, strict=True)) if maps else [[]] * 7
    write_table(out, "mappings", time=cols[0], pid=cols[1], start=cols[2], len=cols[3],
                pgoff=cols[4], prot=cols[5], flags=np.zeros(len(maps), "<u4"), path=cols[6])

    comms = {}
    comm_file = raw.with_name(raw.name + ".comm")
    if comm_file.exists():
        for line in comm_file.read_text().splitlines():
            pid, tid, comm = (line.split("\t") + [""])[:3]
            comms[(int(pid), int(tid))] = comm
        comm_file.unlink()
    keys = sorted(comms)
    first = {}
    for t, pid, tid in zip(rec["time"].tolist(), rec["pid"].tolist(), rec["tid"].tolist(),
                           strict=True):
        first.setdefault((pid, tid), t)
    write_table(out, "threads", pid=[k[0] for k in keys], tid=[k[1] for k in keys],
                ppid=[0] * len(keys), start_time=[first.get(k, 0) for k in keys],
                end_time=[0] * len(keys), comm=[comms[k] for k in keys],
                affinity_first=[""] * len(keys), affinity_last=[""] * len(keys),
                samples=[int(np.count_nonzero(rec["tid"] == k[1])) for k in keys])

    nodes = header["nodes"] or {0: {}}
    ids = sorted(nodes)
    n = len(ids)
    write_json(out / "topology.json", {
        "source": "perf.data header (no SLIT recorded: remote distance 20 assumed)",
        "nodes": [{"id": i, "cpus": nodes[i].get("cpus", []),
                   "memory_bytes": nodes[i].get("memory_bytes", 0)} for i in ids],
        "distances": [[10 if i == j else 20 for j in range(n)] for i in range(n)],
        "page_size": 4096,
    })
    with_address = int(np.count_nonzero(has_addr))
    events = ", ".join(kept or header.get("events", [])) or "unknown events"
    if len(rec) and bool(no_cpu.any()):
        warnings.append("samples carry no cpu (perf record without --sample-cpu): the cpus "
                        "and nodes threads ran on are unknown")
    # perf record (6.0+, events with read_format LOST) reads each event's lost-sample
    # count and writes it as PERF_RECORD_LOST_SAMPLES: the same samples the ring's
    # PERF_RECORD_LOST records count, so only one of the two is added (perf report's
    # "Total Lost Samples" is the former).
    per_event = _lost_samples(perf, path)
    lost = sum(n for e, n in per_event.items() if not kept or e in kept)
    if not any(fmt & READ_FORMAT_LOST for name, fmt in zip(names, read_formats, strict=True)
               if name in kept):
        lost += ring_lost
    write_json(out / "manifest.json", {
        "format": FORMAT, "version": VERSION, "complete": True,
        "incomplete_reason": None, "command": header["command"], "argv": [],
        "env": {}, "exit_status": None, "backend": "perf",
        "backend_reason": {"perf": f"imported from {path} ({events})"},
        "sampling": {"event": events},
        "counts": {"samples": int(len(rec)), "with_address": with_address, "lost": lost,
                   "unresolved": int(len(rec)) - with_address},
        "warnings": warnings, "imported_from": str(path),
    })
    return out


def _memory_events(rec: np.ndarray, names: list[str]) -> tuple[np.ndarray, list[str], list[str]]:
    """Keeps the samples of the events that sample memory accesses.

    An event samples memory accesses when some of its samples carry a load or store
    mem_op in their data source.  When the file has such events, the samples of the
    others are left out: the mem-loads-aux leader that `perf mem record` puts before the
    load-latency event on Sapphire Rapids (its data source is PERF_MEM_NA, ds.c
    get_data_src), or a cycles event recorded alongside.  Returns the kept records, the
    kept events' names and one warning per event left out."""
    def name(i: int) -> str:
        return names[i] if i < len(names) else f"event #{i}"

    ev = rec["event"]
    is_mem = (rec["data_src"] & (MEM_OP_LOAD | MEM_OP_STORE)) != 0
    present = [int(e) for e in np.unique(ev)]
    memory = [int(e) for e in np.unique(ev[is_mem])]
    if not memory or len(memory) == len(present):
        return rec, [name(e) for e in present], []
    warnings = [f"{int(np.count_nonzero(ev == e))} samples of {name(e)} left out: none of "
                "its samples carries a load or store data source" for e in present
                if e not in memory]
    return rec[np.isin(ev, memory)], [name(e) for e in memory], warnings


@contextlib.contextmanager
def as_profile(path: Path) -> Iterator[Path]:
    """Yields a profile directory for `path`: itself, or a converted perf.data file."""
    if path.is_file() and is_perf_data(path):
        with tempfile.TemporaryDirectory(prefix="numaprof-perf-") as tmp:
            yield convert(path, Path(tmp))
    else:
        yield path
