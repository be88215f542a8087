"""Reading a numaprof profile directory (docs/profile-format.md, format version 1).

Columns are memory-mapped, never copied into Python objects, so a report on ten million
samples costs a few hundred megabytes of page cache and no Python per-row work.  Every
failure to read a profile is a :class:`~numaprof.errors.ProfileError` whose message is one
line naming the file and the problem.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from numaprof.analyzer import model
from numaprof.analyzer.format import FORMAT, HEADER, MAGIC, SCHEMA, VERSION
from numaprof.errors import ProfileError

CPU_UNKNOWN = 0xFFFF  # samples.cpu when the source did not record it (perf without --sample-cpu)

# SCHEMA, the format's one definition (collector/include/numaprof_format.h): table ->
# column -> (dtype, required, is_str).  Columns not listed are still read (their header
# names the dtype); listed optional ones read as zeros when absent.
_VALID_DTYPES = {"|u1", "<u2", "<u4", "<u8", "<i2", "<i4", "<i8", "|i1", "<f4", "<f8"}

Table = dict[str, np.ndarray]


def _read_header(path: Path) -> str:
    """Check the 16-byte column header and return its dtype string."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER)
    except OSError as e:
        raise ProfileError(f"{path}: cannot read ({e.strerror})") from None
    if len(head) < HEADER:
        raise ProfileError(f"{path}: truncated column file ({len(head)}-byte header, expected 16)")
    if head[:8] != MAGIC:
        raise ProfileError(f"{path}: not a numaprof column (bad magic {head[:8]!r})")
    dtype = head[8:].rstrip(b"\0").decode("ascii", "replace")
    if dtype not in _VALID_DTYPES:
        raise ProfileError(f"{path}: corrupted column header (unknown dtype {dtype!r})")
    return dtype


def _map_column(path: Path, dtype: str) -> np.ndarray:
    size = path.stat().st_size - HEADER
    n = size // np.dtype(dtype).itemsize  # a partly written last value is dropped
    if n <= 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=HEADER, shape=(n,))


def _read_strings(col: Path, offsets: np.ndarray) -> np.ndarray:
    """Decode a str column: offsets into the NUL-terminated strings of the .heap file."""
    heap_path = col.with_suffix(".heap")
    try:
        heap = heap_path.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"{heap_path}: missing string heap of {col.name}") from None
    out = np.empty(len(offsets), dtype=object)
    cache: dict[int, str] = {}
    for i, off in enumerate(offsets.tolist()):
        s = cache.get(off)
        if s is None:
            if off >= len(heap) and not (off == 0 and not heap):
                raise ProfileError(f"{heap_path}: corrupted (offset {off} beyond {len(heap)} bytes)")
            end = heap.find(b"\0", off)
            s = heap[off : (len(heap) if end < 0 else end)].decode("utf-8", "replace")
            cache[off] = s
        out[i] = s
    return out


def read_table(directory: str | os.PathLike, name: str) -> Table:
    """Read table ``name`` of a profile directory as ``{column: array}``.

    Numeric columns are read-only memory maps; ``str`` columns are object arrays of str.
    All columns have the length of the shortest one (a run cut short leaves the last row
    partly written).  A table with no column files is empty; optional columns that are
    absent read as zeros; a missing required column, a bad header or a dtype other than
    the documented one raise :class:`ProfileError`.
    """
    d = Path(directory)
    schema = SCHEMA.get(name, {})
    found: dict[str, Path] = {}
    prefix = name + "."
    try:
        entries = os.listdir(d)
    except OSError as e:
        raise ProfileError(f"{d}: cannot read profile directory ({e.strerror})") from None
    for fn in entries:
        if fn.startswith(prefix) and fn.endswith(".col"):
            col = fn[len(prefix) : -4]
            if col and "." not in col:
                found[col] = d / fn
    raw: dict[str, np.ndarray] = {}
    str_cols: set[str] = set()
    if found:
        missing = [c for c, (_, req, _) in schema.items() if req and c not in found]
        if missing:
            raise ProfileError(f"{d}: table {name} lacks column(s) {', '.join(missing)}")
    for col, path in sorted(found.items()):
        dtype = _read_header(path)
        expect = schema.get(col)
        if expect is not None and dtype != expect[0]:
            raise ProfileError(f"{path}: dtype {dtype}, expected {expect[0]}")
        raw[col] = _map_column(path, dtype)
        if expect is not None and expect[2]:
            str_cols.add(col)
    rows = min((len(a) for a in raw.values()), default=0)
    out: Table = {}
    for col, arr in raw.items():
        arr = arr[:rows]
        out[col] = _read_strings(found[col], arr) if col in str_cols else arr
    for col, (dtype, _, is_str) in schema.items():
        if col not in out:
            if is_str:
                out[col] = np.full(rows, "", dtype=object)
            else:
                out[col] = np.zeros(rows, dtype=dtype)
    return out


