"""Reading a numaprof profile directory (docs/profile-format.md, format version 1).

Columns are memory-mapped, never copied into Python objects, so a report on ten million
samples costs a few hundred megabytes of page cache and no Python per-row work.  Every
failure to read a profile is a :class:`~numaprof.errors.ProfileError` whose message is one
line naming the file and the problem.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

from numaprof.analyzer import model, profile_io
from numaprof.analyzer.format import FORMAT, HEADER, MAGIC, SCHEMA, VERSION
from numaprof.errors import ProfileError

CPU_UNKNOWN = 0xFFFF  # samples.cpu when the source did not record it (perf without --sample-cpu)

# SCHEMA, the format's one definition (collector/include/numaprof_format.h): table ->
# column -> (dtype, required, is_str).  Columns not listed are still read (their header
# names the dtype); listed optional ones read as zeros when absent.
_VALID_DTYPES = {"|u1", "<u2", "<u4", "<u8", "<i2", "<i4", "<i8", "|i1", "<f4", "<f8"}

Table = dict[str, np.ndarray]


# Rows a table may hold (docs/profile-format.md, "Limits"): the analyzer indexes rows with
# 32-bit integers; the other tables stay far below what a run produces.  Where the
# manifest counts a table's rows (the collector's counts), that count is the limit.
ROW_LIMITS = {"samples": 2**31 - 1, "faults": 2**31 - 1, "page_nodes": 2**31 - 1,
              "objects": 2**26, "object_pages": 2**28, "stack_frames": 2**26, "mappings": 2**22, "threads": 2**22,
              "counters": 2**20}
ROW_LIMIT = 2**31 - 1  # a table this numaprof does not know
COUNTED = {"samples": "samples", "faults": "faults", "page_nodes": "page_queries"}
# Longest string of each str column, in bytes: a path (PATH_MAX), a thread's name, a cpu
# list of up to 65535 cpus, a counter's name.
STRING_LIMITS = {("mappings", "path"): 4096, ("threads", "comm"): 256,
                 ("threads", "affinity_first"): 1 << 18, ("threads", "affinity_last"): 1 << 18,
                 ("counters", "name"): 256}
STRING_LIMIT = 4096


def _open_column(path: Path) -> tuple[object, str, int, os.stat_result]:
    """Open a column file: (file object, dtype, rows, fstat).  The 16-byte header is
    checked."""
    fd, st = profile_io.open_regular(path)
    f = os.fdopen(fd, "rb")
    try:
        head = f.read(HEADER)
    except OSError as e:
        f.close()
        raise ProfileError(f"{path}: cannot read ({e.strerror})") from None
    if len(head) < HEADER:
        f.close()
        raise ProfileError(f"{path}: truncated column file ({len(head)}-byte header, expected 16)")
    if head[:8] != MAGIC:
        f.close()
        raise ProfileError(f"{path}: not a numaprof column (bad magic {head[:8]!r})")
    dtype = head[8:].rstrip(b"\0").decode("ascii", "replace")
    if dtype not in _VALID_DTYPES:
        f.close()
        raise ProfileError(f"{path}: corrupted column header (unknown dtype {dtype!r})")
    rows = (st.st_size - HEADER) // np.dtype(dtype).itemsize  # a partly written last value is dropped
    return f, dtype, rows, st


def _map_column(f, dtype: str, rows: int) -> np.ndarray:
    """The first ``rows`` values of an opened column, memory-mapped (the map keeps its own
    reference to the file: ``f`` may be closed)."""
    try:
        if rows <= 0:
            return np.zeros(0, dtype=dtype)
        return np.memmap(f, dtype=dtype, mode="r", offset=HEADER, shape=(rows,))
    except (OSError, ValueError) as e:
        raise ProfileError(f"{f.name}: cannot map ({getattr(e, 'strerror', None) or e})") from None
    finally:
        f.close()


def chunks(n: int, size: int):
    """(start, end) of the consecutive row ranges of at most ``size`` rows of a table of
    ``n`` rows."""
    for a in range(0, n, size):
        yield a, min(a + size, n)


def rows_of(col: np.ndarray, a: int, b: int) -> np.ndarray:
    """Rows [a, b) of a column, copied, after which the pages of a memory-mapped column
    leave this process's resident set: a column of any length is read for one chunk of
    memory."""
    out = np.array(col[a:b])
    release(col, a, b)
    return out


def release(col: np.ndarray, a: int, b: int) -> None:
    """Drop the pages of rows [a, b) of a memory-mapped column from this process's
    resident set (madvise MADV_DONTNEED: the file's pages stay in the page cache and are
    mapped again if touched)."""
    m = getattr(col, "_mmap", None)
    if not isinstance(col, np.memmap) or m is None or b <= a:
        return
    size = col.dtype.itemsize
    delta = col.offset % mmap.ALLOCATIONGRANULARITY  # where row 0 is in the mapping
    lo = (delta + a * size) // mmap.PAGESIZE * mmap.PAGESIZE
    hi = min(len(m), -(-(delta + b * size) // mmap.PAGESIZE) * mmap.PAGESIZE)
    if hi > lo:
        m.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _read_strings(col: Path, offsets: np.ndarray, max_len: int) -> np.ndarray:
    """Decode a str column: offsets into the NUL-terminated strings of the .heap file.

    The heap holds at most one string of at most ``max_len`` bytes per row; a longer
    heap or string is refused, as is an offset beyond the heap.
    """
    heap_path = col.with_suffix(".heap")
    limit = (len(offsets) + 1) * (max_len + 1)
    try:
        heap = profile_io.read_bytes(heap_path, limit)
    except FileNotFoundError:
        raise ProfileError(f"{heap_path}: missing string heap of {col.name}") from None
    out = np.empty(len(offsets), dtype=object)
    cache: dict[int, str] = {}
    for i, off in enumerate(offsets.tolist()):
        s = cache.get(off)
        if s is None:
            if off >= len(heap) and not (off == 0 and not heap):
                raise ProfileError(f"{heap_path}: corrupted (offset {off} beyond {len(heap)} bytes)")
            end = heap.find(b"\0", off, off + max_len + 1)
            if end < 0 and len(heap) - off > max_len:
                raise ProfileError(f"{heap_path}: corrupted (a string at offset {off} is longer "
                                   f"than {max_len} bytes)")
            s = heap[off : (len(heap) if end < 0 else end)].decode("utf-8", "replace")
            cache[off] = s
        out[i] = s
    return out


# A table of more rows than this whose column files are almost all holes is refused.
SPARSE_ROWS = 1 << 20
SPARSE_RATIO = 64


def _check_not_sparse(d: Path, name: str, rows: int, stats: list[os.stat_result]) -> None:
    """Refuses a large table stored in sparse files: numaprof-collect writes its columns
    sequentially, so their blocks are all allocated, while a crafted profile of a few
    kilobytes (a tar archive restores holes) could claim billions of rows.  Compressing
    file systems store fewer blocks than the size too, but not 64 times fewer for a
    whole table: its time and address columns do not compress that well."""
    if rows <= SPARSE_ROWS:
        return
    apparent = sum(st.st_size for st in stats)
    stored = sum(st.st_blocks * 512 for st in stats)
    if stored * SPARSE_RATIO < apparent:
        raise ProfileError(f"{d}: table {name} claims {rows} rows in sparse files ({apparent} "
                           f"bytes, {stored} stored): not a recording")


def read_table(directory: str | os.PathLike, name: str, max_rows: int | None = None) -> Table:
    """Read table ``name`` of a profile directory as ``{column: array}``.

    Numeric columns are read-only memory maps; ``str`` columns are object arrays of str.
    All columns have the length of the shortest one (a run cut short leaves the last row
    partly written).  A table with no column files is empty; optional columns that are
    absent read as zeros; a missing required column, a bad header, a dtype other than
    the documented one, a file that is not a regular file, or more rows than ``max_rows``
    (default: the table's limit in :data:`ROW_LIMITS`) raise :class:`ProfileError`.
    """
    d = Path(directory)
    schema = SCHEMA.get(name, {})
    limit = ROW_LIMITS.get(name, ROW_LIMIT) if max_rows is None else max_rows
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
    str_cols: set[str] = set()
    if found:
        missing = [c for c, (_, req, _) in schema.items() if req and c not in found]
        if missing:
            raise ProfileError(f"{d}: table {name} lacks column(s) {', '.join(missing)}")
    opened: dict[str, tuple] = {}
    try:
        for col, path in sorted(found.items()):
            f, dtype, n, st = _open_column(path)
            opened[col] = (f, dtype, n, st)
            expect = schema.get(col)
            if expect is not None and dtype != expect[0]:
                raise ProfileError(f"{path}: dtype {dtype}, expected {expect[0]}")
            if expect is not None and expect[2]:
                str_cols.add(col)
        rows = min((v[2] for v in opened.values()), default=0)
        if rows > limit:
            shortest = min(opened, key=lambda c: opened[c][2])
            raise ProfileError(f"{found[shortest]}: {rows} rows, more than the {limit} the "
                               f"{name} table may hold")
        _check_not_sparse(d, name, rows, [v[3] for v in opened.values()])
        raw = {col: _map_column(f, dtype, rows) for col, (f, dtype, _, _) in opened.items()}
    finally:
        for v in opened.values():
            v[0].close()
    out: Table = {}
    for col, arr in raw.items():
        if col in str_cols:
            out[col] = _read_strings(found[col], arr, STRING_LIMITS.get((name, col), STRING_LIMIT))
        else:
            out[col] = arr
    for col, (dtype, _, is_str) in schema.items():
        if col not in out:
            if is_str:
                out[col] = np.full(rows, "", dtype=object)
            else:
                out[col] = np.zeros(rows, dtype=dtype)
    return out


def _check_values(d: Path, name: str, t: Table) -> None:
    """Refuses values the collector never writes and that would make the analysis ask
    for absurd amounts of memory: a page size that is not one, an object or mapping
    that wraps around the address space."""
    def refuse(col: str, bad: np.ndarray, what: str):
        row = int(np.argmax(bad))
        raise ProfileError(f"{d}/{name}.{col}.col: row {row}: {int(t[col][row])} {what}")

    for col in TIME_COLUMNS.get(name, ()):
        for a, b in chunks(len(t[col]), CHECK_CHUNK):  # a long column a chunk at a time
            bad = rows_of(t[col], a, b).astype(np.uint64) >= np.uint64(2**63)
            if bad.any():
                row = a + int(np.argmax(bad))
                raise ProfileError(f"{d}/{name}.{col}.col: row {row}: {int(t[col][row])} ns: beyond 63 "
                                   "bits (times are CLOCK_MONOTONIC nanoseconds)")
    if name == "faults" and len(t["page_size"]):
        size = np.asarray(t["page_size"], dtype=np.uint64)
        bad = (size != 0) & (((size & (size - np.uint64(1))) != 0) | (size < np.uint64(4096))
                             | (size > np.uint64(1 << 30)))
        if bad.any():
            refuse("page_size", bad, "is not a page size (0, or a power of two from 4 KiB "
                   "to 1 GiB)")
    if name == "object_pages" and len(t["pages"]):
        pages, asked = (np.asarray(t[c], dtype=np.uint64) for c in ("pages", "sampled"))
        count = np.asarray(t["count"], dtype=np.uint64)
        limit = np.uint64(ADDRESS_SPACE >> 12)
        bad = (pages > limit) | (asked > pages) | (count > asked)
        if bad.any():
            refuse("count", bad, "pages: more than were asked, or asked of more pages than "
                   "the object holds, or beyond the address space")
    for table, start, length in (("objects", "addr", "size"), ("mappings", "start", "len")):
        if name == table and len(t[length]):
            size = np.asarray(t[length], dtype=np.uint64)
            bad = (size > np.uint64(ADDRESS_SPACE)) | (
                np.asarray(t[start], dtype=np.uint64) > np.uint64(2**64 - 1) - size)
            if bad.any():
                refuse(length, bad, "bytes: beyond the address space")


CHECK_CHUNK = 1 << 22
TIME_COLUMNS = {"samples": ("time",), "faults": ("time",), "page_nodes": ("time",),
                "object_pages": ("time",),
                "mappings": ("time",), "objects": ("time", "free_time"),
                "threads": ("start_time", "end_time"), "counters": ("time",)}
ADDRESS_SPACE = 1 << 57  # user address space of x86-64 with 5-level paging (128 PiB)
NUMA_MAPS_LIMIT = 256 * profile_io.MiB  # all numa_maps.<pid> files of a profile together
PID_MAX = 1 << 22  # Linux's PID_MAX_LIMIT: process and thread ids are below it


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
        """Columns of table ``name`` (see :func:`read_table`), cached per profile.  A table
        the manifest counts (samples, faults, page_nodes) may hold no more rows than it
        says."""
        t = self._tables.get(name)
        if t is None:
            limit = ROW_LIMITS.get(name, ROW_LIMIT)
            count = (self.manifest.get("counts") or {}).get(COUNTED.get(name, ""))
            if count is not None and count < limit:
                limit = count
            t = read_table(self.path, name, max_rows=limit)
            _check_values(self.path, name, t)
            self._tables[name] = t
        return t

    def has_table(self, name: str) -> bool:
        return any(p.name.startswith(name + ".") for p in self.path.glob(name + ".*.col"))

    def has_topology(self) -> bool:
        """Whether the profile has a topology.json or topology.xml (of any file type: one
        that is not a regular file is refused when read)."""
        return any(os.path.lexists(self.path / n) for n in ("topology.json", "topology.xml"))

    def topology(self) -> model.Topology:
        """The topology recorded with the profile (topology.json, else topology.xml)."""
        if self._topology is None:
            from numaprof.analyzer import topology as topo

            j, x = self.path / "topology.json", self.path / "topology.xml"
            if os.path.lexists(j):
                self._topology = topo.load_topology_json(j)
            elif os.path.lexists(x):
                self._topology = topo.load_hwloc_xml(x, follow=False)
            else:
                raise ProfileError(f"{self.path}: no topology.json or topology.xml in the profile")
        return self._topology

    def numa_maps(self) -> dict[int, str]:
        """``{pid: text}`` of the numa_maps.<pid> files saved at exit (each at most
        :data:`~numaprof.analyzer.profile_io.TEXT_LIMIT` bytes, together at most
        :data:`NUMA_MAPS_LIMIT`)."""
        out = {}
        total = 0
        for p in sorted(self.path.glob("numa_maps.*")):
            suffix = p.name.split(".", 1)[1]
            if not (suffix.isascii() and suffix.isdigit()):
                continue
            pid = int(suffix) if len(suffix) <= 8 else PID_MAX
            if pid >= PID_MAX:
                raise ProfileError(f"{p}: pid {suffix} is not a Linux process id")
            text = profile_io.decode_utf8(profile_io.read_bytes(p, profile_io.TEXT_LIMIT), p)
            total += len(text)
            if total > NUMA_MAPS_LIMIT:
                raise ProfileError(f"{self.path}: the numa_maps files hold more than "
                                   f"{NUMA_MAPS_LIMIT} bytes")
            out[pid] = text
        return out

    def __repr__(self) -> str:
        return f"Profile({str(self.path)!r})"


def open_profile(path: str | os.PathLike) -> Profile:
    """Open a profile directory after checking its manifest (format, version, the types
    of the fields the analyzer uses: :func:`check_manifest`).

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
        manifest = profile_io.read_json(mf)
    except FileNotFoundError:
        raise ProfileError(f"{p}: not a numaprof profile (no manifest.json)") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        fmt = manifest.get("format") if isinstance(manifest, dict) else None
        raise ProfileError(f"{p}: not a numaprof profile (format {fmt!r:.40}, expected {FORMAT!r})")
    version = manifest.get("version")
    if version != VERSION or isinstance(version, bool):
        raise ProfileError(
            f"{p}: profile format version {version!r:.40}, this numaprof reads version {VERSION}"
        )
    return Profile(p, check_manifest(manifest, mf))


def _strings(value, path, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise profile_io.field_error(path, key, "an array of strings", value)
    return value


def _string_map(value, path, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise profile_io.field_error(path, key, "an object of strings", value)
    return value


def check_manifest(m: dict, path) -> dict:
    """The manifest with the fields the analyzer reads checked for their documented types
    (docs/profile-format.md); a field of another type raises :class:`ProfileError`
    naming it.  Absent fields read as null (empty for lists and objects)."""
    io = profile_io
    out = dict(m)
    complete = m.get("complete", False)
    if not isinstance(complete, bool):
        raise io.field_error(path, "complete", "true or false", complete)
    io.get_str(m, "incomplete_reason", path)
    out["command"] = _strings(m.get("command"), path, "command")
    out["argv"] = _strings(m.get("argv"), path, "argv")
    out["warnings"] = _strings(m.get("warnings"), path, "warnings")
    for key in ("cwd", "host", "start_time", "end_time", "backend"):
        io.get_str(m, key, path)
    out["env"] = _string_map(m.get("env"), path, "env")
    out["backend_reason"] = _string_map(m.get("backend_reason"), path, "backend_reason")
    io.get_int(m, "exit_status", path, lo=-(2**31), hi=2**31 - 1)
    sampling = io.get_dict(m, "sampling", path)
    io.get_int(sampling, "freq", path, where="sampling.freq")
    out["sampling"] = sampling
    counts = io.get_dict(m, "counts", path)
    for key in counts:
        io.get_int(counts, key, path, where=f"counts.{key}")
    out["counts"] = counts
    collector = io.get_dict(m, "collector", path)
    io.get_str(collector, "backend", path, where="collector.backend")
    io.get_int(collector, "fault_period", path, lo=1, hi=1 << 20, where="collector.fault_period")
    out["collector"] = collector
    return out
