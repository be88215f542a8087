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

    def prime(self, executables: list[str]) -> None:
        """Reads the source files of those of `executables` not known yet, in one go."""
        todo = [e for e in executables if (key := _stat_key(e)) is None
                or self._sources.get(e, ((), []))[0] != key]
        for exe, value in zip(todo, source_files_of(todo), strict=True):
            key = _stat_key(exe)
            if key is not None:
                self._sources[exe] = (key, value)

    def source_files(self, executable: str) -> list[str]:
        key = _stat_key(executable)
        hit = self._sources.get(executable)
        if key is not None and hit is not None and hit[0] == key:
            return hit[1]
        value = dwarf_source_files(executable)
        if key is not None and _stat_key(executable) == key:
            self._sources[executable] = (key, value)
        return value


def dwarf_source_files(executable_path: str | os.PathLike) -> list[str]:
    """Absolute, normalised paths named by the DWARF line-program file tables of one ELF
    file, in order, each once (`source_files_of`)."""
    return source_files_of([executable_path])[0]


def source_files_of(executable_paths: list) -> list[list[str]]:
    """`dwarf_source_files` of each of `executable_paths`, read in one run of the collector.

    Read by the collector (`numaprof-collect --source-files`, libdw:
    collector/src/srcfiles.c), a few milliseconds where a Python DWARF reader's imports
    alone took 30-40, after the program's exit for a short one.  Returns an empty list
    for a file that is not ELF or has no debug information (a stripped binary simply
    gives `--apply` nothing it may patch), and when the collector cannot be run.
    """
    from numaprof import paths
    from numaprof.errors import NumaprofError

    none: list[list[str]] = [[] for _ in executable_paths]
    if not executable_paths:
        return none
    try:
        collector = str(paths.collector())
    except NumaprofError:
        return none
    argv = [collector, "--source-files", *map(os.fspath, executable_paths)]
    rfd, wfd = os.pipe()
    try:
        # posix_spawn: the subprocess module is 3 ms of imports; the mask is cleared for
        # a caller that blocks signals (record's threads)
        pid = os.posix_spawn(collector, argv, os.environ, setsigmask=(),
                             file_actions=[(os.POSIX_SPAWN_DUP2, wfd, 1)])
    except OSError:
        os.close(rfd)
        return none
    finally:
        os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        data = f.read()
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        # reaped by another thread: `record`'s supervisor reaps every child of the
        # process (cli/supervise.py) while its prefetch thread runs this.  The output
        # itself tells whether the run was whole (below).
        status = 0
    if status != 0:
        return none
    # each list is its count and its paths, every field ended by a NUL: a run cut short
    # leaves a list short, a field unended or lists missing
    fields, at, lists = data.split(b"\0"), 0, []
    for _ in executable_paths:
        if at >= len(fields) or not fields[at].isdigit():
            return none
        n = int(fields[at])
        if at + 1 + n >= len(fields):
            return none
        lists.append([p.decode("utf-8", "surrogateescape") for p in fields[at + 1:at + 1 + n]])
        at += 1 + n
    if fields[at:] != [b""]:
        return none
    return lists


def hash_sources(executable_paths, cache: HashCache | None = None) -> dict[str, str]:
    """Map each user source file of the given ELF files to its sha256.

    Only files that exist on disk and are not system files (numaprof.syspaths) are kept; paths
    are absolute and resolved through symbolic links, since that is what `--apply`
    writes to.  With a `HashCache`, files unchanged since it read them are not read again.
    """
    cache = cache or HashCache()
    result: dict[str, str] = {}
    exes = dict.fromkeys(os.path.realpath(e) for e in executable_paths)
    cache.prime([e for e in exes if not is_system_path(e)])
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