class Profile:
    """An opened profile directory: manifest, lazily memory-mapped tables, topology."""

    def __init__(self, path: Path, manifest: dict):
        self.path = path
        self.manifest = manifest
        self._tables: dict[str, Table] = {}
        self._topology: model.Topology | None = None

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete", False))

    @property
    def incomplete_reason(self) -> str | None:
        return self.manifest.get("incomplete_reason")

    def table(self, name: str) -> Table:
        """Columns of table ``name`` (see :func:`read_table`), cached per profile."""
        t = self._tables.get(name)
        if t is None:
            t = self._tables[name] = read_table(self.path, name)
        return t

    def has_table(self, name: str) -> bool:
        return any(p.name.startswith(name + ".") for p in self.path.glob(name + ".*.col"))

    def topology(self) -> model.Topology:
        """The topology recorded with the profile (topology.json, else topology.xml)."""
        if self._topology is None:
            from numaprof.analyzer import topology as topo

            j, x = self.path / "topology.json", self.path / "topology.xml"
            if j.exists():
                self._topology = topo.load_topology_json(j)
            elif x.exists():
                self._topology = topo.load_hwloc_xml(x)
            else:
                raise ProfileError(f"{self.path}: no topology.json or topology.xml in the profile")
        return self._topology

    def numa_maps(self) -> dict[int, str]:
        """``{pid: text}`` of the numa_maps.<pid> files saved at exit."""
        out = {}
        for p in self.path.glob("numa_maps.*"):
            suffix = p.name.split(".", 1)[1]
            if suffix.isdigit():
                try:
                    out[int(suffix)] = p.read_text(errors="replace")
                except OSError:
                    continue
        return out

    def __repr__(self) -> str:
        return f"Profile({str(self.path)!r})"


def open_profile(path: str | os.PathLike) -> Profile:
    """Open a profile directory after checking its manifest (format and version).

    Raises :class:`ProfileError` with one line naming the problem for a missing
    directory or manifest, a corrupted manifest, another format or another version.
    """
    p = Path(path)
    if not p.exists():
        raise ProfileError(f"{p}: no such profile (record one with 'numaprof record CMD')")
    if not p.is_dir():
        raise ProfileError(f"{p}: not a profile directory")
    mf = p / "manifest.json"
    try:
        text = mf.read_text()
    except FileNotFoundError:
        raise ProfileError(f"{p}: not a numaprof profile (no manifest.json)") from None
    except OSError as e:
        raise ProfileError(f"{mf}: cannot read ({e.strerror})") from None
    try:
        manifest = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProfileError(f"{mf}: corrupted ({e.msg if hasattr(e, 'msg') else e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        fmt = manifest.get("format") if isinstance(manifest, dict) else None
        raise ProfileError(f"{p}: not a numaprof profile (format {fmt!r}, expected {FORMAT!r})")
    version = manifest.get("version")
    if version != VERSION:
        raise ProfileError(
            f"{p}: profile format version {version}, this numaprof reads version {VERSION}"
        )
    return Profile(p, manifest)
