"""Measured NUMA factor: latency and bandwidth per (cpu node, memory node) pair (docs/measure.md).

``measure`` runs ``numaprof-measure`` (collector/measure/measure.c), which binds a thread to
node i and a buffer to node j for every pair and times a pointer chase (latency, ns per
load) and a STREAM triad (bandwidth, GB/s) — the method of Pousa Ribeiro et al. 2010 (docs/references.md)
§3.1, Table 4.  The result is cached per machine under ``$XDG_CACHE_HOME/numaprof``;
``load_cached`` returns it on later runs and ``apply_measured`` gives a Topology whose NUMA
factor is the measured latency ratio.  See docs/measure.md.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import re
import socket
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from numaprof.analyzer.model import Topology
from numaprof.errors import NumaprofError, UsageError

CACHE_FORMAT = 1


@dataclass(frozen=True)
class Measurement:
    """Matrices indexed [cpu node i][memory node j] in the order of ``nodes``; NaN where a
    pair was not measurable (a node without cpus or without memory)."""

    nodes: tuple[int, ...]
    latency_ns: np.ndarray  # median ns per dependent load
    bandwidth_gbs: np.ndarray  # best triad GB/s (24 bytes per iteration)
    placed_fraction: np.ndarray  # share of sampled pages move_pages found on node j
    node_cpus: tuple[tuple[int, ...], ...] = ()
    settings: dict = field(default_factory=dict)
    created: str = ""  # UTC ISO time of the measurement

    @property
    def latency_factor(self) -> np.ndarray:
        """latency[i][j] / latency[i][i]: the NUMA factor of Table 4 (1.0 on the diagonal)."""
        lat = np.asarray(self.latency_ns, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return lat / np.diag(lat)[:, None]

    @property
    def bandwidth_factor(self) -> np.ndarray:
        """bandwidth[i][i] / bandwidth[i][j]: how many times slower remote streaming is."""
        bw = np.asarray(self.bandwidth_gbs, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.diag(bw)[:, None] / bw

    def to_json(self) -> dict:
        def mat(m):
            return [[None if not np.isfinite(x) else float(x) for x in row] for row in m]

        return {
            "version": 1,
            "nodes": list(self.nodes),
            "node_cpus": [list(c) for c in self.node_cpus],
            "latency_ns": mat(self.latency_ns),
            "bandwidth_gbs": mat(self.bandwidth_gbs),
            "placed_fraction": mat(self.placed_fraction),
            "settings": self.settings,
            "created": self.created,
        }


def _matrix(data: dict, name: str, n: int) -> np.ndarray:
    rows = data.get(name)
    if not isinstance(rows, list) or len(rows) != n or any(
        not isinstance(r, list) or len(r) != n for r in rows
    ):
        raise ValueError(f"{name} is not a {n}x{n} matrix")
    m = np.array([[np.nan if x is None else float(x) for x in r] for r in rows], dtype=float)
    if (m[np.isfinite(m)] <= 0).any() and name != "placed_fraction":
        raise ValueError(f"{name} has a non-positive value")
    return m


def from_json(data: dict, *, created: str = "") -> Measurement:
    """A Measurement from numaprof-measure's JSON (or ``Measurement.to_json``).

    Raises ValueError / KeyError / TypeError on anything else; ``parse_output`` turns
    these into a NumaprofError.
    """
    nodes = tuple(int(x) for x in data["nodes"])
    if not nodes or len(set(nodes)) != len(nodes):
        raise ValueError(f"bad node list {list(nodes)}")
    n = len(nodes)
    cpus = tuple(tuple(int(c) for c in row) for row in data.get("node_cpus", ()))
    if cpus and len(cpus) != n:
        raise ValueError("node_cpus does not match nodes")
    placed = (_matrix(data, "placed_fraction", n) if "placed_fraction" in data
              else np.full((n, n), np.nan))
    return Measurement(
        nodes=nodes,
        latency_ns=_matrix(data, "latency_ns", n),
        bandwidth_gbs=_matrix(data, "bandwidth_gbs", n),
        placed_fraction=placed,
        node_cpus=cpus,
        settings=dict(data.get("settings") or {}),
        created=str(data.get("created") or created),
    )


def parse_output(text: str) -> Measurement:
    """Parse numaprof-measure's stdout; a NumaprofError if it is not its JSON."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if int(data.get("version", 0)) != 1:
            raise ValueError(f"unknown version {data.get('version')!r}")
        return from_json(data, created=_now())
    except (ValueError, KeyError, TypeError) as e:
        raise NumaprofError(f"numaprof-measure gave unreadable output ({e})") from None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the machine key


