"""The source files a profile depends on, and their hashes at record time.

`suggest --apply` patches the user's sources only if each file still has the content the
profiled binary was built from (docs/apply.md).  After the run, `record` calls
`write_sources_json` with the executables (and the user's shared objects) it saw; the
file names come from the DWARF line-program file tables, so every source that
contributed a line to the binary is covered, headers included.  System files (under
/usr) and files that no longer exist are left out: they are never patched.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat

from numaprof.errors import ProfileError
from numaprof.syspaths import is_system_path

SOURCES_FILE = "sources.json"
SCHEMA = "numaprof.sources/1"



def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a regular file's bytes.

    The path may come from a profile: anything but a regular file (a FIFO would block
    the read, a device never end) is an OSError, as an unreadable file is.
    """
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: str) -> tuple | None:
    """What must not change for an earlier result about PATH to stand (None: no file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class HashCache:
    """Results of `sha256_file` and `dwarf_source_files` that stay valid while the file's
    identity, size and times are unchanged.

    `record` fills one in a background thread while the program runs (the command's own
    executable is known before it starts), so that what is left after the exit is a
    `stat` per file instead of reading the DWARF and hashing every source again.  A file
    changed since it was read is read again: the result is what `hash_sources` without a
    cache gives after the run.
    """

    def __init__(self) -> None:
        self._digests: dict[str, tuple[tuple, str]] = {}
        self._sources: dict[str, tuple[tuple, list[str]]] = {}

    def digest(self, path: str) -> str:
        key = _stat_key(path)
        hit = self._digests.get(path)
        if key is not None and hit is not None and hit[0] == key:
            return hit[1]
        value = sha256_file(path)
        if key is not None and _stat_key(path) == key:  # not changed while it was read
            self._digests[path] = (key, value)
        return value

    def source_files(self, executable: str) -> list[str]:
        key = _stat_key(executable)
        hit = self._sources.get(executable)
        if key is not None and hit is not None and hit[0] == key:
            return hit[1]
        value = dwarf_source_files(executable)
        if key is not None and _stat_key(executable) == key:
            self._sources[executable] = (key, value)
        return value


def _decode(value) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def dwarf_source_files(executable_path: str | os.PathLike) -> list[str]:
    """Absolute paths named by the DWARF line-program file tables of one ELF file.

    Returns an empty list for a file that is not ELF or has no debug information: a
    stripped binary simply gives `--apply` nothing it may patch.
    """
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    paths: list[str] = []
    try:
        f = open(executable_path, "rb")
    except OSError:
        return paths
    with f:
        try:
            elf = ELFFile(f)
            if not elf.has_dwarf_info():
                return paths
            dwarf = elf.get_dwarf_info()
            for cu in dwarf.iter_CUs():
                lp = dwarf.line_program_for_CU(cu)
                if lp is None:
                    continue
                top = cu.get_top_DIE()
                comp_attr = top.attributes.get("DW_AT_comp_dir")
                comp_dir = _decode(comp_attr.value) if comp_attr else ""
                dirs = [_decode(d) for d in lp.header.get("include_directory", ())]
                version = lp.header.get("version", cu.header.version)
                for fe in lp.header.get("file_entry", ()):
                    name = _decode(fe.name)
                    idx = fe.dir_index
                    # DWARF 5 numbers directories from 0 (entry 0 is the compilation
                    # directory); DWARF 2-4 use 0 for the compilation directory and
                    # number the table from 1.
                    if version >= 5:
                        d = dirs[idx] if idx < len(dirs) else comp_dir
                    else:
                        d = comp_dir if idx == 0 else (dirs[idx - 1] if idx - 1 < len(dirs) else "")
                    if not os.path.isabs(d):
                        d = os.path.join(comp_dir, d)
                    full = name if os.path.isabs(name) else os.path.join(d, name)
                    paths.append(os.path.normpath(full))
        except (ELFError, ValueError, KeyError, IndexError):
            # A corrupt or unusual debug section: hash what was read so far.
            pass
    seen: set[str] = set()
    return [p for p in paths if not (p in seen or seen.add(p))]


def hash_sources(executable_paths, cache: HashCache | None = None) -> dict[str, str]:
    """Map each user source file of the given ELF files to its sha256.

    Only files that exist on disk and are not system files (numaprof.syspaths) are kept; paths
    are absolute and resolved through symbolic links, since that is what `--apply`
    writes to.  With a `HashCache`, files unchanged since it read them are not read again.
    """
    cache = cache or HashCache()
    result: dict[str, str] = {}
    exes = dict.fromkeys(os.path.realpath(e) for e in executable_paths)
    for exe in exes:
        if is_system_path(exe):
            continue  # system libraries: their sources are never the user's to patch
        for path in cache.source_files(exe):
            real = os.path.realpath(path)
            if real in result or is_system_path(real):
                continue
            if not os.path.isfile(real):
                continue
            try:
                result[real] = cache.digest(real)
            except OSError:
                continue
    return dict(sorted(result.items()))


def write_sources_json(profile_dir: str | os.PathLike, executable_paths,
                       cache: HashCache | None = None) -> dict[str, str]:
    """Hash the sources of `executable_paths` and store them as `sources.json` in the profile.

    The file is created 0600 like the rest of the profile.  Returns the mapping written.
    """
    hashes = hash_sources(executable_paths, cache)
    doc = {"schema": SCHEMA, "files": hashes}
    path = os.path.join(os.fspath(profile_dir), SOURCES_FILE)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return hashes


def read_sources_json(profile_dir: str | os.PathLike) -> dict[str, str]:
    """The path -> sha256 map stored by `write_sources_json`.

    Raises ProfileError when the profile has none (recorded before sources were hashed)
    or the file is not a `numaprof.sources/1` document: a regular file of the profile
    (read as docs/security.md says every profile file is) mapping absolute paths to
    sha256 digests.
    """
    from numaprof.analyzer import profile_io

    path = os.path.join(os.fspath(profile_dir), SOURCES_FILE)
    try:
        doc = profile_io.read_json(path)
    except FileNotFoundError:
        raise ProfileError(
            f"{profile_dir} has no {SOURCES_FILE}: the source hashes were not recorded; "
            "re-record to patch sources") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(
            doc.get("files"), dict):
        raise ProfileError(f"{path}: not a {SCHEMA} document")
    for name, digest in doc["files"].items():
        if not os.path.isabs(name) or "\0" in name:
            raise profile_io.field_error(path, "a source path", "an absolute path", name)
        if not isinstance(digest, str) or not profile_io.DIGEST.fullmatch(digest):
            raise profile_io.field_error(path, f"the digest of {name!r:.60}",
                                         "a sha256 (64 hex digits)", digest)
    return dict(doc["files"])
