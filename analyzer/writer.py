"""Writing profile tables in the on-disk format of docs/profile-format.md (Python side).

The collector writes profiles from C; this writer serves the importers (perf.data) and
the test fixtures, with the same column dtypes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

MAGIC = b"NMPCOL01"

DTYPES = {
    "samples": {"time": "<u8", "pid": "<u4", "tid": "<u4", "cpu": "<u2", "ip": "<u8",
                "addr": "<u8", "access": "|u1", "size": "|u1", "rule": "|u1", "weight": "<u4",
                "data_src": "<u8", "phys_addr": "<u8"},
    "faults": {"time": "<u8", "pid": "<u4", "tid": "<u4", "cpu": "<u2", "ip": "<u8",
               "addr": "<u8", "flags": "|u1", "source": "|u1"},
    "page_nodes": {"time": "<u8", "pid": "<u4", "page": "<u8", "node": "<i2"},
    "mappings": {"time": "<u8", "pid": "<u4", "start": "<u8", "len": "<u8", "pgoff": "<u8",
                 "prot": "<u4", "flags": "<u4", "path": "str"},
    "threads": {"pid": "<u4", "tid": "<u4", "ppid": "<u4", "start_time": "<u8",
                "end_time": "<u8", "comm": "str", "affinity_first": "str",
                "affinity_last": "str", "samples": "<u8"},
    "objects": {"time": "<u8", "free_time": "<u8", "pid": "<u4", "tid": "<u4", "addr": "<u8",
                "size": "<u8", "kind": "|u1", "stack": "<u4", "prev": "<u8"},
    "stack_frames": {"stack": "<u4", "depth": "<u2", "ip": "<u8"},
    "counters": {"time": "<u8", "phase": "|u1", "node": "<i2", "name": "str", "value": "<u8"},
}


def _open_0600(path: Path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    return os.fdopen(fd, "wb")


def write_column(path: str | os.PathLike, values, dtype: str) -> None:
    """One `.col` file: magic, the dtype string NUL-padded to 8 bytes, then the values."""
    arr = np.ascontiguousarray(np.asarray(values), dtype=np.dtype(dtype))
    with _open_0600(Path(path)) as f:
        f.write(MAGIC + dtype.encode().ljust(8, b"\0"))
        f.write(arr.tobytes())


def write_str_column(path: str | os.PathLike, strings) -> None:
    """A `str` column: `<u8` offsets in the .col file, NUL-terminated strings in the .heap."""
    heap = bytearray()
    offsets = []
    index: dict[str, int] = {}
    for s in strings:
        if s not in index:
            index[s] = len(heap)
            heap += s.encode("utf-8", "surrogateescape") + b"\0"
        offsets.append(index[s])
    write_column(path, np.array(offsets, dtype="<u8"), "<u8")
    with _open_0600(Path(path).with_suffix(".heap")) as f:
        f.write(bytes(heap))


def write_table(directory: str | os.PathLike, name: str, **columns) -> None:
    """Writes the given columns of table `name` (dtypes from DTYPES)."""
    types = DTYPES[name]
    for col, values in columns.items():
        target = Path(directory) / f"{name}.{col}.col"
        if types[col] == "str":
            write_str_column(target, [str(v) for v in values])
        else:
            write_column(target, values, types[col])


def write_json(path: str | os.PathLike, doc: dict) -> None:
    """Writes a JSON file 0600 through a temporary file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with _open_0600(tmp) as f:
        f.write((json.dumps(doc, indent=1) + "\n").encode())
    os.replace(tmp, path)