def _sysroot(sysroot: str | None) -> str:
    return os.environ.get("NUMAPROF_SYSROOT", "") if sysroot is None else sysroot


def machine_key(topology: Topology, *, sysroot: str | None = None,
                hostname: str | None = None) -> str:
    """``<hostname>-<16 hex>``: the hash covers the hostname, the topology's node/cpu layout,
    every /sys/devices/system/node/node*/cpulist and the nodes' MemTotal lines, so a cache
    from another machine, or from this one after its nodes changed, is not reused."""
    host = hostname if hostname is not None else socket.gethostname()
    h = hashlib.sha256()
    h.update(f"host={host}\n".encode())
    for n in sorted(topology.nodes, key=lambda n: n.id):
        h.update(f"node {n.id} cpus {','.join(map(str, n.cpus))}\n".encode())
    root = _sysroot(sysroot)
    node_dirs = glob.glob(f"{root}/sys/devices/system/node/node[0-9]*")
    for d in sorted(node_dirs, key=lambda p: int(re.sub(r"\D", "", Path(p).name) or 0)):
        name = Path(d).name
        try:
            h.update(f"{name} cpulist {Path(d, 'cpulist').read_text().strip()}\n".encode())
        except OSError:
            h.update(f"{name} cpulist ?\n".encode())
        try:
            total = [ln for ln in Path(d, "meminfo").read_text().splitlines() if "MemTotal" in ln]
        except OSError:
            total = ["?"]
        h.update(f"{name} {' '.join(' '.join(t.split()) for t in total)}\n".encode())
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", host)[:64] or "host"
    return f"{safe}-{h.hexdigest()[:16]}"


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/numaprof`` (``~/.cache/numaprof`` when unset or relative)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "numaprof"


def cache_path(topology: Topology, *, sysroot: str | None = None) -> Path:
    return cache_dir() / f"measure-{machine_key(topology, sysroot=sysroot)}.json"


