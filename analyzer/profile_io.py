"""Reading the files of a profile, which may come from anyone (docs/security.md).

A profile is data, never instructions.  Every file of it is opened with ``O_NOFOLLOW``
(a symbolic link is refused, so a profile cannot point at a file elsewhere) and
``O_NONBLOCK`` (a FIFO cannot hang the reader), must then be a regular file (``fstat``:
no device such as /dev/zero, no FIFO, no directory), and is read only up to a limit.
Names taken from a profile (archive digests) are checked before they are joined to a
path.  Every failure is a :class:`~numaprof.errors.ProfileError` whose one line names the
file and what is wrong with it.  The limits are documented in docs/profile-format.md.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from pathlib import Path

from numaprof.errors import ProfileError

MiB = 1 << 20
JSON_LIMIT = 64 * MiB  # manifest.json, topology.json, archive.json, sources.json
TEXT_LIMIT = 64 * MiB  # topology.xml, each numa_maps.<pid>
JSON_DEPTH = 32  # nesting of arrays and objects in a profile's JSON files
ARCHIVE_FILE_LIMIT = 256 * MiB  # record copies at most this much into archive/
DIGEST = re.compile(r"[0-9a-f]{64}")

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK:
          "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory",
          stat.S_IFLNK: "a symbolic link"}


def file_kind(mode: int) -> str:
    """'a FIFO', 'a directory', ... for an st_mode that is not a regular file's."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def open_regular(path: str | os.PathLike, *, follow: bool = False) -> tuple[int, os.stat_result]:
    """Open ``path`` read-only as a regular file: ``(fd, fstat)``.

    Without ``follow`` a symbolic link is refused (``O_NOFOLLOW``); ``O_NONBLOCK`` keeps a
    FIFO from blocking the open, and anything but a regular file is then refused.
    ``FileNotFoundError`` passes through (callers know whether the file is optional);
    every other failure is a :class:`ProfileError`.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:
        if e.errno == errno.ELOOP:
            why = ("a symbolic link (a profile holds regular files only)" if not follow
                   else "a loop of symbolic links")
            raise ProfileError(f"{path}: {why}") from None
        raise ProfileError(f"{path}: cannot read ({e.strerror})") from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise ProfileError(f"{path}: cannot read ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ProfileError(f"{path}: {file_kind(st.st_mode)}, not a regular file")
    return fd, st


def read_bytes(path: str | os.PathLike, limit: int, *, follow: bool = False) -> bytes:
    """The bytes of the regular file ``path``, refused when it holds more than ``limit``."""
    fd, st = open_regular(path, follow=follow)
    try:
        if st.st_size > limit:
            raise ProfileError(f"{path}: {st.st_size} bytes, more than the {limit} such a "
                               "file may hold")
        chunks, total = [], 0
        while True:
            try:
                chunk = os.read(fd, min(limit + 1 - total, 1 << 24))
            except OSError as e:
                raise ProfileError(f"{path}: cannot read ({e.strerror})") from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while being read
                raise ProfileError(f"{path}: more than the {limit} bytes such a file may hold")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, limit: int = TEXT_LIMIT) -> str:
    """The UTF-8 text of a profile file (see :func:`read_bytes`)."""
    return decode_utf8(read_bytes(path, limit), path)


def decode_utf8(data: bytes, path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProfileError(f"{path}: not UTF-8 text (byte {data[e.start]:#04x} at offset "
                           f"{e.start})") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def read_json(path: str | os.PathLike, limit: int = JSON_LIMIT):
    """The JSON document in a profile file: UTF-8, standard JSON (no NaN or Infinity), at
    most ``limit`` bytes and :data:`JSON_DEPTH` levels deep."""
    text = read_text(path, limit)
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ProfileError(f"{path}: corrupted (nested more than {JSON_DEPTH} levels)") from None
    except ValueError as e:  # JSONDecodeError, NaN, an integer of thousands of digits
        raise ProfileError(f"{path}: corrupted ({getattr(e, 'msg', e)})") from None
    if _depth(doc) > JSON_DEPTH:
        raise ProfileError(f"{path}: corrupted (nested more than {JSON_DEPTH} levels)")
    return doc


def _depth(doc) -> int:
    deepest, todo = 0, [(doc, 1)]
    while todo:
        value, d = todo.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, d)
            if d <= JSON_DEPTH:
                todo.extend((v, d + 1) for v in (value.values() if isinstance(value, dict)
                                                 else value))
    return deepest


# ------------------------------------------------------------------ typed JSON fields

def field_error(path, key: str, want: str, value) -> ProfileError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ProfileError(f"{path}: {key} is {shown}, expected {want}")


def get_int(doc: dict, key: str, path, *, default=None, lo: int = 0, hi: int = 2**63 - 1,
            where: str | None = None):
    """``doc[key]`` as an int in [lo, hi] (a bool is not an int); ``default`` when absent or
    null.  Anything else raises :class:`ProfileError` naming ``path`` and ``key``."""
    value = doc.get(key) if isinstance(doc, dict) else None
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise field_error(path, where or key, f"an integer from {lo} to {hi}", value)
    return value


def get_number(doc: dict, key: str, path, *, default=None, where: str | None = None):
    """``doc[key]`` as a finite float; ``default`` when absent or null."""
    value = doc.get(key) if isinstance(doc, dict) else None
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise field_error(path, where or key, "a finite number", value)
    return float(value)


def get_str(doc: dict, key: str, path, *, default=None, where: str | None = None):
    """``doc[key]`` as a str; ``default`` when absent or null."""
    value = doc.get(key) if isinstance(doc, dict) else None
    if value is None:
        return default
    if not isinstance(value, str):
        raise field_error(path, where or key, "a string", value)
    return value


def get_dict(doc: dict, key: str, path, *, where: str | None = None) -> dict:
    """``doc[key]`` as a dict ({} when absent or null)."""
    value = doc.get(key) if isinstance(doc, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise field_error(path, where or key, "an object", value)
    return value


def get_list(doc: dict, key: str, path, *, where: str | None = None) -> list:
    """``doc[key]`` as a list ([] when absent or null)."""
    value = doc.get(key) if isinstance(doc, dict) else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise field_error(path, where or key, "an array", value)
    return value


# --------------------------------------------------------------------------- archive

def archive_copy(profile_dir: str | os.PathLike, digest) -> Path:
    """The path of ``archive/<digest>`` in a profile, after checking that ``digest`` is a
    sha256 (64 lowercase hex digits, so no ``/`` or ``..``), that ``archive`` is a
    directory of the profile (not a symbolic link), and that the copy, symbolic links
    resolved, lies inside the profile.  Raises :class:`ProfileError` otherwise and
    ``FileNotFoundError`` when the copy is absent."""
    base = Path(profile_dir)
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise field_error(base / "archive.json", "a digest", "a sha256 (64 hex digits)", digest)
    archive = base / "archive"
    st = os.lstat(archive)
    if not stat.S_ISDIR(st.st_mode):
        raise ProfileError(f"{archive}: {file_kind(st.st_mode)}, not a directory")
    copy = archive / digest
    real_base = os.path.realpath(base)
    if os.path.commonpath([real_base, os.path.realpath(copy)]) != real_base:
        raise ProfileError(f"{copy}: outside the profile")
    st = os.lstat(copy)
    if not stat.S_ISREG(st.st_mode):
        raise ProfileError(f"{copy}: {file_kind(st.st_mode)}, not a regular file")
    return copy
