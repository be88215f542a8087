"""Writing profile tables in the on-disk format of docs/profile-format.md (Python side).

The collector writes profiles from C; this writer serves the importers (perf.data) and
the test fixtures, with the same column dtypes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from numaprof.analyzer.format import MAGIC, SCHEMA

# Column dtypes as the reader checks them (one schema: analyzer.profile.SCHEMA).
DTYPES = {table: {col: ("str" if is_str else dtype) for col, (dtype, _, is_str) in cols.items()}
          for table, cols in SCHEMA.items()}


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