def save_cached(topology: Topology, m: Measurement, *, sysroot: str | None = None) -> Path:
    """Write m to this machine's cache file (atomically); returns its path."""
    path = cache_path(topology, sysroot=sysroot)
    doc = {"numaprof_measure_cache": CACHE_FORMAT, "key": path.stem[len("measure-"):],
           "measurement": m.to_json()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        raise NumaprofError(f"cannot write the measurement cache {path}: {e.strerror}") from None
    return path


def load_cached(topology: Topology, *, sysroot: str | None = None) -> Measurement | None:
    """This machine's cached measurement, or None when there is none.

    A cache file of another format, an unreadable one, or one whose nodes are not the
    topology's is ignored (None) as if absent: measuring again replaces it.
    """
    path = cache_path(topology, sysroot=sysroot)
    try:
        doc = json.loads(path.read_text())
        if doc.get("numaprof_measure_cache") != CACHE_FORMAT:
            return None
        m = from_json(doc["measurement"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if sorted(m.nodes) != sorted(n.id for n in topology.nodes):
        return None
    return m


# ---------------------------------------------------------------- running it


def measure_executable() -> Path:
    """numaprof-measure next to numaprof-collect (numaprof.paths.libexec_dir())."""
    from numaprof.paths import libexec_dir

    exe = libexec_dir() / "numaprof-measure"
    if not exe.exists():
        raise NumaprofError(f"{exe} is missing: the collector was built without "
                            "collector/measure (reinstall with 'pip install .' or 'make build')")
    return exe


def measure(topology: Topology, *, size_mib: int = 256, reps: int = 5,
            threads: int | None = None, executable: str | os.PathLike | None = None,
            cache: bool = True, timeout: float | None = None) -> Measurement:
    """Measure latency and bandwidth for every node pair of this machine and cache it.

    ``size_mib`` is the chase buffer (and the three triad arrays together): it must be
    well beyond the last-level cache for memory to be measured rather than cache.
    ``threads``: triad threads per pair (default: the cpu node's cpus).  Takes about
    N² × (reps + 1) × (size_mib / 256) seconds on an N-node machine.
    """
    if size_mib < 1:
        raise UsageError(f"buffer size must be at least 1 MiB, not {size_mib}")
    if reps < 1:
        raise UsageError(f"repetitions must be at least 1, not {reps}")
    if threads is not None and threads < 1:
        raise UsageError(f"threads must be at least 1, not {threads}")
    # absolute: Path("./x") prints as "x", which subprocess would look up in PATH
    exe = Path(executable).absolute() if executable is not None else measure_executable()
    argv = [str(exe), "--size-mib", str(size_mib), "--reps", str(reps)]
    if threads is not None:
        argv += ["--threads", str(threads)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except OSError as e:
        raise NumaprofError(f"cannot run {exe}: {e.strerror}") from None
    except subprocess.TimeoutExpired:
        raise NumaprofError(f"numaprof-measure did not finish within {timeout:g} s") from None
    stderr = proc.stderr.strip()
    if proc.returncode == 2:
        raise UsageError(f"numaprof-measure refused its arguments: {stderr}")
    if proc.returncode not in (0, 1):
        raise NumaprofError(f"numaprof-measure exited with status {proc.returncode}: "
                            f"{stderr or 'no message'}")
    try:
        errors = json.loads(proc.stdout).get("errors") or []
    except (ValueError, AttributeError):
        errors = []
    if proc.returncode != 0 or errors:
        why = "; ".join(map(str, errors)) or stderr or "no message"
        raise NumaprofError(f"the measurement failed: {why}")
    m = parse_output(proc.stdout)
    want = sorted(n.id for n in topology.nodes)
    if sorted(m.nodes) != want:
        raise NumaprofError(f"numaprof-measure saw nodes {list(m.nodes)} but the topology "
                            f"has {want}")
    if cache:
        save_cached(topology, m)
    return m


def apply_measured(topology: Topology, m: Measurement) -> Topology:
    """The topology with ``measured_factor`` = the measured latency ratio and
    ``node_bandwidth`` = each node's measured local triad bandwidth (the diagonal of
    ``bandwidth_gbs``, GB/s), in the topology's node order.  Pairs that were not
    measurable keep the SLIT ratio; nodes without a local bandwidth (no cpus or no
    memory) get NaN."""
    ids = [n.id for n in topology.nodes]
    if sorted(ids) != sorted(m.nodes):
        raise NumaprofError(f"the measurement is of nodes {list(m.nodes)}, the topology has "
                            f"{ids}")
    pos = [m.nodes.index(i) for i in ids]
    factor = m.latency_factor[np.ix_(pos, pos)]
    slit = topology.slit_factor()
    factor = np.where(np.isfinite(factor), factor, slit)
    local_bw = np.diag(np.asarray(m.bandwidth_gbs, dtype=float))[pos]
    local_bw = np.where(np.isfinite(local_bw) & (local_bw > 0), local_bw, np.nan)
    return dataclasses.replace(topology, measured_factor=factor, node_bandwidth=local_bw)
